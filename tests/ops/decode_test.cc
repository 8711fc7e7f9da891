// The decode ops' reference implementations: decode_jpeg on JPEGs made here
// with tjCompress2 and on PIL's EXIF fixtures, decode_png and decode_image on
// PIL's PNG fixtures (tests/data/*/generate.py), and their type rules.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>
#include <string>

#include "ops/exif_orientation.h"
#include "ops/registry.h"
#include "tests/runtime/decode/fixture_files.h"

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

// ---- orientation, PNG, decode_image ------------------------------------------

using runtime::testing::ReadFixture;

Result<RefTensor> RunRef(const std::string& op, std::vector<uint8_t> bytes, ParamList params) {
  RefContext ctx;
  return FindOp(op)->reference(RefTensor::Encoded(std::move(bytes)), params, ctx);
}

// The reference's uint8 values as bytes, row-major HWC.
std::vector<uint8_t> Bytes(const RefTensor& t) {
  std::vector<uint8_t> out(t.data.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(t.data[i]);
  return out;
}

TEST(DecodeJpegRefTest, ExifOrientationMatchesPil) {
  for (int n = 1; n <= 8; ++n) {
    SCOPED_TRACE("orientation " + std::to_string(n));
    const std::string stem = "exif/orient" + std::to_string(n);
    auto out = RunRef("decode_jpeg", ReadFixture(stem + ".jpg"),
                      {{"color", ParamValue{std::string("rgb")}},
                       {"orientation", ParamValue{std::string("exif")}}});
    ASSERT_TRUE(out) << out.error().ToString();
    EXPECT_EQ(out->type.ToString(), n >= 5 ? "uint8[20,12,3] HWC" : "uint8[12,20,3] HWC");
    EXPECT_EQ(Bytes(*out), ReadFixture(stem + ".expected"));
    // The default ignores the tag.
    auto stored = RunRef("decode_jpeg", ReadFixture(stem + ".jpg"), {});
    ASSERT_TRUE(stored);
    EXPECT_EQ(Bytes(*stored), ReadFixture("exif/stored.expected"));
  }
}

TEST(DecodePngRefTest, MatchesPil) {
  const int w = 13, h = 9;
  for (const char* name : {"rgb8", "rgba8", "gray8", "gray_alpha8", "gray1", "gray_trns8",
                           "palette8_trns", "palette4_trns", "gray16", "rgb16", "rgba16",
                           "gray_alpha16", "interlaced_rgb8", "interlaced_rgba16"}) {
    const std::vector<uint8_t> png = ReadFixture(std::string("png/") + name + ".png");
    const std::vector<uint8_t> expected = ReadFixture(std::string("png/") + name + ".expected");
    ASSERT_EQ(expected.size(), size_t{w} * h * 10) << name;
    size_t offset = 0;
    for (const char* color : {"rgb", "gray"}) {
      for (const char* alpha : {"drop", "keep"}) {
        SCOPED_TRACE(std::string(name) + " " + color + " " + alpha);
        auto out = RunRef(
            "decode_png", png,
            {{"color", ParamValue{std::string(color)}}, {"alpha", ParamValue{std::string(alpha)}}});
        ASSERT_TRUE(out) << out.error().ToString();
        const size_t n = out->data.size();
        EXPECT_EQ(n, size_t{w} * h * ((color[0] == 'g' ? 1 : 3) + (alpha[0] == 'k' ? 1 : 0)));
        EXPECT_EQ(Bytes(*out),
                  std::vector<uint8_t>(expected.begin() + offset, expected.begin() + offset + n));
        offset += n;
      }
    }
  }
}

TEST(DecodePngRefTest, CorruptInput) {
  std::vector<uint8_t> png = ReadFixture("png/rgb16.png");
  for (std::vector<uint8_t> bad : {std::vector<uint8_t>{}, std::vector<uint8_t>{1, 2, 3},
                                   std::vector<uint8_t>(png.begin(), png.begin() + 100)}) {
    auto r = RunRef("decode_png", bad, {});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kCorruptData);
  }
  png[png.size() - 14] ^= 0x55;  // the last IDAT's CRC
  auto r = RunRef("decode_png", png, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(r.error().message.find("checksum"), std::string::npos) << r.error().message;
}

TEST(DecodeImageRefTest, DispatchesByMagicBytes) {
  const ParamList keep = {{"alpha", ParamValue{std::string("keep")}},
                          {"orientation", ParamValue{std::string("exif")}}};
  auto png = RunRef("decode_image", ReadFixture("png/rgba8.png"), keep);
  auto png_direct = RunRef("decode_png", ReadFixture("png/rgba8.png"), keep);
  ASSERT_TRUE(png && png_direct);
  EXPECT_EQ(png->data, png_direct->data);
  EXPECT_EQ(png->type.ToString(), "uint8[9,13,4] HWC");

  auto jpeg = RunRef("decode_image", ReadFixture("exif/orient6.jpg"), keep);
  auto jpeg_direct = RunRef("decode_jpeg", ReadFixture("exif/orient6.jpg"), keep);
  ASSERT_TRUE(jpeg && jpeg_direct);
  EXPECT_EQ(jpeg->type.ToString(), "uint8[20,12,4] HWC");
  for (int64_t y = 0; y < 20; ++y)
    for (int64_t x = 0; x < 12; ++x) {
      for (int c = 0; c < 3; ++c) ASSERT_EQ(jpeg->at(y, x, c), jpeg_direct->at(y, x, c));
      ASSERT_EQ(jpeg->at(y, x, 3), 255);
    }

  auto gif = RunRef("decode_image", {'G', 'I', 'F', '8', '9', 'a', 0, 0}, {});
  ASSERT_FALSE(gif);
  EXPECT_EQ(gif.error().code, ErrorCode::kCorruptData);
}

TEST(DecodeInferTest, ChannelsFromColorAndAlpha) {
  auto text = [](const char* op, ParamList params) {
    auto r = FindOp(op)->infer(std::vector<TensorType>{EncodedBytes()}, params);
    return r ? (*r)[0].ToString() : "error: " + r.error().message;
  };
  const ParamValue gray{std::string("gray")}, keep{std::string("keep")};
  EXPECT_EQ(text("decode_png", {}), "uint8[?,?,3] HWC");
  EXPECT_EQ(text("decode_png", {{"alpha", keep}}), "uint8[?,?,4] HWC");
  EXPECT_EQ(text("decode_png", {{"color", gray}}), "uint8[?,?,1] HWC");
  EXPECT_EQ(text("decode_png", {{"color", gray}, {"alpha", keep}}), "uint8[?,?,2] HWC");
  EXPECT_EQ(text("decode_image", {{"alpha", keep}}), "uint8[?,?,4] HWC");
  EXPECT_EQ(text("decode_jpeg", {{"orientation", ParamValue{std::string("exif")}}}),
            "uint8[?,?,3] HWC");
  auto r = FindOp("decode_png")
               ->infer(std::vector<TensorType>{Image(DType::kUInt8, Layout::kHWC, 4, 4, 3)}, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "`decode_png` expects encoded bytes, got uint8[4,4,3] HWC");
}

}  // namespace
}  // namespace sluice
