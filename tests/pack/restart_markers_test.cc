#include "pack/restart_markers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "runtime/decode/jpeg_decoder.h"
#include "runtime/decode/jpeg_restart_splice.h"
#include "tests/runtime/decode/jpeg_test_images.h"

namespace sluice::runtime {
namespace {

using testing::Encode;
using testing::EncodeOptions;
using testing::Pattern;

std::vector<uint8_t> Photo(int w, int h, EncodeOptions o = {}) {
  return Encode(Pattern(w, h, o.components), w, h, o);
}

// Both decode to the very same pixels (whole image, full scale).
void ExpectSamePixels(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  ImageBuffer pa, pb;
  auto ra = DecodeJpeg(a, DecodeRequest{}, pa);
  auto rb = DecodeJpeg(b, DecodeRequest{}, pb);
  ASSERT_TRUE(ra.has_value()) << ra.error().ToString();
  ASSERT_TRUE(rb.has_value()) << rb.error().ToString();
  EXPECT_EQ(rb->warnings, 0);
  ASSERT_EQ(pa.width(), pb.width());
  ASSERT_EQ(pa.height(), pb.height());
  for (int y = 0; y < pa.height(); ++y) {
    ASSERT_EQ(0, std::memcmp(pa.row(y), pb.row(y), size_t(pa.width()) * pa.channels()))
        << "row " << y;
  }
}

// Layouts pack meets: 4:2:0, 4:2:2, 4:4:4 and grayscale, at odd sizes.
std::vector<std::pair<std::string, std::vector<uint8_t>>> Photos() {
  EncodeOptions o422, o444, gray;
  o422.v_samp = 1;
  o444.h_samp = o444.v_samp = 1;
  gray.in_space = JCS_GRAYSCALE;
  gray.components = 1;
  return {{"4:2:0", Photo(517, 389)},
          {"4:2:2", Photo(333, 251, o422)},
          {"4:4:4", Photo(301, 97, o444)},
          {"gray", Photo(255, 130, gray)}};
}

TEST(RestartMarkers, ReencodesLosslesslyAndDeterministically) {
  for (const auto& [name, original] : Photos()) {
    SCOPED_TRACE(name);
    std::vector<uint8_t> once, twice;
    ASSERT_TRUE(AddRestartMarkers(original, once));
    ASSERT_TRUE(AddRestartMarkers(original, twice));
    EXPECT_EQ(once, twice);
    ExpectSamePixels(original, once);
    // Optimized tables about pay for the markers.
    EXPECT_LT(once.size(), original.size() * 103 / 100);
    // The loader can splice it: a small crop keeps a small part.
    auto info = ReadJpegHeader(once);
    ASSERT_TRUE(info.has_value());
    std::vector<uint8_t> part;
    const PixelRect crop{info->width / 2, info->height / 2, 16, 16};
    ASSERT_TRUE(SpliceRestartIntervals(once, crop, 0, part).has_value());
    EXPECT_LT(part.size(), once.size() / 2);
    // Already tiled: kept as it is.
    std::vector<uint8_t> again;
    EXPECT_FALSE(AddRestartMarkers(once, again));
  }
}

TEST(RestartMarkers, KeepsAppAndCommentMarkers) {
  std::vector<uint8_t> original = Photo(64, 48);
  // An EXIF APP1 (orientation 6) and a COM segment right after SOI.
  const std::vector<uint8_t> exif = {
      0xFF, 0xE1, 0x00, 0x22, 'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8,
      0,    1,    0x01, 0x12, 0,   3,   0,   0,   0, 1, 0,   6,   0, 0,  0, 0, 0, 0};
  const std::vector<uint8_t> comment = {0xFF, 0xFE, 0x00, 0x07, 'h', 'e', 'l', 'l', 'o'};
  original.insert(original.begin() + 2, comment.begin(), comment.end());
  original.insert(original.begin() + 2, exif.begin(), exif.end());
  std::vector<uint8_t> out;
  ASSERT_TRUE(AddRestartMarkers(original, out));
  auto contains = [&](const std::vector<uint8_t>& needle) {
    return std::search(out.begin(), out.end(), needle.begin(), needle.end()) != out.end();
  };
  EXPECT_TRUE(contains(exif));
  EXPECT_TRUE(contains(comment));
  ExpectSamePixels(original, out);
}

TEST(RestartMarkers, KeepsWhatItCannotReencodeAsItIs) {
  std::vector<uint8_t> out;
  EncodeOptions progressive;
  progressive.progressive = true;
  EXPECT_FALSE(AddRestartMarkers(Photo(200, 100, progressive), out));
  EncodeOptions rgb;  // RGB stored without the YCbCr transform (Adobe marker)
  rgb.jpeg_space = JCS_RGB;
  EXPECT_FALSE(AddRestartMarkers(Photo(200, 100, rgb), out));
  // Damaged data must not come out "repaired": cut short, it is kept.
  std::vector<uint8_t> cut = Photo(200, 100);
  cut.resize(cut.size() / 2);
  EXPECT_FALSE(AddRestartMarkers(cut, out));
  const std::vector<uint8_t> not_jpeg = {'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'g'};
  EXPECT_FALSE(AddRestartMarkers(not_jpeg, out));
}

// One marker segment: FF, the marker, a big-endian length, the payload.
void AppendSegment(std::vector<uint8_t>& out, uint8_t marker, const std::vector<uint8_t>& payload) {
  const size_t length = payload.size() + 2;
  out.insert(out.end(), {0xFF, marker, uint8_t(length >> 8), uint8_t(length & 0xFF)});
  out.insert(out.end(), payload.begin(), payload.end());
}

// A grayscale baseline JPEG written by hand: quantization all ones, Huffman
// tables of one code each (DC: category `dc_category`, AC: end of block),
// `comment_bytes` of COM before the frame, and `scan` as its entropy data.
std::vector<uint8_t> HandMadeGray(int width, int height, uint8_t dc_category, size_t comment_bytes,
                                  const std::vector<uint8_t>& scan) {
  std::vector<uint8_t> out = {0xFF, 0xD8};
  if (comment_bytes > 0) AppendSegment(out, 0xFE, std::vector<uint8_t>(comment_bytes, 'x'));
  std::vector<uint8_t> dqt(65, 1);
  dqt[0] = 0;
  AppendSegment(out, 0xDB, dqt);
  AppendSegment(out, 0xC0,
                {8, uint8_t(height >> 8), uint8_t(height), uint8_t(width >> 8), uint8_t(width), 1,
                 1, 0x11, 0});
  std::vector<uint8_t> dht(17, 0);
  dht[1] = 1;  // one code of length 1
  dht.push_back(dc_category);
  AppendSegment(out, 0xC4, dht);
  dht[0] = 0x10;  // AC table 0
  dht.back() = 0;
  AppendSegment(out, 0xC4, dht);
  AppendSegment(out, 0xDA, {1, 1, 0x00, 0, 63, 0});
  out.insert(out.end(), scan.begin(), scan.end());
  out.insert(out.end(), {0xFF, 0xD9});
  return out;
}

// A DC difference of 12 bits decodes without a warning, but baseline
// encoding allows 11: libjpeg's encoder fails in jpeg_finish_compress, after
// the carried-over markers were written. With jpeg_mem_dest, once those had
// outgrown its first 4 KiB buffer, the pointer handed back still named the
// freed first buffer, and freeing it was a double free (glibc aborted;
// ASan: attempting double-free). Kept as it is instead, whatever its size.
TEST(RestartMarkers, KeepsAFileItsEncoderRefusesAfterWritingMarkers) {
  // Bits: DC code 0, 12 bits 1000 0000 0000 (+2048), AC code 0 (EOB), 1 padding.
  const std::vector<uint8_t> scan = {0x40, 0x03};
  for (size_t comment : {size_t{0}, size_t{100}, size_t{5000}, size_t{70000}}) {
    SCOPED_TRACE(comment);
    std::vector<uint8_t> out;
    const std::vector<uint8_t> jpeg =
        HandMadeGray(8, 8, 12, std::min<size_t>(comment, 65000), scan);
    std::vector<uint8_t> big = jpeg;
    if (comment > 65000) {  // a second COM: more than one segment can hold
      std::vector<uint8_t> com;
      AppendSegment(com, 0xFE, std::vector<uint8_t>(comment - 65000, 'y'));
      big.insert(big.begin() + 2, com.begin(), com.end());
    }
    EXPECT_FALSE(AddRestartMarkers(big, out));
  }
  // The same file with an 11-bit difference is re-encoded, comments and all.
  std::vector<uint8_t> out;
  const std::vector<uint8_t> fine = HandMadeGray(8, 8, 11, 5000, {0x40, 0x07});
  ASSERT_TRUE(AddRestartMarkers(fine, out));
  ExpectSamePixels(fine, out);
}

// Over the decoder's limits (kMaxJpegSide per side): not re-encoded. A file
// of a few hundred bytes can claim 65500x65500 pixels, and re-encoding holds
// every coefficient: 8 GB and 19 s before it found the data cut short.
TEST(RestartMarkers, KeepsImagesOverTheDecodersLimits) {
  std::vector<uint8_t> out;
  // 32769x8, complete (every block: DC difference 0, end of block: 2 bits).
  const int blocks = (32769 + 7) / 8;
  std::vector<uint8_t> scan(size_t(blocks) * 2 / 8 + 1, 0);
  EXPECT_FALSE(AddRestartMarkers(HandMadeGray(32769, 8, 0, 0, scan), out));
  // The same at 32768 wide is re-encoded.
  std::vector<uint8_t> scan_ok(size_t(32768 / 8) * 2 / 8, 0);
  EXPECT_TRUE(AddRestartMarkers(HandMadeGray(32768, 8, 0, 0, scan_ok), out));
  // A header claiming 65500x65500 over a few bytes of data.
  EXPECT_FALSE(
      AddRestartMarkers(HandMadeGray(65500, 65500, 0, 0, std::vector<uint8_t>(64, 0)), out));
}

}  // namespace
}  // namespace sluice::runtime
