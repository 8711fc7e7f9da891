#include "ops/registry.h"

#include <gtest/gtest.h>

#include <set>

namespace sluice {
namespace {

std::vector<std::string> OpNames() {
  std::vector<std::string> names;
  for (const OpDef* op : AllOps()) names.push_back(op->name);
  return names;
}

// Checks a ParamDef's declaration; recurses into sections.
void CheckParamDef(const std::string& where, const ParamDef& def) {
  SCOPED_TRACE(where + "." + def.name);
  EXPECT_FALSE(def.name.empty());
  EXPECT_FALSE(def.doc.empty());
  EXPECT_EQ(def.doc.find('\n'), std::string::npos) << "doc must be one line";
  if (def.required) {
    EXPECT_FALSE(def.default_value.has_value()) << "required with a default";
  }
  if (def.type == ParamType::kEnum) {
    EXPECT_FALSE(def.choices.empty());
    if (def.default_value) {
      EXPECT_NE(std::find(def.choices.begin(), def.choices.end(), def.default_value->AsString()),
                def.choices.end());
    }
  }
  if (def.type == ParamType::kIntList || def.type == ParamType::kFloatList) {
    EXPECT_FALSE(def.list_lengths.empty());
  }
  if (def.default_value) {
    std::vector<double> values;
    const ParamValue& v = *def.default_value;
    switch (def.type) {
      case ParamType::kInt:
        values.push_back(static_cast<double>(v.AsInt()));
        break;
      case ParamType::kAutoInt:
        if (v.AsInt() != -1) values.push_back(static_cast<double>(v.AsInt()));
        break;
      case ParamType::kFloat:
        values.push_back(v.AsFloat());
        break;
      case ParamType::kIntList:
        for (int64_t i : v.AsIntList()) values.push_back(static_cast<double>(i));
        EXPECT_NE(std::find(def.list_lengths.begin(), def.list_lengths.end(),
                            static_cast<int>(v.AsIntList().size())),
                  def.list_lengths.end());
        break;
      case ParamType::kFloatList:
        values = v.AsFloatList();
        EXPECT_NE(std::find(def.list_lengths.begin(), def.list_lengths.end(),
                            static_cast<int>(values.size())),
                  def.list_lengths.end());
        break;
      case ParamType::kBool:
        EXPECT_TRUE(std::holds_alternative<bool>(v.value));
        break;
      case ParamType::kString:
      case ParamType::kEnum:
        EXPECT_TRUE(std::holds_alternative<std::string>(v.value));
        break;
      case ParamType::kStringMap:
        (void)v.AsStringMap();
        break;
      case ParamType::kSection:
        (void)v.AsSection();
        break;
    }
    for (double x : values) {
      if (def.min) {
        EXPECT_GE(x, *def.min);
      }
      if (def.max) {
        EXPECT_LE(x, *def.max);
      }
    }
  }
  for (const ParamDef& f : def.fields) CheckParamDef(where + "." + def.name, f);
}

TEST(RegistryTest, OpsSortedUniqueDocumented) {
  const auto names = OpNames();
  ASSERT_EQ(names.size(), 18u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const OpDef* op : AllOps()) {
    SCOPED_TRACE(op->name);
    EXPECT_FALSE(op->doc.empty());
    EXPECT_TRUE(op->infer) << "every op has a type rule";
    EXPECT_TRUE(op->check);
    std::set<std::string> param_names;
    for (const ParamDef& p : op->params) {
      EXPECT_TRUE(param_names.insert(p.name).second) << "duplicate param " << p.name;
      CheckParamDef(op->name, p);
    }
    if (op->op_class == OpClass::kSource) {
      EXPECT_EQ(op->num_inputs, 0);
      EXPECT_EQ(op->output_names, (std::vector<std::string>{"jpg", "cls"}));
    } else if (op->op_class == OpClass::kBatch) {
      EXPECT_EQ(op->num_inputs, -1);
    } else {
      EXPECT_EQ(op->num_inputs, 1);
      EXPECT_EQ(op->output_names.size(), 1u);
      EXPECT_TRUE(op->reference) << "graph op without a reference implementation";
    }
  }
}

TEST(RegistryTest, SectionParamsDocumented) {
  for (const ParamDef& p : SamplingParams()) CheckParamDef("sampling", p);
  for (const ParamDef& p : OutputParams()) CheckParamDef("output", p);
}

TEST(RegistryTest, ExpectedOpsPresent) {
  for (const char* name : {"image_folder", "file_list", "batch", "decode_jpeg", "resize",
                           "center_crop", "crop", "random_resized_crop", "random_flip", "pad",
                           "color_jitter", "grayscale", "normalize", "layout", "cast"}) {
    const OpDef* op = FindOp(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(op->name, name);
  }
  EXPECT_EQ(FindOp("nope"), nullptr);
  EXPECT_EQ(FindOp("random_resized_crop")->op_class, OpClass::kResample);
  EXPECT_TRUE(FindOp("random_resized_crop")->random);
  EXPECT_FALSE(FindOp("resize")->random);
}

TEST(RegistryTest, OpsOfClass) {
  std::vector<std::string> sources;
  for (const OpDef* op : OpsOfClass(OpClass::kSource)) sources.push_back(op->name);
  EXPECT_EQ(sources, (std::vector<std::string>{"file_list", "image_folder", "tar_shards"}));
  ASSERT_EQ(OpsOfClass(OpClass::kBatch).size(), 1u);
  EXPECT_EQ(OpsOfClass(OpClass::kBatch)[0]->name, "batch");
  EXPECT_EQ(OpClassName(OpClass::kResample), "resample");
  EXPECT_EQ(OpClassName(OpClass::kPointwise), "pointwise");
}

TEST(RegistryTest, DidYouMean) {
  const auto names = OpNames();
  EXPECT_EQ(DidYouMean("random_resize_crop", names), "random_resized_crop");
  EXPECT_EQ(DidYouMean("decode_jepg", names), "decode_jpeg");  // transposition
  EXPECT_EQ(DidYouMean("Resize", names), "resize");
  EXPECT_EQ(DidYouMean("normalise", names), "normalize");
  EXPECT_EQ(DidYouMean("totally_unrelated", names), "");
  EXPECT_EQ(DidYouMean("x", names), "");
  EXPECT_EQ(DidYouMean("shufle", {"shuffle", "shard_shuffle", "sequential"}), "shuffle");
}

TEST(RegistryTest, DeviceString) {
  for (const char* ok : {"auto", "cpu", "cuda", "cuda:0", "cuda:12"}) {
    EXPECT_TRUE(CheckDeviceString(ok)) << ok;
  }
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "cuda:0 "}) {
    auto st = CheckDeviceString(bad);
    ASSERT_FALSE(st) << bad;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidSpec);
    EXPECT_NE(st.error().message.find(bad), std::string::npos);
  }
}

