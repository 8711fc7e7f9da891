// Type inference rules and their errors, per op.
#include <gtest/gtest.h>

#include "ops/registry.h"

namespace sluice {
namespace {

ParamValue Ints(std::vector<int64_t> v) { return ParamValue{std::move(v)}; }
ParamValue Floats(std::vector<double> v) { return ParamValue{std::move(v)}; }
ParamValue Str(std::string s) { return ParamValue{std::move(s)}; }
ParamValue Int(int64_t i) { return ParamValue{i}; }

Result<std::vector<TensorType>> Infer(const std::string& op, std::vector<TensorType> inputs,
                                      ParamList params = {}) {
  const OpDef* def = FindOp(op);
  EXPECT_NE(def, nullptr) << op;
  return def->infer(inputs, params);
}

std::string InferText(const std::string& op, std::vector<TensorType> inputs,
                      ParamList params = {}) {
  auto r = Infer(op, std::move(inputs), std::move(params));
  if (!r) return "error: " + r.error().message;
  std::string out;
  for (const TensorType& t : *r) out += (out.empty() ? "" : "; ") + t.ToString();
  return out;
}

const TensorType kJpg = EncodedBytes();
const TensorType kDecoded = Image(DType::kUInt8, Layout::kHWC, kDynamic, kDynamic, 3);
const TensorType kFixed = Image(DType::kUInt8, Layout::kHWC, 224, 224, 3);

TEST(InferTest, Sources) {
  EXPECT_EQ(InferText("image_folder", {}, {{"path", Str("${DATA}/train")}}), "bytes[?]; int64[]");
  EXPECT_EQ(InferText("file_list", {}, {{"path", Str("list.csv")}}), "bytes[?]; int64[]");
  EXPECT_EQ(InferText("image_folder", {kJpg}, {{"path", Str("x")}}),
            "error: `image_folder` takes 0 inputs, got 1");
}

TEST(InferTest, DecodeJpeg) {
  EXPECT_EQ(InferText("decode_jpeg", {kJpg}), "uint8[?,?,3] HWC");
  EXPECT_EQ(InferText("decode_jpeg", {kJpg}, {{"color", Str("gray")}}), "uint8[?,?,1] HWC");
  auto r = Infer("decode_jpeg", {kFixed});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidSpec);
  EXPECT_EQ(r.error().message, "`decode_jpeg` expects encoded bytes, got uint8[224,224,3] HWC");
}

TEST(InferTest, Resize) {
  EXPECT_EQ(InferText("resize", {kDecoded}, {{"size", Ints({256})}}), "uint8[?,?,3] HWC");
  EXPECT_EQ(InferText("resize", {kDecoded}, {{"size", Ints({128, 96})}}), "uint8[128,96,3] HWC");
  const TensorType f = Image(DType::kFloat32, Layout::kHWC, 10, 10, 1);
  EXPECT_EQ(InferText("resize", {f}, {{"size", Ints({5, 5})}}), "float32[5,5,1] HWC");
}

TEST(InferTest, EncodedInputIsAnErrorWithHint) {
  for (const char* op : {"resize", "cast", "normalize", "layout", "random_flip"}) {
    ParamList p = {{"size", Ints({4})},
                   {"dtype", Str("float32")},
                   {"to", Str("CHW")},
                   {"mean", Floats({0})},
                   {"std", Floats({1})}};
    const OpDef* def = FindOp(op);
    // Keep only the op's own params.
    ParamList own;
    for (const ParamDef& pd : def->params) {
      if (p.contains(pd.name)) own[pd.name] = p[pd.name];
    }
    auto r = def->infer(std::vector<TensorType>{kJpg}, own);
    ASSERT_FALSE(r) << op;
    EXPECT_EQ(r.error().message,
              "`" + std::string(op) + "` expects a decoded image, got encoded bytes (bytes[?])");
    EXPECT_EQ(r.error().hint, "add `decode_jpeg` before it");
  }
}

TEST(InferTest, GeometryNeedsHWC) {
  const TensorType chw = Image(DType::kFloat32, Layout::kCHW, 224, 224, 3);
  auto r = Infer("center_crop", {chw}, {{"size", Ints({200})}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "`center_crop` expects an HWC image, got float32[3,224,224] CHW");
  EXPECT_NE(r.error().hint.find("layout: {to: CHW}"), std::string::npos);
  // Pointwise ops accept CHW.
  EXPECT_EQ(InferText("cast", {chw}, {{"dtype", Str("float16")}}), "float16[3,224,224] CHW");
}

TEST(InferTest, Crops) {
  EXPECT_EQ(InferText("center_crop", {kDecoded}, {{"size", Ints({224})}}), "uint8[224,224,3] HWC");
  EXPECT_EQ(InferText("center_crop", {kDecoded}, {{"size", Ints({100, 50})}}),
            "uint8[100,50,3] HWC");
  EXPECT_EQ(InferText("crop", {kDecoded},
                      {{"top", Int(1)}, {"left", Int(2)}, {"height", Int(3)}, {"width", Int(4)}}),
            "uint8[3,4,3] HWC");
  EXPECT_EQ(InferText("random_resized_crop", {kDecoded}, {{"size", Ints({224, 192})}}),
            "uint8[224,192,3] HWC");
  EXPECT_EQ(InferText("random_flip", {kDecoded}), "uint8[?,?,3] HWC");
}

TEST(InferTest, Pad) {
  EXPECT_EQ(InferText("pad", {kFixed}, {{"padding", Ints({4})}}), "uint8[232,232,3] HWC");
  EXPECT_EQ(InferText("pad", {kFixed}, {{"padding", Ints({1, 2})}}), "uint8[228,226,3] HWC");
  EXPECT_EQ(InferText("pad", {kFixed}, {{"padding", Ints({1, 2, 3, 4})}}), "uint8[230,228,3] HWC");
  EXPECT_EQ(InferText("pad", {kDecoded}, {{"padding", Ints({4})}}), "uint8[?,?,3] HWC");
  auto r = Infer("pad", {Image(DType::kUInt8, Layout::kHWC, 4, 4, 3)},
                 {{"padding", Ints({4})}, {"mode", Str("reflect")}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("reflect"), std::string::npos);
}

TEST(InferTest, ColorOps) {
  EXPECT_EQ(InferText("color_jitter", {kFixed}, {{"brightness", ParamValue{0.4}}}),
            "uint8[224,224,3] HWC");
  EXPECT_EQ(InferText("grayscale", {kFixed}), "uint8[224,224,1] HWC");
  EXPECT_EQ(InferText("grayscale", {kFixed}, {{"num_output_channels", Int(3)}}),
            "uint8[224,224,3] HWC");
  const TensorType four = Image(DType::kUInt8, Layout::kHWC, 2, 2, 4);
  EXPECT_EQ(InferText("grayscale", {four}),
            "error: `grayscale` expects a 1- or 3-channel image, got uint8[2,2,4] HWC");
}

TEST(InferTest, Normalize) {
  ParamList p = {{"mean", Floats({0.485, 0.456, 0.406})},
                 {"std", Floats({0.229, 0.224, 0.225})},
                 {"scale", ParamValue{255.0}}};
  EXPECT_EQ(InferText("normalize", {kFixed}, p), "float32[224,224,3] HWC");
  const TensorType half = Image(DType::kFloat16, Layout::kCHW, 8, 8, 3);
  EXPECT_EQ(InferText("normalize", {half}, p), "float16[3,8,8] CHW");
  const TensorType gray = Image(DType::kUInt8, Layout::kHWC, 8, 8, 1);
  auto r = Infer("normalize", {gray}, p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "`normalize` has 3 mean values but the image has 1 channel (uint8[8,8,1] HWC)");
  EXPECT_EQ(InferText("normalize", {gray}, {{"mean", Floats({0.5})}, {"std", Floats({0.5})}}),
            "float32[8,8,1] HWC");
}

TEST(InferTest, LayoutAndCast) {
  EXPECT_EQ(InferText("layout", {kFixed}, {{"to", Str("CHW")}}), "uint8[3,224,224] CHW");
  EXPECT_EQ(InferText("layout", {kDecoded}, {{"to", Str("CHW")}}), "uint8[3,?,?] CHW");
  const TensorType chw = Image(DType::kUInt8, Layout::kCHW, 5, 6, 3);
  EXPECT_EQ(InferText("layout", {chw}, {{"to", Str("HWC")}}), "uint8[5,6,3] HWC");
  EXPECT_EQ(InferText("cast", {kFixed}, {{"dtype", Str("bfloat16")}}), "bfloat16[224,224,3] HWC");
  EXPECT_EQ(InferText("cast", {Scalar(DType::kInt64)}, {{"dtype", Str("float32")}}),
            "error: `cast` expects a decoded image (rank 3, HWC or CHW), got int64[]");
}

TEST(InferTest, Batch) {
  ParamList p = {{"size", Int(256)},
                 {"fields", ParamValue{std::map<std::string, std::string>{{"image", "image"},
                                                                          {"label", "cls"}}}}};
  const TensorType chw = Image(DType::kFloat16, Layout::kCHW, 224, 224, 3);
  EXPECT_EQ(InferText("batch", {chw, Scalar(DType::kInt64)}, p),
            "float16[256,3,224,224] CHW; int64[256]");
  auto r = Infer("batch", {kDecoded, Scalar(DType::kInt64)}, p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "batch field `image` (tensor `image`) has dynamic extents (uint8[?,?,3] HWC); every "
            "sample in a batch must have the same shape");
  EXPECT_EQ(r.error().hint,
            "add a resize with an exact size, a crop, center_crop or random_resized_crop before "
            "batching");
  r = Infer("batch", {kJpg, Scalar(DType::kInt64)}, p);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("encoded bytes (bytes[?])"), std::string::npos);
  EXPECT_NE(r.error().hint.find("decode"), std::string::npos);
  EXPECT_FALSE(Infer("batch", {chw}, p));  // one input for two fields
}

TEST(CheckTest, CrossParameterIssues) {
  const OpDef* rrc = FindOp("random_resized_crop");
  auto issues = rrc->check({{"size", Ints({224})}, {"scale", Floats({0.9, 0.1})}});
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].param, "scale");
  EXPECT_EQ(issues[0].message, "`scale` bounds are reversed: [0.9,0.1]");
  EXPECT_EQ(issues[0].hint, "write the smaller bound first: [0.1,0.9]");
  EXPECT_EQ(rrc->check({{"size", Ints({224})}, {"scale", Floats({0, 0})}}).size(), 1u);
  issues = rrc->check({{"size", Ints({224})}, {"ratio", Floats({0, 1})}});
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].param, "ratio");
  EXPECT_TRUE(rrc->check({{"size", Ints({224})}}).empty());

  const OpDef* resize = FindOp("resize");
  EXPECT_EQ(resize->check({{"size", Ints({256, 256})}, {"max_size", Int(300)}}).size(), 1u);
  EXPECT_EQ(resize->check({{"size", Ints({256})}, {"max_size", Int(256)}}).size(), 1u);
  EXPECT_TRUE(resize->check({{"size", Ints({256})}, {"max_size", Int(512)}}).empty());

  const OpDef* normalize = FindOp("normalize");
  issues = normalize->check({{"mean", Floats({0.5})}, {"std", Floats({0.2, 0, 0.2})}});
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].param, "std");
  EXPECT_EQ(FindOp("grayscale")->check({{"num_output_channels", Int(2)}}).size(), 1u);
  ParamList empty_fields = {{"size", Int(2)},
                            {"fields", ParamValue{std::map<std::string, std::string>{}}}};
  EXPECT_EQ(FindOp("batch")->check(empty_fields).size(), 1u);
}

}  // namespace
}  // namespace sluice
