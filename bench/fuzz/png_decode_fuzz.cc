// libFuzzer harness: the PNG decoder (runtime/decode/png_decoder.h).
//
// Input: kDecodePrefix request bytes (decode_fuzz_util.h; flags bit 0 gray,
// bit 1 alpha keep, bits 4-5 the crop, which PNG only checks and reports,
// bit 7 keep the chunks' CRCs as they are), then the file. Unless bit 7 is
// set, the harness first rewrites every whole chunk's CRC-32 to match its
// bytes, so that mutations reach the chunk parsers and the inflate/unfilter
// code instead of all failing the CRC check. ReadHeader, then Decode; every
// file must decode or fail with an error, and a success must describe its
// buffer exactly (CheckRegion).
#include <zlib.h>

#include <cstdint>
#include <span>
#include <vector>

#include "bench/fuzz/decode_fuzz_util.h"
#include "runtime/decode/png_decoder.h"

using namespace sluice::runtime;

namespace {

uint32_t ReadBe32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

// Sets the CRC of every chunk that fits in `png` (after the 8-byte signature).
void FixChunkCrcs(std::vector<uint8_t>& png) {
  size_t pos = 8;
  while (pos + 12 <= png.size()) {
    const uint32_t length = ReadBe32(&png[pos]);
    if (length > png.size() - pos - 12) break;
    const uint32_t crc = static_cast<uint32_t>(crc32(0, &png[pos + 4], length + 4));
    uint8_t* out = &png[pos + 8 + length];
    out[0] = crc >> 24, out[1] = crc >> 16, out[2] = crc >> 8, out[3] = crc;
    pos += 12 + size_t{length};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sluice::fuzz::kDecodePrefix) return 0;
  const uint8_t flags = data[0];
  static std::vector<uint8_t> bytes;  // reused: no allocation per input once grown
  bytes.assign(data + sluice::fuzz::kDecodePrefix, data + size);
  if (!(flags & 128)) FixChunkCrcs(bytes);
  const std::span<const uint8_t> file(bytes);
  (void)LooksLikePng(file);
  PngOptions options;
  options.color = (flags & 1) ? OutputColor::kGray : OutputColor::kRGB;
  options.keep_alpha = (flags & 2) != 0;
  const PngDecoder decoder(options);
  auto header = decoder.ReadHeader(file);
  if (!header) return 0;
  if (header->channels != options.channels()) std::abort();
  if (int64_t{header->width} * header->height > sluice::fuzz::kMaxFuzzPixels) return 0;

  static ImageBuffer out;  // reused across inputs, as a worker reuses its buffer
  const DecodeRequest request = sluice::fuzz::RequestFromBytes(data, header->width, header->height);
  auto region = decoder.Decode(file, request, out);
  if (region) sluice::fuzz::CheckRegion(*region, out, options.channels());
  return 0;
}
