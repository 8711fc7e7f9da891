#include "pack/shrink.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "ops/reference/ref_tensor.h"
#include "ops/reference/resample.h"
#include "ops/registry.h"
#include "runtime/decode/decoder.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice::runtime {
namespace {

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

ImageHeader HeaderOf(std::span<const uint8_t> bytes) {
  auto decoder = MakeDecoder("decode_image", WithDefaults(FindOp("decode_image")->params, {}));
  auto header = (*decoder)->ReadHeader(bytes);
  EXPECT_TRUE(header.has_value());
  return header.value_or(ImageHeader{});
}

TEST(Shrink, SniffsFormatFromBytesNotNames) {
  const auto jpeg = testing_loader::MakeJpeg(8, 8, 1);
  EXPECT_EQ(SniffImageFormat(jpeg), ImageFormat::kJpeg);
  const auto png = ReadFile(std::string(SLUICE_SOURCE_DIR) + "/tests/data/png/rgb8.png");
  EXPECT_EQ(SniffImageFormat(png), ImageFormat::kPng);
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_EQ(SniffImageFormat(text), ImageFormat::kUnknown);
  EXPECT_EQ(ImageFormatExtension(ImageFormat::kJpeg), "jpg");
}

TEST(Shrink, LargeJpegShrinksToMaxSideKeepingAspect) {
  const auto jpeg = testing_loader::MakeJpeg(640, 360, 7);
  std::vector<uint8_t> out;
  auto r = ShrinkToMaxSide(jpeg, 160, 85, out);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_TRUE(r->resized);
  EXPECT_EQ(r->original_width, 640);
  EXPECT_EQ(r->original_height, 360);
  EXPECT_EQ(r->width, 160);
  EXPECT_EQ(r->height, 90);
  ASSERT_EQ(SniffImageFormat(out), ImageFormat::kJpeg);
  const ImageHeader h = HeaderOf(out);
  EXPECT_EQ(h.width, 160);
  EXPECT_EQ(h.height, 90);
  EXPECT_LT(out.size(), jpeg.size());
  // Deterministic: the same input gives the same bytes.
  std::vector<uint8_t> again;
  ASSERT_TRUE(ShrinkToMaxSide(jpeg, 160, 85, again).has_value());
  EXPECT_EQ(out, again);
}

TEST(Shrink, SmallImageIsKeptAsIs) {
  const auto jpeg = testing_loader::MakeJpeg(100, 60, 3);
  std::vector<uint8_t> out = {1, 2, 3};
  auto r = ShrinkToMaxSide(jpeg, 100, 90, out);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->resized);
  EXPECT_EQ(r->width, 100);
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 2, 3}));  // untouched
}

TEST(Shrink, PngStaysPng) {
  const auto png = ReadFile(std::string(SLUICE_SOURCE_DIR) + "/tests/data/png/rgb8.png");
  const ImageHeader before = HeaderOf(png);
  ASSERT_GT(std::max(before.width, before.height), 2);
  const int max_side = std::max(before.width, before.height) / 2;
  std::vector<uint8_t> out;
  auto r = ShrinkToMaxSide(png, max_side, 90, out);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_TRUE(r->resized);
  ASSERT_EQ(SniffImageFormat(out), ImageFormat::kPng);
  const ImageHeader after = HeaderOf(out);
  EXPECT_EQ(std::max(after.width, after.height), max_side);
}

TEST(Shrink, GarbageIsCorruptData) {
  const std::vector<uint8_t> text(100, 'x');
  std::vector<uint8_t> out;
  auto r = ShrinkToMaxSide(text, 64, 90, out);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kCorruptData);
  auto truncated = testing_loader::MakeJpeg(300, 200, 5);
  truncated.resize(truncated.size() / 3);
  auto t = ShrinkToMaxSide(truncated, 64, 90, out);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code, ErrorCode::kCorruptData);
}

// The resize pack uses is the reference resampler, byte for byte, only faster.
TEST(ShrinkTest, ResizeRgb8EqualsTheReferenceResamplerByteForByte) {
  struct Case {
    int w, h, out_w, out_h;
  };
  for (const Case c : {Case{97, 61, 40, 25}, Case{640, 360, 512, 288}, Case{33, 20, 7, 5},
                       Case{300, 301, 299, 150}, Case{20, 10, 31, 17}}) {
    SCOPED_TRACE(testing::Message() << c.w << "x" << c.h << " -> " << c.out_w << "x" << c.out_h);
    const size_t stride = static_cast<size_t>(c.w) * 3 + 5;  // padded rows
    std::vector<uint8_t> rgb(stride * c.h);
    uint32_t s = 12345;
    for (uint8_t& v : rgb) {
      s = s * 1664525u + 1013904223u;
      v = static_cast<uint8_t>(s >> 24);
    }
    RefTensor in = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {c.h, c.w, 3});
    for (int y = 0; y < c.h; ++y) {
      for (int x = 0; x < c.w * 3; ++x) {
        in.data[static_cast<size_t>(y) * c.w * 3 + x] = rgb[y * stride + x];
      }
    }
    const RefTensor want =
        ref::ResizeHWC(in, c.out_h, c.out_w, ref::Filter::kBilinear, /*antialias=*/true);
    const std::vector<uint8_t> got = ResizeRgb8(rgb.data(), c.w, c.h, stride, c.out_w, c.out_h);
    ASSERT_EQ(got.size(), want.data.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != static_cast<uint8_t>(want.data[i]);
    EXPECT_EQ(differ, 0u);
  }
}

}  // namespace
}  // namespace sluice::runtime
