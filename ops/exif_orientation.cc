#include "ops/exif_orientation.h"

#include <cstring>

namespace sluice {
namespace {

constexpr uint16_t kOrientationTag = 0x0112;
constexpr uint16_t kTypeShort = 3;
constexpr uint16_t kTypeLong = 4;

struct TiffReader {
  std::span<const uint8_t> d;
  bool big_endian = false;
  bool Has(size_t off, size_t n) const { return off <= d.size() && n <= d.size() - off; }
  uint16_t U16(size_t off) const {
    return big_endian ? static_cast<uint16_t>(d[off] << 8 | d[off + 1])
                      : static_cast<uint16_t>(d[off + 1] << 8 | d[off]);
  }
  uint32_t U32(size_t off) const {
    return big_endian ? (uint32_t{U16(off)} << 16 | U16(off + 2))
                      : (uint32_t{U16(off + 2)} << 16 | U16(off));
  }
};

}  // namespace

int TiffOrientation(std::span<const uint8_t> tiff) {
  TiffReader r{tiff};
  if (!r.Has(0, 8)) return 1;
  if (tiff[0] == 'M' && tiff[1] == 'M') {
    r.big_endian = true;
  } else if (!(tiff[0] == 'I' && tiff[1] == 'I')) {
    return 1;
  }
  if (r.U16(2) != 42) return 1;
  const size_t ifd = r.U32(4);
  if (!r.Has(ifd, 2)) return 1;
  const size_t count = r.U16(ifd);
  for (size_t i = 0; i < count; ++i) {
    const size_t e = ifd + 2 + 12 * i;
    if (!r.Has(e, 12)) return 1;
    if (r.U16(e) != kOrientationTag) continue;
    const uint16_t type = r.U16(e + 2);
    if (r.U32(e + 4) < 1) return 1;
    uint32_t v = 0;
    if (type == kTypeShort) {
      v = r.U16(e + 8);
    } else if (type == kTypeLong) {
      v = r.U32(e + 8);
    } else {
      return 1;
    }
    return v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
  }
  return 1;
}

int JpegExifOrientation(std::span<const uint8_t> jpeg) {
  if (jpeg.size() < 4 || jpeg[0] != 0xFF || jpeg[1] != 0xD8) return 1;
  size_t pos = 2;
  while (pos + 4 <= jpeg.size()) {
    if (jpeg[pos] != 0xFF) return 1;
    const uint8_t marker = jpeg[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {  // no length
      pos += 2;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 1;  // scan data or end: no EXIF
    const size_t length = size_t{jpeg[pos + 2]} << 8 | jpeg[pos + 3];
    if (length < 2 || pos + 2 + length > jpeg.size()) return 1;
    const std::span<const uint8_t> body = jpeg.subspan(pos + 4, length - 2);
    if (marker == 0xE1 && body.size() >= 6 && std::memcmp(body.data(), "Exif\0\0", 6) == 0) {
      return TiffOrientation(body.subspan(6));  // the first Exif segment decides
    }
    pos += 2 + length;
  }
  return 1;
}

}  // namespace sluice
