// EXIF orientation: the tag reader, and decode_jpeg with `orientation: exif`
// against PIL's ImageOps.exif_transpose (tests/data/exif/generate.py).
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/decode/jpeg_decoder.h"
#include "runtime/decode/orientation.h"
#include "tests/runtime/decode/fixture_files.h"

namespace sluice::runtime {
namespace {

using testing::ReadFixture;

constexpr int kW = 20, kH = 12;  // the fixtures' stored size

Result<std::unique_ptr<Decoder>> Make(const char* orientation, const char* color = "rgb") {
  return MakeDecoder("decode_jpeg", {{"color", ParamValue{std::string(color)}},
                                     {"orientation", ParamValue{std::string(orientation)}}});
}

TEST(ExifOrientationTest, ReadsTheTagOfEveryFixture) {
  for (int n = 1; n <= 8; ++n) {
    EXPECT_EQ(JpegExifOrientation(ReadFixture("exif/orient" + std::to_string(n) + ".jpg")), n);
  }
}

TEST(ExifOrientationTest, MatchesPilExifTranspose) {
  auto d = Make("exif");
  ASSERT_TRUE(d) << d.error().ToString();
  for (int n = 1; n <= 8; ++n) {
    SCOPED_TRACE("orientation " + std::to_string(n));
    const std::string stem = "exif/orient" + std::to_string(n);
    const std::vector<uint8_t> jpeg = ReadFixture(stem + ".jpg");
    const std::vector<uint8_t> want = ReadFixture(stem + ".expected");
    const bool turned = n >= 5;
    auto header = (*d)->ReadHeader(jpeg);
    ASSERT_TRUE(header) << header.error().ToString();
    EXPECT_EQ(header->width, turned ? kH : kW);
    EXPECT_EQ(header->height, turned ? kW : kH);
    ImageBuffer out;
    auto region = (*d)->Decode(jpeg, {}, out);
    ASSERT_TRUE(region) << region.error().ToString();
    ASSERT_EQ(out.width(), header->width);
    ASSERT_EQ(out.height(), header->height);
    EXPECT_EQ(region->decoded, (PixelRect{0, 0, header->width, header->height}));
    EXPECT_EQ(region->crop_in_buffer, region->decoded);
    ASSERT_EQ(out.size_bytes(), want.size());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), out.data()));
  }
}

TEST(ExifOrientationTest, IgnoreIsTheStoredImage) {
  auto d = Make("ignore");
  ASSERT_TRUE(d);
  const std::vector<uint8_t> stored = ReadFixture("exif/stored.expected");
  for (int n : {1, 6, 8}) {
    const std::vector<uint8_t> jpeg = ReadFixture("exif/orient" + std::to_string(n) + ".jpg");
    ImageBuffer out;
    ASSERT_TRUE((*d)->Decode(jpeg, {}, out));
    EXPECT_EQ(out.width(), kW);
    ASSERT_EQ(out.size_bytes(), stored.size());
    EXPECT_TRUE(std::equal(stored.begin(), stored.end(), out.data()));
    auto header = (*d)->ReadHeader(jpeg);
    ASSERT_TRUE(header);
    EXPECT_EQ(header->width, kW);
  }
}

// ---- a larger JPEG with a hand-made EXIF segment, for crop + DCT scaling ----

std::vector<uint8_t> App1Exif(int orientation, bool big_endian) {
  std::vector<uint8_t> tiff;
  auto u16 = [&](uint16_t v) {
    if (big_endian)
      tiff.insert(tiff.end(), {uint8_t(v >> 8), uint8_t(v)});
    else
      tiff.insert(tiff.end(), {uint8_t(v), uint8_t(v >> 8)});
  };
  auto u32 = [&](uint32_t v) {
    if (big_endian)
      u16(uint16_t(v >> 16)), u16(uint16_t(v));
    else
      u16(uint16_t(v)), u16(uint16_t(v >> 16));
  };
  tiff.push_back(big_endian ? 'M' : 'I');
  tiff.push_back(big_endian ? 'M' : 'I');
  u16(42);
  u32(8);
  u16(2);                                        // two entries: an unrelated one first
  u16(0x010F), u16(2), u32(4), u32(0x00414243);  // Make, ASCII "CBA"
  u16(0x0112), u16(3), u32(1), u16(uint16_t(orientation)), u16(0);
  u32(0);  // no next IFD
  std::vector<uint8_t> seg = {0xFF, 0xE1, 0, 0, 'E', 'x', 'i', 'f', 0, 0};
  seg.insert(seg.end(), tiff.begin(), tiff.end());
  const size_t len = seg.size() - 2;
  seg[2] = uint8_t(len >> 8);
  seg[3] = uint8_t(len);
  return seg;
}