TEST(RegistryTest, SectionChecks) {
  ParamList sampling;
  sampling["rank"] = ParamValue{int64_t{4}};
  sampling["world_size"] = ParamValue{int64_t{4}};
  auto issues = CheckSamplingParams(sampling);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].param, "rank");
  sampling["rank"] = ParamValue{int64_t{3}};
  EXPECT_TRUE(CheckSamplingParams(sampling).empty());
  sampling["sharding"] = ParamValue{std::string("none")};
  EXPECT_EQ(CheckSamplingParams(sampling).size(), 1u);

  ParamList output;
  output["device"] = ParamValue{std::string("gpu")};
  issues = CheckOutputParams(output);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].param, "device");
  EXPECT_TRUE(CheckOutputParams({}).empty());
}

TEST(RegistryTest, WithDefaultsFillsSections) {
  ParamList given;
  ParamList on_error;
  on_error["policy"] = ParamValue{std::string("fail")};
  given["on_error"] = ParamValue{on_error};
  const ParamList full = WithDefaults(OutputParams(), given);
  EXPECT_EQ(full.at("device").AsString(), "auto");
  EXPECT_EQ(full.at("threads").AsInt(), -1);
  EXPECT_EQ(full.at("on_error").AsSection().at("policy").AsString(), "fail");
  EXPECT_DOUBLE_EQ(full.at("on_error").AsSection().at("max_fraction").AsFloat(), 0.001);
  EXPECT_EQ(full.at("on_error").ToString(), "{max_fraction: 0.001, policy: \"fail\"}");
}

TEST(RegistryTest, MissingRequiredParamIsAnError) {
  const OpDef* resize = FindOp("resize");
  auto issues = resize->check({});
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].param, "size");
  const TensorType img = Image(DType::kUInt8, Layout::kHWC, 10, 10, 3);
  auto out = resize->infer(std::span(&img, 1), {});
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().message, "`resize` is missing required parameter `size`");
}

}  // namespace
}  // namespace sluice
