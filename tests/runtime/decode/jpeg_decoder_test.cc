#include "runtime/decode/jpeg_decoder.h"

#include <gtest/gtest.h>
#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "tests/runtime/decode/jpeg_test_images.h"

namespace sluice::runtime {
namespace {

using testing::Encode;
using testing::EncodeOptions;
using testing::Pattern;

std::vector<uint8_t> RgbJpeg(int w, int h, EncodeOptions o = {}) {
  return Encode(Pattern(w, h, 3), w, h, o);
}

Result<DecodedRegion> Decode(const std::vector<uint8_t>& jpg, ImageBuffer& out,
                             DecodeRequest req = {}) {
  return DecodeJpeg(std::span<const uint8_t>(jpg), req, out);
}

double MeanAbsDiff(const uint8_t* a, const uint8_t* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += std::abs(int(a[i]) - int(b[i]));
  return n ? s / n : 0;
}

// The crop_in_buffer pixels of `part` equal the same pixels of `full` (a
// decode of the whole image at the same scale).
void ExpectCropMatches(const ImageBuffer& part, const ImageBuffer& full, const DecodedRegion& r) {
  const int c = full.channels();
  ASSERT_EQ(part.channels(), c);
  const PixelRect& k = r.crop_in_buffer;
  ASSERT_GE(k.x, 0);
  ASSERT_GE(k.y, 0);
  ASSERT_LE(k.x + k.width, part.width());
  ASSERT_LE(k.y + k.height, part.height());
  for (int y = k.y; y < k.y + k.height; ++y) {
    const uint8_t* a = part.row(y) + size_t(k.x) * c;
    const uint8_t* b = full.row(r.decoded.y + y) + size_t(r.decoded.x + k.x) * c;
    for (int i = 0; i < k.width * c; ++i) ASSERT_EQ(a[i], b[i]) << "row " << y << " byte " << i;
  }
}

// ---- header -----------------------------------------------------------------

TEST(JpegHeader, ReportsDimensionsAndColorSpace) {
  auto jpg = RgbJpeg(17, 33);
  auto info = ReadJpegHeader(jpg);
  ASSERT_TRUE(info.has_value()) << info.error().ToString();
  EXPECT_EQ(info->width, 17);
  EXPECT_EQ(info->height, 33);
  EXPECT_EQ(info->components, 3);
  EXPECT_EQ(info->colorspace, JpegColorSpace::kYCbCr);
  EXPECT_FALSE(info->progressive);

  EncodeOptions g;
  g.in_space = JCS_GRAYSCALE;
  g.components = 1;
  auto gray = Encode(Pattern(9, 5, 1), 9, 5, g);
  auto ginfo = ReadJpegHeader(gray);
  ASSERT_TRUE(ginfo.has_value());
  EXPECT_EQ(ginfo->colorspace, JpegColorSpace::kGray);
  EXPECT_EQ(ginfo->components, 1);
  EXPECT_TRUE(LooksLikeJpeg(gray));
}

// ---- full decodes -----------------------------------------------------------

TEST(JpegDecode, RgbOddSizesRoundTrip) {
  for (auto [w, h] : {std::pair{1, 1}, {17, 33}, {64, 48}, {101, 7}}) {
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    auto src = Pattern(w, h, 3);
    EncodeOptions o;
    o.h_samp = o.v_samp = 1;  // 4:4:4 so the round trip is tight
    auto jpg = Encode(src, w, h, o);
    ImageBuffer out;
    auto r = Decode(jpg, out);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->scale_denom, 1);
    EXPECT_EQ(out.width(), w);
    EXPECT_EQ(out.height(), h);
    EXPECT_EQ(out.channels(), 3);
    EXPECT_EQ(r->decoded, (PixelRect{0, 0, w, h}));
    EXPECT_EQ(r->crop_in_buffer, (PixelRect{0, 0, w, h}));
    EXPECT_LT(MeanAbsDiff(out.data(), src.data(), src.size()), 4.0);
  }
}

TEST(JpegDecode, GrayscaleFileToRgbAndGray) {
  EncodeOptions g;
  g.in_space = JCS_GRAYSCALE;
  g.components = 1;
  auto src = Pattern(40, 30, 1);
  auto jpg = Encode(src, 40, 30, g);
  ImageBuffer rgb;
  auto r = Decode(jpg, rgb);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_EQ(rgb.channels(), 3);
  for (int y = 0; y < rgb.height(); ++y) {
    for (int x = 0; x < rgb.width(); ++x) {
      const uint8_t* p = rgb.row(y) + 3 * x;
      ASSERT_EQ(p[0], p[1]);
      ASSERT_EQ(p[1], p[2]);
    }
  }
  ImageBuffer gray;
  DecodeRequest req;
  req.color = OutputColor::kGray;
  r = Decode(jpg, gray, req);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(gray.channels(), 1);
  EXPECT_LT(MeanAbsDiff(gray.data(), src.data(), src.size()), 3.0);
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 40; ++x) ASSERT_EQ(gray.row(y)[x], rgb.row(y)[3 * x]);
}

