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

}  // namespace
}  // namespace sluice::runtime
