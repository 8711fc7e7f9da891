// MakeDecoder's table and the decode_jpeg adapter (JpegDecoder).
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <string>
#include <vector>

#include "ops/registry.h"
#include "runtime/decode/decoder.h"
#include "runtime/decode/jpeg_decoder.h"
#include "tests/runtime/decode/fixture_files.h"

namespace sluice::runtime {
namespace {

using testing::Crc32;

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

// ---- max_pixels: decompression bombs are bad samples, found from the header --

// `jpg` with its SOF0 frame header patched to claim w x h.
std::vector<uint8_t> JpegClaiming(std::vector<uint8_t> jpg, int w, int h) {
  for (size_t i = 0; i + 8 < jpg.size(); ++i) {
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
      jpg[i + 5] = uint8_t(h >> 8), jpg[i + 6] = uint8_t(h);
      jpg[i + 7] = uint8_t(w >> 8), jpg[i + 8] = uint8_t(w);
      return jpg;
    }
  }
  ADD_FAILURE() << "no SOF0";
  return jpg;
}

void AppendU32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (24 - 8 * i)));
}

// A 57-byte PNG: signature, an IHDR claiming w x h 8-bit RGB (valid CRC), an
// empty IDAT and IEND. Only its header is ever read.
std::vector<uint8_t> PngClaiming(uint32_t w, uint32_t h) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  auto chunk = [&](const char* type, std::vector<uint8_t> data) {
    AppendU32(png, static_cast<uint32_t>(data.size()));
    const size_t start = png.size();
    png.insert(png.end(), type, type + 4);
    png.insert(png.end(), data.begin(), data.end());
    AppendU32(png, Crc32(&png[start], png.size() - start));
  };
  std::vector<uint8_t> ihdr;
  AppendU32(ihdr, w);
  AppendU32(ihdr, h);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, deflate, no filter, no interlace
  chunk("IHDR", ihdr);
  chunk("IDAT", {});
  chunk("IEND", {});
  return png;
}

void ExpectBomb(const Decoder& d, const std::vector<uint8_t>& bytes, const std::string& size,
                int64_t limit) {
  SCOPED_TRACE(std::string(d.op_name()) + " " + size);
  auto header = d.ReadHeader(bytes);
  ASSERT_FALSE(header.has_value());
  EXPECT_EQ(header.error().code, ErrorCode::kCorruptData);
  const std::string want = "max_pixels=" + std::to_string(limit);
  EXPECT_NE(header.error().message.find(size), std::string::npos) << header.error().message;
  EXPECT_NE(header.error().message.find(want), std::string::npos) << header.error().message;
  ImageBuffer out;
  auto region = d.Decode(bytes, {}, out);
  ASSERT_FALSE(region.has_value());
  EXPECT_EQ(region.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(region.error().message.find(want), std::string::npos) << region.error().message;
  EXPECT_EQ(out.capacity(), 0u);  // refused before any pixel buffer
}

TEST(MaxPixels, OpDefaultIsTheDecodersDefault) {
  for (const char* op : {"decode_jpeg", "decode_png", "decode_image"}) {
    const OpDef* def = FindOp(op);
    ASSERT_NE(def, nullptr) << op;
    const ParamDef* p = nullptr;
    for (const ParamDef& d : def->params) p = d.name == "max_pixels" ? &d : p;
    ASSERT_NE(p, nullptr) << op;
    EXPECT_EQ(p->default_value->AsInt(), kDefaultMaxPixels) << op;
  }
  EXPECT_EQ(kDefaultMaxPixels, 100'000'000);
}

TEST(MaxPixels, BombsRefusedFromTheHeaderByDefault) {
  const auto jpeg_bomb = JpegClaiming(EncodeRgbJpeg(16, 16), 30000, 30000);
  const auto png_bomb = PngClaiming(30000, 30000);
  for (const char* op : {"decode_jpeg", "decode_png", "decode_image"}) {
    auto d = MakeDecoder(op, {});
    ASSERT_TRUE(d) << d.error().ToString();
    if (std::string(op) != "decode_png") ExpectBomb(**d, jpeg_bomb, "30000x30000", 100'000'000);
    if (std::string(op) != "decode_jpeg") ExpectBomb(**d, png_bomb, "30000x30000", 100'000'000);
  }
  // Just at the limit: 10000 x 10000 passes the header check.
  auto d = MakeDecoder("decode_png", {});
  ASSERT_TRUE(d);
  auto header = (*d)->ReadHeader(PngClaiming(10000, 10000));
  ASSERT_TRUE(header.has_value()) << header.error().ToString();
  EXPECT_EQ(header->width, 10000);
}

TEST(MaxPixels, ParamSetsTheLimit) {
  // 16 x 16 = 256 pixels: refused at max_pixels 255, decoded at 256.
  const auto jpg = EncodeRgbJpeg(16, 16);
  const auto png = testing::ReadFixture("png/rgba16.png");
  ImageBuffer out;
  for (const char* op : {"decode_jpeg", "decode_image"}) {
    auto tight = MakeDecoder(op, {{"max_pixels", ParamValue{int64_t{255}}}});
    ASSERT_TRUE(tight) << tight.error().ToString();
    ExpectBomb(**tight, jpg, "16x16", 255);
    auto fits = MakeDecoder(op, {{"max_pixels", ParamValue{int64_t{256}}}});
    ASSERT_TRUE(fits);
    ASSERT_TRUE((*fits)->Decode(jpg, {}, out).has_value()) << op;
  }
  auto png_d = MakeDecoder("decode_png", {});
  ASSERT_TRUE(png_d);
  auto info = (*png_d)->ReadHeader(png);
  ASSERT_TRUE(info.has_value());
  const int64_t n = int64_t{info->width} * info->height;
  for (const char* op : {"decode_png", "decode_image"}) {
    auto tight = MakeDecoder(op, {{"max_pixels", ParamValue{n - 1}}});
    ASSERT_TRUE(tight);
    ExpectBomb(**tight, png, std::to_string(info->width) + "x" + std::to_string(info->height),
               n - 1);
    auto fits = MakeDecoder(op, {{"max_pixels", ParamValue{n}}});
    ASSERT_TRUE(fits);
    ASSERT_TRUE((*fits)->Decode(png, {}, out).has_value()) << op;
  }
  // A value that is not a positive integer is refused when the decoder is made.
  auto bad = MakeDecoder("decode_jpeg", {{"max_pixels", ParamValue{int64_t{0}}}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::runtime
