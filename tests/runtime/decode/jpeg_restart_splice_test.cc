#include "runtime/decode/jpeg_restart_splice.h"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/decode/jpeg_decoder.h"
#include "tests/runtime/decode/jpeg_test_images.h"

namespace sluice::runtime {
namespace {

using testing::Encode;
using testing::EncodeOptions;
using testing::Pattern;

struct Layout {
  std::string name;
  int width, height;
  EncodeOptions opts;
};

// Restart intervals that divide the MCUs per row, for each sampling layout
// (MCU 16x16, 16x8, 8x8 and a grayscale 8x8 block), at odd sizes.
std::vector<Layout> Layouts() {
  std::vector<Layout> out;
  EncodeOptions o420;
  o420.restart_interval = 3;  // 517 px: 33 MCUs of 16
  out.push_back({"4:2:0 517x389", 517, 389, o420});
  EncodeOptions o422 = o420;
  o422.v_samp = 1;
  o422.restart_interval = 11;
  out.push_back({"4:2:2 517x203", 517, 203, o422});
  EncodeOptions o444 = o420;
  o444.h_samp = o444.v_samp = 1;
  o444.restart_interval = 5;  // 320 px: 40 MCUs
  out.push_back({"4:4:4 320x241", 320, 241, o444});
  EncodeOptions gray;
  gray.in_space = JCS_GRAYSCALE;
  gray.components = 1;
  gray.restart_interval = 4;  // 255 px: 32 blocks
  out.push_back({"gray 255x130", 255, 130, gray});
  return out;
}

std::vector<uint8_t> Jpeg(const Layout& l, int restart_interval) {
  EncodeOptions o = l.opts;
  o.restart_interval = restart_interval;
  return Encode(Pattern(l.width, l.height, o.components), l.width, l.height, o);
}

// Random crops as RandomResizedCrop draws them (area 8-100%, aspect 3/4-4/3).
std::vector<PixelRect> Crops(int w, int h, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<PixelRect> out;
  while (static_cast<int>(out.size()) < n) {
    const double area = w * h * std::uniform_real_distribution<>(0.08, 1.0)(rng);
    const double ratio =
        std::exp(std::uniform_real_distribution<>(std::log(0.75), std::log(4.0 / 3))(rng));
    const int cw = static_cast<int>(std::lround(std::sqrt(area * ratio)));
    const int ch = static_cast<int>(std::lround(std::sqrt(area / ratio)));
    if (cw < 1 || ch < 1 || cw > w || ch > h) continue;
    out.push_back({std::uniform_int_distribution<>(0, w - cw)(rng),
                   std::uniform_int_distribution<>(0, h - ch)(rng), cw, ch});
  }
  return out;
}

void ExpectSameDecode(const ImageBuffer& a, const DecodedRegion& ra, const ImageBuffer& b,
                      const DecodedRegion& rb) {
  EXPECT_EQ(ra.scale_denom, rb.scale_denom);
  EXPECT_EQ(ra.scaled_width, rb.scaled_width);
  EXPECT_EQ(ra.scaled_height, rb.scaled_height);
  EXPECT_EQ(ra.decoded, rb.decoded);
  EXPECT_EQ(ra.crop_in_buffer, rb.crop_in_buffer);
  EXPECT_DOUBLE_EQ(ra.crop_x, rb.crop_x);
  EXPECT_DOUBLE_EQ(ra.crop_y, rb.crop_y);
  ASSERT_EQ(a.width(), b.width());
  ASSERT_EQ(a.height(), b.height());
  ASSERT_EQ(a.channels(), b.channels());
  for (int y = 0; y < a.height(); ++y) {
    ASSERT_EQ(0, std::memcmp(a.row(y), b.row(y), size_t(a.width()) * a.channels())) << "row " << y;
  }
}

// The restart-interval file decoded through the splice gives the very buffer
// and region that the same image without restart markers gives (the same
// coefficients: restart markers change only the entropy coding), at full and
// DCT-reduced scales, and the splice really happened for most crops.
TEST(JpegRestartSplice, CroppedDecodesEqualThePlainPath) {
  for (const Layout& l : Layouts()) {
    SCOPED_TRACE(l.name);
    const std::vector<uint8_t> plain = Jpeg(l, 0);
    const std::vector<uint8_t> tiled = Jpeg(l, l.opts.restart_interval);
    int spliced = 0;
    const std::vector<PixelRect> crops = Crops(l.width, l.height, 60, 7);
    for (size_t i = 0; i < crops.size(); ++i) {
      const PixelRect& crop = crops[i];
      SCOPED_TRACE(::testing::Message() << "crop " << crop.x << "," << crop.y << " " << crop.width
                                        << "x" << crop.height);
      DecodeRequest req;
      req.crop = crop;
      if (i % 3 == 1) req.min_width = req.min_height = 24;  // DCT scaling where it fits
      if (i % 3 == 2) req.min_width = req.min_height = 50;
      std::vector<uint8_t> scratch;
      if (SpliceRestartIntervals(tiled, crop, 16, scratch)) ++spliced;
      ImageBuffer a, b;
      auto ra = DecodeJpeg(tiled, req, a);
      auto rb = DecodeJpeg(plain, req, b);
      ASSERT_TRUE(ra.has_value()) << ra.error().ToString();
      ASSERT_TRUE(rb.has_value()) << rb.error().ToString();
      ExpectSameDecode(a, *ra, b, *rb);
    }
    EXPECT_GE(spliced, 20) << "most random crops should be spliced";
  }
}

TEST(JpegRestartSplice, SplicedFileIsAValidJpegOfTheTiles) {
  const Layout l = Layouts().front();
  const std::vector<uint8_t> tiled = Jpeg(l, l.opts.restart_interval);
  std::vector<uint8_t> out;
  const PixelRect crop{200, 150, 60, 40};
  auto origin = SpliceRestartIntervals(tiled, crop, 0, out);
  ASSERT_TRUE(origin.has_value());
  // Tiles are 3 MCUs (48 px) wide and one MCU row (16 px) high.
  EXPECT_EQ(origin->x, 192);
  EXPECT_EQ(origin->y, 144);
  EXPECT_EQ(origin->image_width, 517);
  EXPECT_EQ(origin->image_height, 389);
  auto info = ReadJpegHeader(out);
  ASSERT_TRUE(info.has_value()) << info.error().ToString();
  EXPECT_EQ(info->width, 96);   // 200..260 lies in tiles 4 and 5 (192..288)
  EXPECT_EQ(info->height, 48);  // 150..190 in MCU rows 9..11 (144..192)
  EXPECT_LT(out.size(), tiled.size() / 10);
  ImageBuffer part;
  DecodeRequest whole;
  auto r = DecodeJpeg(out, whole, part);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->warnings, 0);
}

TEST(JpegRestartSplice, OtherFilesAreLeftToThePlainPath) {
  const Layout l = Layouts().front();
  const PixelRect crop{200, 150, 60, 40};
  std::vector<uint8_t> out;
  // No restart markers.
  EXPECT_FALSE(SpliceRestartIntervals(Jpeg(l, 0), crop, 16, out));
  // Intervals that do not divide the 33 MCUs of a row.
  EXPECT_FALSE(SpliceRestartIntervals(Jpeg(l, 2), crop, 16, out));
  // Progressive.
  Layout progressive = l;
  progressive.opts.progressive = true;
  EXPECT_FALSE(SpliceRestartIntervals(Jpeg(progressive, 3), crop, 16, out));
  // A crop of nearly the whole image saves too little.
  const std::vector<uint8_t> tiled = Jpeg(l, 3);
  EXPECT_FALSE(SpliceRestartIntervals(tiled, {2, 2, 510, 380}, 16, out));
  // A crop outside the image.
  EXPECT_FALSE(SpliceRestartIntervals(tiled, {500, 0, 60, 40}, 0, out));
  // Cut short: no EOI, so the file must be decoded whole to be found bad.
  std::vector<uint8_t> cut(tiled.begin(), tiled.begin() + tiled.size() * 2 / 3);
  EXPECT_FALSE(SpliceRestartIntervals(cut, crop, 16, out));
  ImageBuffer buffer;
  DecodeRequest req;
  req.crop = crop;
  EXPECT_FALSE(DecodeJpeg(cut, req, buffer).has_value());
  // A restart marker out of sequence.
  std::vector<uint8_t> shuffled = tiled;
  for (size_t i = tiled.size() / 2; i + 1 < shuffled.size(); ++i) {
    if (shuffled[i] == 0xFF && shuffled[i + 1] >= 0xD0 && shuffled[i + 1] <= 0xD7) {
      shuffled[i + 1] = static_cast<uint8_t>(0xD0 + (shuffled[i + 1] - 0xD0 + 3) % 8);
      break;
    }
  }
  EXPECT_FALSE(SpliceRestartIntervals(shuffled, crop, 16, out));
}

TEST(JpegRestartSplice, ThePixelLimitIsTheWholeImages) {
  const Layout l = Layouts().front();
  const std::vector<uint8_t> tiled = Jpeg(l, 3);
  DecodeRequest req;
  req.crop = PixelRect{200, 150, 60, 40};
  req.max_pixels = 517 * 389 - 1;  // the spliced part alone would pass
  ImageBuffer buffer;
  auto r = DecodeJpeg(tiled, req, buffer);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kCorruptData);
}

