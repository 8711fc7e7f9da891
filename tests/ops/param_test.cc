#include "ops/param.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/reference/ref_tensor.h"

namespace sluice {
namespace {

TEST(ParamValueTest, TextForm) {
  EXPECT_EQ(ParamValue{int64_t{3}}.ToString(), "3");
  EXPECT_EQ(ParamValue{int64_t{-1}}.ToString(), "-1");
  EXPECT_EQ(ParamValue{0.5}.ToString(), "0.5");
  EXPECT_EQ(ParamValue{0.08}.ToString(), "0.08");
  EXPECT_EQ(ParamValue{1.0}.ToString(), "1");
  EXPECT_EQ(ParamValue{255.0}.ToString(), "255");
  EXPECT_EQ(ParamValue{1.3333333333333333}.ToString(), "1.3333333333333333");
  EXPECT_EQ(ParamValue{true}.ToString(), "true");
  EXPECT_EQ(ParamValue{false}.ToString(), "false");
  EXPECT_EQ(ParamValue{std::string("rgb")}.ToString(), "\"rgb\"");
  EXPECT_EQ(ParamValue{std::string("a\"b\\c")}.ToString(), "\"a\\\"b\\\\c\"");
  EXPECT_EQ((ParamValue{std::vector<int64_t>{224, 224}}.ToString()), "[224,224]");
  EXPECT_EQ((ParamValue{std::vector<double>{0.485, 0.456, 0.406}}.ToString()),
            "[0.485,0.456,0.406]");
  EXPECT_EQ((ParamValue{std::map<std::string, std::string>{{"label", "cls"}, {"image", "image"}}}
                 .ToString()),
            "{image: \"image\", label: \"cls\"}");
  ParamList section;
  section["policy"] = ParamValue{std::string("skip")};
  section["max_fraction"] = ParamValue{0.001};
  EXPECT_EQ(ParamValue{section}.ToString(), "{max_fraction: 0.001, policy: \"skip\"}");
}

TEST(ParamValueTest, AccessorsAndFind) {
  ParamList params;
  params["size"] = ParamValue{std::vector<int64_t>{256}};
  params["scale"] = ParamValue{int64_t{255}};
  ASSERT_NE(FindParam(params, "size"), nullptr);
  EXPECT_EQ(FindParam(params, "size")->AsIntList(), std::vector<int64_t>{256});
  EXPECT_DOUBLE_EQ(FindParam(params, "scale")->AsFloat(), 255.0);  // ints read as floats
  EXPECT_EQ(FindParam(params, "missing"), nullptr);
}

TEST(ParamTypeTest, Names) {
  EXPECT_EQ(ParamTypeName(ParamType::kIntList), "int list");
  EXPECT_EQ(ParamTypeName(ParamType::kAutoInt), "int or auto");
  EXPECT_EQ(ParamTypeName(ParamType::kEnum), "enum");
}

TEST(RoundToDTypeTest, Float16) {
  EXPECT_EQ(RoundToDType(0.1f, DType::kFloat16), 0.0999755859375f);
  EXPECT_EQ(RoundToDType(1.0f, DType::kFloat16), 1.0f);
  EXPECT_EQ(RoundToDType(-2.5f, DType::kFloat16), -2.5f);
  EXPECT_EQ(RoundToDType(65504.0f, DType::kFloat16), 65504.0f);
  EXPECT_EQ(RoundToDType(65519.0f, DType::kFloat16), 65504.0f);
  EXPECT_TRUE(std::isinf(RoundToDType(65520.0f, DType::kFloat16)));
  EXPECT_TRUE(std::isinf(RoundToDType(-1e6f, DType::kFloat16)));
  EXPECT_LT(RoundToDType(-1e6f, DType::kFloat16), 0);
  // Ties go to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(RoundToDType(1.0f + 0x1p-11f, DType::kFloat16), 1.0f);
  EXPECT_EQ(RoundToDType(1.0f + 3 * 0x1p-11f, DType::kFloat16), 1.0f + 0x1p-9f);
  // Subnormals: quantum 2^-24.
  EXPECT_EQ(RoundToDType(0x1p-24f, DType::kFloat16), 0x1p-24f);
  EXPECT_EQ(RoundToDType(0x1p-26f, DType::kFloat16), 0.0f);
  EXPECT_EQ(RoundToDType(3 * 0x1p-25f, DType::kFloat16), 0x1p-23f);  // 1.5 quanta -> 2
  EXPECT_TRUE(std::isnan(RoundToDType(NAN, DType::kFloat16)));
}

TEST(RoundToDTypeTest, BFloat16) {
  EXPECT_EQ(RoundToDType(1.0f, DType::kBFloat16), 1.0f);
  EXPECT_EQ(RoundToDType(0.1f, DType::kBFloat16), 0.10009765625f);
  EXPECT_EQ(RoundToDType(1.0f + 0x1p-8f, DType::kBFloat16), 1.0f);  // tie -> even
  EXPECT_EQ(RoundToDType(1.0f + 3 * 0x1p-8f, DType::kBFloat16), 1.0f + 0x1p-6f);
  EXPECT_TRUE(std::isinf(RoundToDType(3.4e38f, DType::kBFloat16)));
}

TEST(RoundToDTypeTest, UInt8) {
  EXPECT_EQ(RoundToDType(-3.0f, DType::kUInt8), 0.0f);
  EXPECT_EQ(RoundToDType(300.0f, DType::kUInt8), 255.0f);
  EXPECT_EQ(RoundToDType(2.5f, DType::kUInt8), 2.0f);
  EXPECT_EQ(RoundToDType(3.5f, DType::kUInt8), 4.0f);
  EXPECT_EQ(RoundToDType(3.4f, DType::kUInt8), 3.0f);
  EXPECT_EQ(RoundToDType(NAN, DType::kUInt8), 0.0f);
  EXPECT_EQ(RoundToDType(0.1f, DType::kFloat32), 0.1f);
}

TEST(RefTensorTest, LayoutIndexing) {
  RefTensor hwc = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {2, 3, 4});
  RefTensor chw = RefTensor::Zeros(DType::kUInt8, Layout::kCHW, {4, 2, 3});
  EXPECT_EQ(hwc.num_elements(), 24);
  hwc.at(1, 2, 3) = 7;
  chw.at(1, 2, 3) = 7;
  EXPECT_EQ(hwc.data[(1 * 3 + 2) * 4 + 3], 7);
  EXPECT_EQ(chw.data[(3 * 2 + 1) * 3 + 2], 7);
  EXPECT_EQ(chw.height(), 2);
  EXPECT_EQ(chw.width(), 3);
  EXPECT_EQ(chw.channels(), 4);
  RefTensor enc = RefTensor::Encoded({1, 2, 3});
  EXPECT_TRUE(enc.type.encoded());
  EXPECT_EQ(enc.type.ToString(), "bytes[3]");
}

}  // namespace
}  // namespace sluice