std::vector<uint8_t> LargeJpeg(int w, int h, int orientation, bool big_endian) {
  std::vector<unsigned char> px(size_t(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        px[(size_t(y) * w + x) * 3 + c] = uint8_t((x * (c + 1) * 3 + y * (5 - c) + x * y) & 255);
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(tj, px.data(), w, 0, h, TJPF_RGB, &buf, &size, TJSAMP_420, 92, 0), 0);
  std::vector<uint8_t> jpeg(buf, buf + 2);  // SOI, then EXIF, then the rest
  const std::vector<uint8_t> app1 = App1Exif(orientation, big_endian);
  jpeg.insert(jpeg.end(), app1.begin(), app1.end());
  jpeg.insert(jpeg.end(), buf + 2, buf + size);
  tjFree(buf);
  tjDestroy(tj);
  return jpeg;
}

TEST(ExifOrientationTest, BothByteOrdersAndBadValues) {
  for (bool be : {false, true}) {
    for (int n = 0; n <= 9; ++n) {
      EXPECT_EQ(JpegExifOrientation(LargeJpeg(16, 16, n, be)), n >= 1 && n <= 8 ? n : 1);
    }
  }
  // Truncated or garbage input never reads out of bounds.
  const std::vector<uint8_t> jpeg = LargeJpeg(16, 16, 6, true);
  for (size_t n = 0; n < 80; ++n) {
    const int o = JpegExifOrientation(std::span<const uint8_t>(jpeg.data(), n));
    EXPECT_TRUE(o == 1 || o == 6) << n;
  }
  for (size_t i = 2; i < 60; ++i) {
    std::vector<uint8_t> bad = jpeg;
    bad[i] ^= 0xFF;
    const int o = JpegExifOrientation(bad);
    EXPECT_TRUE(o >= 1 && o <= 8) << i;
  }
}

// The crop and DCT scale map through the orientation: the crop's pixels in the
// buffer equal those of an oriented whole-image decode at the same scale.
TEST(ExifOrientationTest, CropAndScaleMapThroughTheOrientation) {
  const int w = 117, h = 75;
  for (int n = 1; n <= 8; ++n) {
    SCOPED_TRACE("orientation " + std::to_string(n));
    const std::vector<uint8_t> jpeg = LargeJpeg(w, h, n, n % 2 == 0);
    auto d = Make("exif");
    ASSERT_TRUE(d);
    auto header = (*d)->ReadHeader(jpeg);
    ASSERT_TRUE(header);
    const int ow = header->width, oh = header->height;
    EXPECT_EQ(ow, n >= 5 ? h : w);
    const PixelRect crop{ow / 5, oh / 4, ow / 2, oh / 2};
    for (int scale : {1, 2, 4}) {
      SCOPED_TRACE("scale 1/" + std::to_string(scale));
      DecodeRequest whole;
      if (scale > 1) {
        whole.min_width = ow / scale;  // the whole image at exactly 1/scale
        whole.min_height = oh / scale;
      }
      ImageBuffer full;
      auto full_region = (*d)->Decode(jpeg, whole, full);
      ASSERT_TRUE(full_region) << full_region.error().ToString();
      ASSERT_EQ(full_region->scale_denom, scale);
      EXPECT_EQ(full.width(), full_region->scaled_width);
      EXPECT_EQ(full.height(), full_region->scaled_height);

      DecodeRequest request;
      request.crop = crop;
      if (scale > 1) {
        request.min_width = crop.width / scale;
        request.min_height = crop.height / scale;
      }
      ImageBuffer part;
      auto region = (*d)->Decode(jpeg, request, part);
      ASSERT_TRUE(region) << region.error().ToString();
      ASSERT_EQ(region->scale_denom, scale);
      EXPECT_EQ(region->scaled_width, full_region->scaled_width);
      EXPECT_EQ(region->scaled_height, full_region->scaled_height);
      EXPECT_EQ(part.width(), region->decoded.width);
      EXPECT_EQ(part.height(), region->decoded.height);
      const PixelRect& c = region->crop_in_buffer;
      ASSERT_GE(c.x, 0);
      ASSERT_GE(c.y, 0);
      ASSERT_LE(c.x + c.width, part.width());
      ASSERT_LE(c.y + c.height, part.height());
      EXPECT_NEAR(region->crop_width, double(crop.width) / scale, 1e-9);
      EXPECT_NEAR(region->crop_height, double(crop.height) / scale, 1e-9);
      EXPECT_GE(region->crop_x, c.x - 1e-9);
      EXPECT_LE(region->crop_x + region->crop_width, c.x + c.width + 1e-9);
      if (scale == 1) {
        EXPECT_EQ(c.x + region->decoded.x, crop.x);
        EXPECT_EQ(c.y + region->decoded.y, crop.y);
        EXPECT_EQ(c.width, crop.width);
      }
      int mismatches = 0;
      for (int y = c.y; y < c.y + c.height; ++y) {
        const uint8_t* got = part.row(y) + size_t(c.x) * 3;
        const uint8_t* want = full.row(y + region->decoded.y) + size_t(c.x + region->decoded.x) * 3;
        mismatches += std::memcmp(got, want, size_t(c.width) * 3) != 0;
      }
      EXPECT_EQ(mismatches, 0);
    }
  }
}

TEST(ExifOrientationTest, CropOutsideTheOrientedImageIsInvalidArgument) {
  auto d = Make("exif");
  ASSERT_TRUE(d);
  const std::vector<uint8_t> jpeg = ReadFixture("exif/orient6.jpg");  // 12 x 20 oriented
  DecodeRequest request;
  request.crop = PixelRect{0, 0, kW, kH};  // the stored size: too wide once turned
  ImageBuffer out;
  auto region = (*d)->Decode(jpeg, request, out);
  ASSERT_FALSE(region);
  EXPECT_EQ(region.error().code, ErrorCode::kInvalidArgument);
  request.crop = PixelRect{0, 0, kH, kW};
  EXPECT_TRUE((*d)->Decode(jpeg, request, out));
}

}  // namespace
}  // namespace sluice::runtime
