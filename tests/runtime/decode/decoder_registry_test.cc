// MakeDecoder's table and the decode_jpeg adapter (JpegDecoder).
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <vector>

#include "runtime/decode/decoder.h"
#include "runtime/decode/jpeg_decoder.h"

namespace sluice::runtime {
namespace {

std::vector<uint8_t> EncodeRgbJpeg(int w, int h) {
  std::vector<unsigned char> px(size_t(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      unsigned char* p = &px[(size_t(y) * w + x) * 3];
      p[0] = static_cast<unsigned char>(x * 255 / (w - 1));
      p[1] = static_cast<unsigned char>(y * 255 / (h - 1));
      p[2] = static_cast<unsigned char>((x + y) % 256);
    }
  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(tj, px.data(), w, 0, h, TJPF_RGB, &jpeg, &size, TJSAMP_420, 90, 0), 0);
  std::vector<uint8_t> out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(tj);
  return out;
}

TEST(DecoderRegistryTest, MakesJpegDecoderWithCaps) {
  auto d = MakeDecoder("decode_jpeg", {{"color", ParamValue{std::string("rgb")}}});
  ASSERT_TRUE(d) << d.error().ToString();
  EXPECT_EQ((*d)->op_name(), "decode_jpeg");
  EXPECT_TRUE((*d)->caps().region_of_interest);
  EXPECT_TRUE((*d)->caps().dct_scaling);
}

TEST(DecoderRegistryTest, UnknownOpIsUnsupportedAndListsKnownOnes) {
  auto d = MakeDecoder("decode_webp", {});
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(d.error().message.find("decode_webp"), std::string::npos) << d.error().message;
  for (std::string_view name : DecoderNames()) {
    EXPECT_NE(d.error().message.find(std::string(name)), std::string::npos) << d.error().message;
  }
}

TEST(DecoderRegistryTest, EveryListedNameMakesADecoderOfThatName) {
  ASSERT_FALSE(DecoderNames().empty());
  for (std::string_view name : DecoderNames()) {
    auto d = MakeDecoder(name, {});  // missing params take the op's defaults
    ASSERT_TRUE(d) << name << ": " << d.error().ToString();
    EXPECT_EQ((*d)->op_name(), name);
  }
}

TEST(DecoderRegistryTest, BadParamValueIsInvalidArgument) {
  auto d = MakeDecoder("decode_jpeg", {{"color", ParamValue{std::string("cmyk")}}});
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(d.error().message.find("color"), std::string::npos) << d.error().message;
}

TEST(JpegDecoderAdapterTest, MatchesDecodeJpegAndUsesItsColorParam) {
  const std::vector<uint8_t> jpeg = EncodeRgbJpeg(40, 24);
  for (const char* color : {"rgb", "gray"}) {
    SCOPED_TRACE(color);
    const bool gray = std::string_view(color) == "gray";
    auto d = MakeDecoder("decode_jpeg", {{"color", ParamValue{std::string(color)}}});
    ASSERT_TRUE(d);
    auto header = (*d)->ReadHeader(jpeg);
    ASSERT_TRUE(header) << header.error().ToString();
    EXPECT_EQ(header->width, 40);
    EXPECT_EQ(header->height, 24);
    EXPECT_EQ(header->channels, gray ? 1 : 3);

    DecodeRequest request;  // request.color is ignored: the op's param decides
    request.color = gray ? OutputColor::kRGB : OutputColor::kGray;
    request.crop = PixelRect{8, 4, 20, 16};
    request.min_width = 10;
    request.min_height = 8;
    ImageBuffer got;
    auto region = (*d)->Decode(jpeg, request, got);
    ASSERT_TRUE(region) << region.error().ToString();
    EXPECT_EQ(got.channels(), gray ? 1 : 3);

    DecodeRequest direct = request;
    direct.color = gray ? OutputColor::kGray : OutputColor::kRGB;
    ImageBuffer want;
    auto want_region = DecodeJpeg(jpeg, direct, want);
    ASSERT_TRUE(want_region);
    EXPECT_EQ(region->scale_denom, 2);
    EXPECT_EQ(region->decoded, want_region->decoded);
    EXPECT_EQ(region->crop_in_buffer, want_region->crop_in_buffer);
    ASSERT_EQ(got.size_bytes(), want.size_bytes());
    EXPECT_TRUE(std::equal(got.bytes().begin(), got.bytes().end(), want.bytes().begin()));
  }
}

TEST(JpegDecoderAdapterTest, CorruptDataIsCorruptData) {
  auto d = MakeDecoder("decode_jpeg", {});
  ASSERT_TRUE(d);
  std::vector<uint8_t> jpeg = EncodeRgbJpeg(32, 32);
  jpeg.resize(jpeg.size() / 2);
  ImageBuffer out;
  auto region = (*d)->Decode(jpeg, {}, out);
  ASSERT_FALSE(region);
  EXPECT_EQ(region.error().code, ErrorCode::kCorruptData);
  const std::vector<uint8_t> garbage = {1, 2, 3, 4, 5};
  auto header = (*d)->ReadHeader(garbage);
  ASSERT_FALSE(header);
  EXPECT_EQ(header.error().code, ErrorCode::kCorruptData);
}

}  // namespace
}  // namespace sluice::runtime
