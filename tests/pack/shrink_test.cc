#include "pack/shrink.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

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

}  // namespace
}  // namespace sluice::runtime
