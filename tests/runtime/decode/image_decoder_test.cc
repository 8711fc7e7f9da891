// decode_image: JPEG or PNG by magic bytes, one decoder for a mixed folder.
#include "runtime/decode/image_decoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/runtime/decode/fixture_files.h"

namespace sluice::runtime {
namespace {

using testing::ReadFixture;

Result<std::unique_ptr<Decoder>> Make(const char* color, const char* alpha,
                                      const char* orientation = "ignore") {
  return MakeDecoder("decode_image", {{"color", ParamValue{std::string(color)}},
                                      {"alpha", ParamValue{std::string(alpha)}},
                                      {"orientation", ParamValue{std::string(orientation)}}});
}

TEST(ImageDecoderTest, PicksTheFormatByMagicBytes) {
  auto d = Make("rgb", "drop");
  ASSERT_TRUE(d) << d.error().ToString();
  EXPECT_EQ((*d)->op_name(), "decode_image");
  EXPECT_TRUE((*d)->caps().region_of_interest);  // the JPEG path's caps
  EXPECT_TRUE((*d)->caps().dct_scaling);

  const std::vector<uint8_t> png = ReadFixture("png/rgba8.png");
  ImageBuffer out, want;
  ASSERT_TRUE((*d)->Decode(png, {}, out));
  ASSERT_TRUE(DecodePng(png, {OutputColor::kRGB, false}, {}, want));
  ASSERT_EQ(out.size_bytes(), want.size_bytes());
  EXPECT_TRUE(std::equal(want.bytes().begin(), want.bytes().end(), out.data()));

  const std::vector<uint8_t> jpeg = ReadFixture("exif/orient6.jpg");
  ASSERT_TRUE((*d)->Decode(jpeg, {}, out));
  ASSERT_TRUE(DecodeJpeg(jpeg, {}, want));
  ASSERT_EQ(out.size_bytes(), want.size_bytes());
  EXPECT_TRUE(std::equal(want.bytes().begin(), want.bytes().end(), out.data()));
}

TEST(ImageDecoderTest, PngIgnoresTheCropAndSaysSo) {
  auto d = Make("rgb", "drop");
  ASSERT_TRUE(d);
  DecodeRequest request;
  request.crop = PixelRect{1, 2, 8, 6};
  request.min_width = 1;
  request.min_height = 1;
  ImageBuffer out;
  auto region = (*d)->Decode(ReadFixture("png/rgb8.png"), request, out);
  ASSERT_TRUE(region) << region.error().ToString();
  EXPECT_EQ(region->scale_denom, 1);
  EXPECT_EQ(region->decoded, (PixelRect{0, 0, 13, 9}));
  EXPECT_EQ(region->crop_in_buffer, *request.crop);
}

TEST(ImageDecoderTest, ChannelsAgreeAcrossFormats) {
  for (const char* color : {"rgb", "gray"}) {
    for (const char* alpha : {"drop", "keep"}) {
      SCOPED_TRACE(std::string(color) + " " + alpha);
      auto d = Make(color, alpha);
      ASSERT_TRUE(d);
      const int channels =
          (std::string(color) == "gray" ? 1 : 3) + (std::string(alpha) == "keep" ? 1 : 0);
      for (const char* file : {"png/rgba16.png", "png/gray8.png", "exif/orient1.jpg"}) {
        SCOPED_TRACE(file);
        const std::vector<uint8_t> data = ReadFixture(file);
        auto header = (*d)->ReadHeader(data);
        ASSERT_TRUE(header) << header.error().ToString();
        EXPECT_EQ(header->channels, channels);
        ImageBuffer out;
        ASSERT_TRUE((*d)->Decode(data, {}, out));
        EXPECT_EQ(out.channels(), channels);
      }
    }
  }
  // A JPEG with alpha keep: the colour channels of a plain decode, alpha 255.
  auto d = Make("rgb", "keep");
  ASSERT_TRUE(d);
  const std::vector<uint8_t> jpeg = ReadFixture("exif/orient1.jpg");
  ImageBuffer out, plain;
  ASSERT_TRUE((*d)->Decode(jpeg, {}, out));
  ASSERT_TRUE(DecodeJpeg(jpeg, {}, plain));
  ASSERT_EQ(out.width(), plain.width());
  for (int y = 0; y < out.height(); ++y)
    for (int x = 0; x < out.width(); ++x) {
      for (int c = 0; c < 3; ++c) ASSERT_EQ(out.row(y)[x * 4 + c], plain.row(y)[x * 3 + c]);
      ASSERT_EQ(out.row(y)[x * 4 + 3], 255);
    }
}

TEST(ImageDecoderTest, OrientationAppliesToJpeg) {
  auto d = Make("rgb", "drop", "exif");
  ASSERT_TRUE(d);
  const std::vector<uint8_t> jpeg = ReadFixture("exif/orient8.jpg");
  const std::vector<uint8_t> want = ReadFixture("exif/orient8.expected");
  ImageBuffer out;
  ASSERT_TRUE((*d)->Decode(jpeg, {}, out));
  EXPECT_EQ(out.width(), 12);
  ASSERT_EQ(out.size_bytes(), want.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), out.data()));
}

TEST(ImageDecoderTest, NeitherFormatIsCorruptData) {
  auto d = Make("rgb", "drop");
  ASSERT_TRUE(d);
  for (const std::vector<uint8_t>& data :
       {std::vector<uint8_t>{}, std::vector<uint8_t>{'G', 'I', 'F', '8', '9', 'a'}}) {
    ImageBuffer out;
    auto region = (*d)->Decode(data, {}, out);
    ASSERT_FALSE(region);
    EXPECT_EQ(region.error().code, ErrorCode::kCorruptData);
    auto header = (*d)->ReadHeader(data);
    ASSERT_FALSE(header);
    EXPECT_EQ(header.error().code, ErrorCode::kCorruptData);
  }
  // A truncated PNG is a PNG error, not "unknown format".
  std::vector<uint8_t> png = ReadFixture("png/rgb8.png");
  png.resize(40);
  ImageBuffer out;
  auto region = (*d)->Decode(png, {}, out);
  ASSERT_FALSE(region);
  EXPECT_EQ(region.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(region.error().message.find("PNG"), std::string::npos) << region.error().message;
}

}  // namespace
}  // namespace sluice::runtime
