// decode_png (PngDecoder / DecodePng) against pixels PIL decoded from the same
// files (tests/data/png/generate.py), and its error policy on damaged files.
#include "runtime/decode/png_decoder.h"

#include <gtest/gtest.h>
#include <spng.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/runtime/decode/fixture_files.h"

namespace sluice::runtime {
namespace {

using testing::Crc32;
using testing::CropRequest;
using testing::ExpectWholeImageDecoded;
using testing::ReadFixture;

constexpr int kW = 13, kH = 9;  // every fixture's size

const char* const kFixtures[] = {
    "rgb8",
    "rgba8",
    "gray8",
    "gray_alpha8",
    "gray1",
    "gray_trns8",
    "palette8_trns",
    "palette4_trns",
    "gray16",
    "rgb16",
    "rgba16",
    "gray_alpha16",
    "interlaced_rgb8",
    "interlaced_rgba16",
    "interlaced_gray8",
};

// PIL's pixels for one output mode: the .expected file holds RGB, RGBA, L, LA.
std::vector<uint8_t> Expected(const std::string& name, const PngOptions& o) {
  const std::vector<uint8_t> all = ReadFixture("png/" + name + ".expected");
  const size_t px = size_t{kW} * kH;
  EXPECT_EQ(all.size(), px * 10) << name;
  if (all.size() != px * 10) return {};
  size_t offset = 0;
  if (o.color == OutputColor::kGray) offset = px * 7;
  if (o.keep_alpha) offset += o.color == OutputColor::kGray ? px * 1 : px * 3;
  return std::vector<uint8_t>(all.begin() + offset, all.begin() + offset + px * o.channels());
}

TEST(PngDecoderTest, MatchesPilForEveryFormatAndMode) {
  for (const char* name : kFixtures) {
    const std::vector<uint8_t> png = ReadFixture(std::string("png/") + name + ".png");
    ASSERT_FALSE(png.empty()) << name;
    for (OutputColor color : {OutputColor::kRGB, OutputColor::kGray}) {
      for (bool keep : {false, true}) {
        const PngOptions o{color, keep};
        SCOPED_TRACE(std::string(name) + (color == OutputColor::kGray ? " gray" : " rgb") +
                     (keep ? " alpha keep" : " alpha drop"));
        ImageBuffer out;
        auto region = DecodePng(png, o, std::nullopt, out);
        ASSERT_TRUE(region) << region.error().ToString();
        ASSERT_EQ(out.width(), kW);
        ASSERT_EQ(out.height(), kH);
        ASSERT_EQ(out.channels(), o.channels());
        const std::vector<uint8_t> want = Expected(name, o);
        ASSERT_EQ(want.size(), out.size_bytes());
        size_t mismatches = 0, first = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          if (want[i] != out.data()[i] && mismatches++ == 0) first = i;
        }
        EXPECT_EQ(mismatches, 0u) << "first at byte " << first << ": got " << int(out.data()[first])
                                  << ", PIL " << int(want[first]);
      }
    }
  }
}

TEST(PngDecoderTest, HeaderAndInfo) {
  auto info = ReadPngHeader(ReadFixture("png/interlaced_rgba16.png"));
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_EQ(info->width, kW);
  EXPECT_EQ(info->height, kH);
  EXPECT_EQ(info->bit_depth, 16);
  EXPECT_EQ(info->color_type, 6);
  EXPECT_TRUE(info->interlaced);
  auto d = PngDecoder::Create(
      {{"color", ParamValue{std::string("gray")}}, {"alpha", ParamValue{std::string("keep")}}});
  ASSERT_TRUE(d);
  auto header = (*d)->ReadHeader(ReadFixture("png/rgb8.png"));
  ASSERT_TRUE(header);
  EXPECT_EQ(header->channels, 2);
}

TEST(PngDecoderTest, WholeImageRegardlessOfCropAndScale) {
  auto d = PngDecoder::Create({});
  ASSERT_TRUE(d);
  EXPECT_FALSE((*d)->caps().region_of_interest);
  EXPECT_FALSE((*d)->caps().dct_scaling);
  DecodeRequest request = CropRequest(PixelRect{2, 3, 8, 4}, 2, 1);
  ImageBuffer out;
  auto region = (*d)->Decode(ReadFixture("png/rgb8.png"), request, out);
  ASSERT_TRUE(region) << region.error().ToString();
  ExpectWholeImageDecoded(*region, kW, kH, PixelRect{2, 3, 8, 4});
  EXPECT_EQ(region->crop_x, 2);
  EXPECT_EQ(region->crop_height, 4);
  EXPECT_EQ(out.width(), kW);

  request.crop = PixelRect{10, 0, 8, 4};  // beyond the right edge
  auto bad = (*d)->Decode(ReadFixture("png/rgb8.png"), request, out);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

TEST(PngDecoderTest, ReusesTheBuffer) {
  ImageBuffer out;
  ASSERT_TRUE(DecodePng(ReadFixture("png/rgba16.png"), {OutputColor::kRGB, true}, {}, out));
  const uint8_t* data = out.data();
  ASSERT_TRUE(DecodePng(ReadFixture("png/gray8.png"), {OutputColor::kGray, false}, {}, out));
  EXPECT_EQ(out.data(), data);
}

// ---- damaged files -------------------------------------------------------------

void PutU32(std::vector<uint8_t>& v, size_t at, uint32_t x) {
  for (int i = 0; i < 4; ++i) v[at + i] = static_cast<uint8_t>(x >> (24 - 8 * i));
}

// Sets IHDR's width and height and fixes its CRC (IHDR data starts at byte 16).
std::vector<uint8_t> WithSize(std::vector<uint8_t> png, uint32_t w, uint32_t h) {
  PutU32(png, 16, w);
  PutU32(png, 20, h);
  PutU32(png, 29, Crc32(&png[12], 17));
  return png;
}

void ExpectCorrupt(const std::vector<uint8_t>& png, const std::string& what,
                   const std::string& reason_part = "") {
  SCOPED_TRACE(what);
  ImageBuffer out;
  auto region = DecodePng(png, {OutputColor::kRGB, false}, std::nullopt, out);
  ASSERT_FALSE(region);
  EXPECT_EQ(region.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(region.error().message.find("PNG"), std::string::npos) << region.error().message;
  if (!reason_part.empty()) {
    EXPECT_NE(region.error().message.find(reason_part), std::string::npos)
        << region.error().message;
  }
}

TEST(PngDecoderTest, CorruptFilesAreCorruptData) {
  const std::vector<uint8_t> good = ReadFixture("png/rgb16.png");
  ASSERT_GT(good.size(), 100u);
  ExpectCorrupt({}, "empty", "signature");
  ExpectCorrupt({'h', 'e', 'l', 'l', 'o'}, "garbage", "signature");
  std::vector<uint8_t> garbage(good.begin(), good.begin() + 8);
  for (int i = 0; i < 200; ++i) garbage.push_back(static_cast<uint8_t>(i * 97 + 13));
  ExpectCorrupt(garbage, "garbage after the signature");
  for (size_t keep : {size_t{12}, size_t{30}, good.size() / 2, good.size() - 13}) {
    ExpectCorrupt(std::vector<uint8_t>(good.begin(), good.begin() + keep),
                  "truncated to " + std::to_string(keep));
  }
  std::vector<uint8_t> bad_ihdr_crc = good;
  bad_ihdr_crc[18] ^= 0x01;  // width changes, CRC not
  ExpectCorrupt(bad_ihdr_crc, "IHDR CRC", "checksum");
  std::vector<uint8_t> bad_idat = good;
  bad_idat[60] ^= 0x55;  // inside IDAT's compressed data: zlib notices first
  ExpectCorrupt(bad_idat, "IDAT data", "IDAT");
  std::vector<uint8_t> bad_idat_crc = good;
  bad_idat_crc[good.size() - 14] ^= 0x55;  // the last IDAT's CRC (IEND is 12 bytes)
  ExpectCorrupt(bad_idat_crc, "IDAT CRC", "checksum");
  std::vector<uint8_t> no_iend(good.begin(), good.end() - 12);
  ExpectCorrupt(no_iend, "no IEND");
  ExpectCorrupt(WithSize(good, 0, 5), "zero width");
  ExpectCorrupt(WithSize(good, 20000, 20000), "over the pixel limit", "limit");
  ExpectCorrupt(WithSize(good, 40000, 2), "over the side limit");
  // The limit applies to headers too, before any allocation.
  auto header = ReadPngHeader(WithSize(good, 20000, 20000));
  ASSERT_FALSE(header);
  EXPECT_EQ(header.error().code, ErrorCode::kCorruptData);
}

// A header within max_pixels whose image data is far too small to hold it
// (here 9999x9999 claimed by a 13x9 file): kCorruptData from the IDAT size,
// before the ~300 MB pixel buffer is allocated (the buffer stays empty).
// Before this check the buffer was allocated in full and libspng then found
// the stream short.
TEST(PngDecoderTest, HeaderLargerThanItsDataIsRefusedBeforeAllocation) {
  for (const char* name : {"rgb8", "interlaced_rgba16", "gray1"}) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bomb =
        WithSize(ReadFixture(std::string("png/") + name + ".png"), 9999, 9999);
    ImageBuffer out;
    auto region = DecodePng(bomb, {OutputColor::kRGB, false}, std::nullopt, out);
    ASSERT_FALSE(region);
    EXPECT_EQ(region.error().code, ErrorCode::kCorruptData);
    EXPECT_NE(region.error().message.find("cannot hold a 9999x9999 image"), std::string::npos)
        << region.error().message;
    EXPECT_EQ(out.capacity(), 0u);
  }
}

// libspng's encoder at level 9: a w x h image of one colour.
std::vector<uint8_t> EncodeFlat(uint32_t w, uint32_t h, uint8_t color_type, uint8_t depth) {
  const int samples = color_type == SPNG_COLOR_TYPE_TRUECOLOR ? 3 : 1;
  const size_t row = (size_t{w} * samples * depth + 7) / 8;
  std::vector<uint8_t> pixels(row * h, 0);
  spng_ctx* enc = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_ihdr ihdr{w, h, depth, color_type, 0, 0, 0};
  int err = spng_set_option(enc, SPNG_ENCODE_TO_BUFFER, 1);
  if (err == 0) err = spng_set_ihdr(enc, &ihdr);
  if (err == 0) err = spng_set_option(enc, SPNG_IMG_COMPRESSION_LEVEL, 9);
  if (err == 0) {
    err = spng_encode_image(enc, pixels.data(), pixels.size(), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  }
  size_t len = 0;
  void* buf = err == 0 ? spng_get_png_buffer(enc, &len, &err) : nullptr;
  spng_ctx_free(enc);
  EXPECT_EQ(err, 0) << spng_strerror(err);
  std::vector<uint8_t> png(static_cast<uint8_t*>(buf), static_cast<uint8_t*>(buf) + len);
  std::free(buf);
  return png;
}

// The IDAT bound is deflate's own limit, so the most compressible valid PNGs
// (one colour, near zlib's best ratio) still decode.
TEST(PngDecoderTest, MaximallyCompressedValidImagesDecode) {
  struct Case {
    uint32_t w, h;
    uint8_t color_type, depth;
  };
  for (const Case& c : {Case{3000, 2000, SPNG_COLOR_TYPE_TRUECOLOR, 8},
                        Case{4000, 4000, SPNG_COLOR_TYPE_GRAYSCALE, 1}}) {
    SCOPED_TRACE(std::to_string(c.w) + "x" + std::to_string(c.h));
    const std::vector<uint8_t> png = EncodeFlat(c.w, c.h, c.color_type, c.depth);
    ASSERT_FALSE(png.empty());
    const size_t raw = size_t{c.w} * c.h * (c.color_type == SPNG_COLOR_TYPE_TRUECOLOR ? 24 : 1) / 8;
    EXPECT_GT(raw / png.size(), 900u) << png.size();  // 989 and 1022: near 1032
    ImageBuffer out;
    auto region = DecodePng(png, {OutputColor::kRGB, false}, std::nullopt, out);
    ASSERT_TRUE(region) << region.error().ToString();
    EXPECT_EQ(out.width(), static_cast<int>(c.w));
    EXPECT_EQ(out.height(), static_cast<int>(c.h));
  }
}

TEST(PngDecoderTest, EveryTruncationAndByteFlipFailsCleanly) {
  // Never a crash or a sanitizer report: every prefix is kCorruptData, every
  // single-byte change decodes or is kCorruptData. (The one exception to
  // "every prefix": libspng does not read IEND's own CRC, the last 4 bytes,
  // so a file cut there still decodes; PIL accepts even less of an IEND.)
  for (const char* name : {"interlaced_rgb8", "palette4_trns", "gray1", "gray_alpha16"}) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> good = ReadFixture(std::string("png/") + name + ".png");
    ASSERT_FALSE(good.empty());
    ImageBuffer out;
    for (size_t n = 0; n + 4 < good.size(); ++n) {
      auto r =
          DecodePng(std::span<const uint8_t>(good.data(), n), {OutputColor::kRGB, true}, {}, out);
      ASSERT_FALSE(r) << n;
      EXPECT_EQ(r.error().code, ErrorCode::kCorruptData) << n;
    }
    for (size_t i = 0; i < good.size(); ++i) {
      std::vector<uint8_t> bad = good;
      bad[i] ^= 0xA5;
      for (const PngOptions& o :
           {PngOptions{OutputColor::kGray, false}, PngOptions{OutputColor::kRGB, true}}) {
        auto r = DecodePng(bad, o, {}, out);
        if (!r) {
          EXPECT_EQ(r.error().code, ErrorCode::kCorruptData) << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice::runtime