TEST(JpegDecode, RgbFileToGrayUsesLuma) {
  std::vector<uint8_t> red(16 * 16 * 3);
  for (size_t i = 0; i < red.size(); i += 3) red[i] = 255;
  auto jpg = Encode(red, 16, 16, {});
  ImageBuffer gray;
  DecodeRequest req;
  req.color = OutputColor::kGray;
  ASSERT_TRUE(Decode(jpg, gray, req).has_value());
  EXPECT_NEAR(gray.row(8)[8], 76, 3);  // 0.299 * 255
}

TEST(JpegDecode, CmykAdobeInvertedToRgb) {
  // Adobe CMYK JPEGs store inverted ink: byte = 255 - ink. Pure cyan ink
  // (C=255 M=0 Y=0 K=0) is stored as (0,255,255,255) and renders as (0,255,255).
  const int w = 24, h = 16;
  std::vector<uint8_t> cmyk(size_t(w) * h * 4);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &cmyk[(size_t(y) * w + x) * 4];
      if (x < 12) {  // cyan
        p[0] = 0, p[1] = 255, p[2] = 255, p[3] = 255;
      } else {  // 50% black only
        p[0] = 255, p[1] = 255, p[2] = 255, p[3] = 128;
      }
    }
  }
  EncodeOptions o;
  o.in_space = JCS_CMYK;
  o.components = 4;
  o.jpeg_space = JCS_CMYK;
  auto jpg = Encode(cmyk, w, h, o);
  auto info = ReadJpegHeader(jpg);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->colorspace, JpegColorSpace::kCMYK);
  EXPECT_EQ(info->components, 4);
  ImageBuffer out;
  auto r = Decode(jpg, out);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_EQ(out.channels(), 3);
  const uint8_t* cyan = out.row(8) + 3 * 4;
  EXPECT_NEAR(cyan[0], 0, 4);
  EXPECT_NEAR(cyan[1], 255, 4);
  EXPECT_NEAR(cyan[2], 255, 4);
  const uint8_t* grey = out.row(8) + 3 * 20;
  EXPECT_NEAR(grey[0], 128, 4);
  EXPECT_NEAR(grey[1], 128, 4);
  EXPECT_NEAR(grey[2], 128, 4);
  // YCCK (libjpeg's default for CMYK input) decodes the same way.
  o.jpeg_space = JCS_YCCK;
  auto ycck = Encode(cmyk, w, h, o);
  ImageBuffer out2;
  ASSERT_TRUE(Decode(ycck, out2).has_value());
  EXPECT_NEAR(out2.row(8)[3 * 4 + 1], 255, 6);
  EXPECT_NEAR(out2.row(8)[3 * 20], 128, 6);
}

// ---- crop and scale ---------------------------------------------------------

struct Variant {
  const char* name;
  EncodeOptions opts;
};

std::vector<Variant> Variants() {
  std::vector<Variant> v;
  EncodeOptions o;
  o.h_samp = 1, o.v_samp = 1;
  v.push_back({"444", o});
  o.h_samp = 2, o.v_samp = 1;
  v.push_back({"422", o});
  o.h_samp = 2, o.v_samp = 2;
  v.push_back({"420", o});
  o.progressive = true;
  v.push_back({"420-progressive", o});
  EncodeOptions g;
  g.in_space = JCS_GRAYSCALE;
  g.components = 1;
  v.push_back({"gray", g});
  return v;
}