// The file's marker segments before its scan, each from its FF to its end
// (SOI first, SOS last), and the rest of the file.
std::vector<std::vector<uint8_t>> HeaderSegments(const std::vector<uint8_t>& jpeg,
                                                 std::vector<uint8_t>* rest) {
  std::vector<std::vector<uint8_t>> out = {{0xFF, 0xD8}};
  size_t i = 2;
  while (true) {
    const size_t end = i + 2 + ((jpeg[i + 2] << 8) | jpeg[i + 3]);
    out.emplace_back(jpeg.begin() + i, jpeg.begin() + end);
    if (jpeg[i + 1] == 0xDA) {
      rest->assign(jpeg.begin() + end, jpeg.end());
      return out;
    }
    i = end;
  }
}

// libjpeg reads an RSTn marker before the scan as one without a length; the
// splice read one after it and walked other segments than libjpeg: here it
// took a copy of the frame header inside an APP1 for the frame (and rewrote
// the copy's size), and skipped libjpeg's frame header as part of a COM.
// libjpeg then decoded the tiles as the whole image: other pixels than the
// plain path (which has no warning), with warnings.
TEST(JpegRestartSplice, MarkersWithoutALengthBeforeTheScanAreLeftToThePlainPath) {
  const Layout l = Layouts().front();
  std::vector<uint8_t> rest;
  const auto segments = HeaderSegments(Jpeg(l, l.opts.restart_interval), &rest);
  std::vector<uint8_t> sof;
  for (const auto& s : segments) {
    if (s[1] == 0xC0) sof = s;
  }
  ASSERT_EQ(sof.size(), 19u);  // 3 components
  // SOI, RST0, then an APP1 of 65535: the splice reads FF E1 as RST0's length
  // (65505) and lands 32 bytes before the APP1's end, on its copy of the
  // SOF and a COM whose 30 bytes run to the end of libjpeg's SOF.
  std::vector<uint8_t> file = {0xFF, 0xD8, 0xFF, 0xD0, 0xFF, 0xE1, 0xFF, 0xFF};
  file.resize(file.size() + 65533 - 32, 'a');
  file.insert(file.end(), sof.begin(), sof.end());
  file.insert(file.end(), {0xFF, 0xFE, 0x00, 30});
  file.resize(file.size() + 9, 'b');  // the APP1's last bytes
  file.insert(file.end(), sof.begin(), sof.end());
  for (const auto& s : segments) {
    if (s[1] != 0xD8 && s[1] != 0xC0) file.insert(file.end(), s.begin(), s.end());
  }
  file.insert(file.end(), rest.begin(), rest.end());

  const PixelRect crop{200, 150, 60, 40};
  DecodeRequest req;
  req.crop = crop;
  ImageBuffer a, b;
  auto rb = DecodeJpegUnspliced(file, req, b);
  ASSERT_TRUE(rb.has_value()) << rb.error().ToString();
  EXPECT_EQ(rb->warnings, 0);
  std::vector<uint8_t> out;
  EXPECT_FALSE(SpliceRestartIntervals(file, crop, 16, out));
  auto ra = DecodeJpeg(file, req, a);
  ASSERT_TRUE(ra.has_value()) << ra.error().ToString();
  EXPECT_EQ(ra->warnings, 0);
  ExpectSameDecode(a, *ra, b, *rb);
  // A TEM marker likewise.
  file[3] = 0x01;
  EXPECT_FALSE(SpliceRestartIntervals(file, crop, 16, out));
}

// A negative margin could end the tile rows above their start, and the
// saving test then read interval offsets before the first; so could a huge
// one, by overflow.
TEST(JpegRestartSplice, ANegativeMarginIsRefused) {
  const Layout l = Layouts().front();
  const std::vector<uint8_t> tiled = Jpeg(l, l.opts.restart_interval);
  std::vector<uint8_t> out;
  EXPECT_FALSE(SpliceRestartIntervals(tiled, {0, 0, 1, 1}, -40, out));
  EXPECT_FALSE(SpliceRestartIntervals(tiled, {200, 150, 1, 1}, -40, out));
  EXPECT_TRUE(SpliceRestartIntervals(tiled, {200, 150, 1, 1}, 0, out));
  // One that overflowed int when added to the crop's far edge.
  EXPECT_FALSE(SpliceRestartIntervals(tiled, {200, 150, 1, 1}, INT_MAX, out));
  EXPECT_FALSE(SpliceRestartIntervals(tiled, {200, 150, 1, 1}, INT_MAX - 100, out));
}

}  // namespace
}  // namespace sluice::runtime
