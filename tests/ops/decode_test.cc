// decode_jpeg's reference implementation on JPEGs made here with tjCompress2.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>

#include "ops/registry.h"

namespace sluice {
namespace {

// Encodes a w x h image with `pixel_format` (TJPF_RGB or TJPF_GRAY) at quality 100.
std::vector<uint8_t> Encode(const std::vector<unsigned char>& pixels, int w, int h,
                            int pixel_format, int subsamp) {
  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj, pixels.data(), w, 0, h, pixel_format, &jpeg, &size, subsamp, 100,
                             TJFLAG_ACCURATEDCT);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(tj);
  std::vector<uint8_t> out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(tj);
  return out;
}

Result<RefTensor> Decode(std::vector<uint8_t> bytes, const std::string& color = "rgb") {
  RefContext ctx;
  return FindOp("decode_jpeg")
      ->reference(RefTensor::Encoded(std::move(bytes)), {{"color", ParamValue{color}}}, ctx);
}

TEST(DecodeJpegRefTest, RgbRoundTrip) {
  const int w = 16, h = 8;
  std::vector<unsigned char> px(w * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      px[(y * w + x) * 3 + 0] = static_cast<unsigned char>(200);
      px[(y * w + x) * 3 + 1] = static_cast<unsigned char>(x * 8);
      px[(y * w + x) * 3 + 2] = static_cast<unsigned char>(y * 16);
    }
  auto out = Decode(Encode(px, w, h, TJPF_RGB, TJSAMP_444));
  ASSERT_TRUE(out) << out.error().ToString();
  EXPECT_EQ(out->type.ToString(), "uint8[8,16,3] HWC");
  double max_err = 0;
  for (int i = 0; i < w * h * 3; ++i)
    max_err = std::max<double>(max_err, std::fabs(out->data[i] - px[i]));
  EXPECT_LE(max_err, 4.0);  // quality 100, 4:4:4: near lossless

  auto gray = Decode(Encode(px, w, h, TJPF_RGB, TJSAMP_444), "gray");
  ASSERT_TRUE(gray);
  EXPECT_EQ(gray->type.ToString(), "uint8[8,16,1] HWC");
  const double luma = 0.299 * 200 + 0.587 * 0 + 0.114 * 0;  // pixel (0, 0)
  EXPECT_NEAR(gray->at(0, 0, 0), luma, 4.0);
}

TEST(DecodeJpegRefTest, GrayscaleJpegBecomesThreeChannels) {
  const int w = 8, h = 8;
  std::vector<unsigned char> px(w * h);
  for (int i = 0; i < w * h; ++i) px[i] = static_cast<unsigned char>(i * 3);
  auto out = Decode(Encode(px, w, h, TJPF_GRAY, TJSAMP_GRAY));
  ASSERT_TRUE(out) << out.error().ToString();
  EXPECT_EQ(out->type.ToString(), "uint8[8,8,3] HWC");
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      EXPECT_EQ(out->at(y, x, 0), out->at(y, x, 1));
      EXPECT_EQ(out->at(y, x, 0), out->at(y, x, 2));
      EXPECT_NEAR(out->at(y, x, 0), px[y * w + x], 3.0);
    }
}

TEST(DecodeJpegRefTest, CmykJpegBecomesRgb) {
  // A CMYK JPEG as libjpeg-turbo writes it (inverted CMYK), from a pure colour.
  const int w = 8, h = 8;
  std::vector<unsigned char> px(w * h * 4);
  for (int i = 0; i < w * h; ++i) {
    px[i * 4 + 0] = 255;  // C (inverted: no cyan)
    px[i * 4 + 1] = 128;
    px[i * 4 + 2] = 0;
    px[i * 4 + 3] = 255;  // K (inverted: no black)
  }
  auto out = Decode(Encode(px, w, h, TJPF_CMYK, TJSAMP_444));
  ASSERT_TRUE(out) << out.error().ToString();
  EXPECT_EQ(out->type.ToString(), "uint8[8,8,3] HWC");
  EXPECT_NEAR(out->at(3, 3, 0), 255, 3);
  EXPECT_NEAR(out->at(3, 3, 1), 128, 3);
  EXPECT_NEAR(out->at(3, 3, 2), 0, 3);
}

TEST(DecodeJpegRefTest, CorruptInput) {
  std::vector<unsigned char> px(32 * 32 * 3, 90);
  for (size_t i = 0; i < px.size(); i += 7) px[i] = static_cast<unsigned char>(i);
  std::vector<uint8_t> jpeg = Encode(px, 32, 32, TJPF_RGB, TJSAMP_420);
  std::vector<uint8_t> truncated(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  auto r = Decode(truncated);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCorruptData);
  EXPECT_FALSE(r.error().message.empty());

  r = Decode({'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'e', 'g'});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(r.error().message.find("not a readable JPEG"), std::string::npos);
  r = Decode({});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCorruptData);
}

}  // namespace
}  // namespace sluice