TEST(JpegDecode, CropAtFullScaleIsBitIdenticalToFullDecode) {
  const int w = 203, h = 157;
  for (const Variant& v : Variants()) {
    SCOPED_TRACE(v.name);
    auto jpg = Encode(Pattern(w, h, v.opts.components), w, h, v.opts);
    ImageBuffer full;
    ASSERT_TRUE(Decode(jpg, full).has_value());
    for (PixelRect crop : {PixelRect{0, 0, w, h}, PixelRect{37, 21, 50, 61}, PixelRect{1, 1, 1, 1},
                           PixelRect{150, 100, 53, 57}, PixelRect{64, 32, 64, 32},
                           PixelRect{0, 150, 203, 7}, PixelRect{199, 0, 4, 157}}) {
      SCOPED_TRACE(::testing::Message() << "crop " << crop.x << "," << crop.y << " " << crop.width
                                        << "x" << crop.height);
      DecodeRequest req;
      req.crop = crop;
      ImageBuffer part;
      auto r = Decode(jpg, part, req);
      ASSERT_TRUE(r.has_value()) << r.error().ToString();
      EXPECT_EQ(r->scale_denom, 1);
      EXPECT_EQ(r->crop_in_buffer.width, crop.width);
      EXPECT_EQ(r->crop_in_buffer.height, crop.height);
      EXPECT_DOUBLE_EQ(r->crop_x, r->crop_in_buffer.x);
      EXPECT_EQ(r->decoded.x + r->crop_in_buffer.x, crop.x);
      EXPECT_EQ(r->decoded.y + r->crop_in_buffer.y, crop.y);
      EXPECT_LE(r->decoded.height, crop.height);  // no rows decoded past the crop
      EXPECT_EQ(part.width(), r->decoded.width);
      EXPECT_EQ(part.height(), r->decoded.height);
      // Every pixel of the crop equals the full decode's (the margin columns
      // at the buffer's edges may differ: upsampling replicates there).
      ExpectCropMatches(part, full, *r);
    }
  }
}

TEST(JpegDecode, PicksSmallestScaleCoveringMinimumSize) {
  auto jpg = RgbJpeg(640, 480);
  ImageBuffer out;
  struct Case {
    std::optional<PixelRect> crop;
    int min_w, min_h, denom;
  } cases[] = {
      {std::nullopt, 0, 0, 1},
      {std::nullopt, 80, 60, 8},
      {std::nullopt, 81, 60, 4},
      {std::nullopt, 224, 224, 2},
      {std::nullopt, 320, 240, 2},
      {std::nullopt, 321, 10, 1},
      {PixelRect{100, 50, 400, 300}, 100, 100, 2},
      {PixelRect{100, 50, 400, 300}, 50, 37, 8},
  };
  for (const Case& c : cases) {
    DecodeRequest req;
    req.crop = c.crop;
    req.min_width = c.min_w;
    req.min_height = c.min_h;
    auto r = Decode(jpg, out, req);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->scale_denom, c.denom) << c.min_w << "x" << c.min_h;
    EXPECT_EQ(r->scaled_width, (640 + c.denom - 1) / c.denom);
    EXPECT_GE(r->crop_width, c.min_w);
    EXPECT_GE(r->crop_height, c.min_h);
    EXPECT_GE(r->crop_in_buffer.width, r->crop_width);
  }
}

TEST(JpegDecode, ScaledDecodeIsCloseToAreaDownscaledFullDecode) {
  const int w = 256, h = 192;
  auto jpg = RgbJpeg(w, h);
  ImageBuffer full;
  ASSERT_TRUE(Decode(jpg, full).has_value());
  for (int d : {2, 4, 8}) {
    SCOPED_TRACE(d);
    DecodeRequest req;
    req.min_width = w / d;
    req.min_height = h / d;
    ImageBuffer small;
    auto r = Decode(jpg, small, req);
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->scale_denom, d);
    ASSERT_EQ(small.width(), w / d);
    ASSERT_EQ(small.height(), h / d);
    double total = 0;
    for (int y = 0; y < h / d; ++y) {
      for (int x = 0; x < w / d; ++x) {
        for (int k = 0; k < 3; ++k) {
          int sum = 0;
          for (int yy = 0; yy < d; ++yy)
            for (int xx = 0; xx < d; ++xx) sum += full.row(y * d + yy)[(x * d + xx) * 3 + k];
          double area = double(sum) / (d * d);
          total += std::abs(area - small.row(y)[x * 3 + k]);
        }
      }
    }
    double mean = total / (double(w / d) * (h / d) * 3);
    EXPECT_LT(mean, 3.0);
  }
}

TEST(JpegDecode, ScaledCropMatchesScaledFullDecode) {
  const int w = 333, h = 250;
  for (const Variant& v : Variants()) {
    SCOPED_TRACE(v.name);
    auto jpg = Encode(Pattern(w, h, v.opts.components), w, h, v.opts);
    for (int d : {2, 4, 8}) {
      SCOPED_TRACE(d);
      DecodeRequest full_req;
      full_req.min_width = w / d;
      full_req.min_height = h / d;
      ImageBuffer full;
      auto fr = Decode(jpg, full, full_req);
      ASSERT_TRUE(fr.has_value());
      ASSERT_EQ(fr->scale_denom, d);
      DecodeRequest req;
      req.crop = PixelRect{117, 61, 160, 130};
      req.min_width = 160 / d;
      req.min_height = 130 / d;
      ImageBuffer part;
      auto r = Decode(jpg, part, req);
      ASSERT_TRUE(r.has_value());
      ASSERT_EQ(r->scale_denom, d);
      EXPECT_DOUBLE_EQ(r->crop_x + r->decoded.x, 117.0 / d);
      EXPECT_DOUBLE_EQ(r->crop_y + r->decoded.y, 61.0 / d);
      EXPECT_DOUBLE_EQ(r->crop_width, 160.0 / d);
      ExpectCropMatches(part, full, *r);
    }
  }
}

TEST(JpegDecode, BufferIsReusedWithoutGrowing) {
  auto big = RgbJpeg(120, 90);
  auto small = RgbJpeg(30, 20);
  ImageBuffer out;
  ASSERT_TRUE(Decode(big, out).has_value());
  const uint8_t* data = out.data();
  size_t cap = out.capacity();
  ASSERT_TRUE(Decode(small, out).has_value());
  EXPECT_EQ(out.data(), data);
  EXPECT_EQ(out.capacity(), cap);
  EXPECT_EQ(out.width(), 30);
}

// ---- bad input --------------------------------------------------------------

TEST(JpegDecode, CorruptInputsAreErrorsNotCrashes) {
  auto jpg = RgbJpeg(64, 64);
  ImageBuffer out;
  std::vector<std::pair<const char*, std::vector<uint8_t>>> bad = {
      {"empty", {}},
      {"not a jpeg", {'G', 'I', 'F', '8', '9', 'a', 0, 0, 0, 0}},
      {"only SOI", {0xFF, 0xD8}},
      {"truncated half", std::vector<uint8_t>(jpg.begin(), jpg.begin() + jpg.size() / 2)},
      {"truncated header", std::vector<uint8_t>(jpg.begin(), jpg.begin() + 100)},
  };
  std::vector<uint8_t> random(4000);
  unsigned s = 7;
  for (auto& b : random) b = uint8_t((s = s * 1664525u + 1013904223u) >> 24);
  bad.push_back({"random", random});
  for (auto& [name, bytes] : bad) {
    SCOPED_TRACE(name);
    auto r = DecodeJpeg(bytes, {}, out);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kCorruptData);
    EXPECT_FALSE(r.error().message.empty());
  }
  EXPECT_FALSE(ReadJpegHeader(std::vector<uint8_t>{}).has_value());
  EXPECT_FALSE(ReadJpegHeader(random).has_value());
}

// A file cut short is bad whatever the crop: a crop in its intact top rows
// used to decode fine (the rest was never read), so with random crops the
// same file was good in one epoch and bad in the next. A whole file, and one
// with bytes after its EOI, still decode any crop.
TEST(JpegDecode, ATruncatedFileIsBadWhateverTheCrop) {
  const int w = 160, h = 240;
  auto jpg = Encode(Pattern(w, h, 3), w, h, Variants().front().opts);
  const std::vector<uint8_t> cut(jpg.begin(), jpg.begin() + jpg.size() * 7 / 10);
  std::vector<uint8_t> trailing = jpg;
  trailing.insert(trailing.end(), {'t', 'r', 'a', 'i', 'l', 'e', 'r'});
  for (PixelRect crop : {PixelRect{0, 0, w, 16}, PixelRect{8, 8, 32, 32}, PixelRect{0, 0, w, h}}) {
    SCOPED_TRACE(::testing::Message() << "crop rows " << crop.y << "+" << crop.height);
    DecodeRequest req;
    req.crop = crop;
    ImageBuffer out;
    auto bad = DecodeJpeg(cut, req, out);
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.error().code, ErrorCode::kCorruptData);
    EXPECT_NE(bad.error().message.find("premature end"), std::string::npos) << bad.error().message;
    EXPECT_TRUE(DecodeJpeg(jpg, req, out).has_value());
    auto with_trailer = DecodeJpeg(trailing, req, out);
    EXPECT_TRUE(with_trailer.has_value()) << with_trailer.error().ToString();
  }
}

TEST(JpegDecode, AbsurdDimensionsRejectedBeforeAllocation) {
  auto jpg = RgbJpeg(16, 16);
  // Patch the SOF0 frame header (FF C0, len(2), precision(1), height(2), width(2)).
  size_t sof = 0;
  for (size_t i = 0; i + 1 < jpg.size(); ++i) {
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
      sof = i;
      break;
    }
  }
  ASSERT_GT(sof, 0u);
  for (auto [hh, ww] : {std::pair{40000, 16}, {16, 65000}, {20000, 20000}}) {
    auto patched = jpg;
    patched[sof + 5] = uint8_t(hh >> 8), patched[sof + 6] = uint8_t(hh);
    patched[sof + 7] = uint8_t(ww >> 8), patched[sof + 8] = uint8_t(ww);
    ImageBuffer out;
    auto r = DecodeJpeg(patched, {}, out);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kCorruptData);
    EXPECT_NE(r.error().message.find("limit"), std::string::npos) << r.error().message;
    EXPECT_EQ(out.capacity(), 0u);
  }
}

TEST(JpegDecode, CropOutsideImageIsInvalidArgument) {
  auto jpg = RgbJpeg(50, 40);
  ImageBuffer out;
  for (PixelRect crop : {PixelRect{40, 0, 11, 10}, PixelRect{0, 0, 0, 5}, PixelRect{-1, 0, 5, 5},
                         PixelRect{0, 39, 5, 2}}) {
    DecodeRequest req;
    req.crop = crop;
    auto r = Decode(jpg, out, req);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(JpegDecode, WarningsAreCountedAndOptionallyFatal) {
  auto jpg = RgbJpeg(32, 32);
  // Garbage before the SOS marker: libjpeg warns "extraneous bytes before marker".
  size_t sos = 0;
  for (size_t i = 2; i + 1 < jpg.size(); ++i) {
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xDA) {
      sos = i;
      break;
    }
  }
  ASSERT_GT(sos, 0u);
  auto bad = jpg;
  bad.insert(bad.begin() + sos, {0x12, 0x34, 0x56});
  ImageBuffer clean, out;
  ASSERT_TRUE(Decode(jpg, clean).has_value());
  auto r = Decode(bad, out);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->warnings, 1);
  EXPECT_EQ(0, std::memcmp(out.data(), clean.data(), clean.size_bytes()));
  DecodeRequest strict;
  strict.fail_on_warning = true;
  auto s = Decode(bad, out, strict);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(s.error().message.find("extraneous"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace sluice::runtime
