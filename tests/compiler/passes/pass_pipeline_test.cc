// The pass driver and type inference's error handling, on hand-made ops.
#include <gtest/gtest.h>

#include "compiler/ir/ir.h"
#include "compiler/passes/pass.h"
#include "compiler/spec/spec.h"

namespace sluice {
namespace {

// A chain src -> first -> second -> batch whose `first` can be made to fail.
struct Chain {
  OpDef source, first, second, batch;
  int second_calls = 0;
  bool first_fails = false;
  Graph graph;

  Chain() {
    source.name = "src";
    source.op_class = OpClass::kSource;
    source.num_inputs = 0;
    source.output_names = {"jpg", "cls"};
    source.infer = [](std::span<const TensorType>,
                      const ParamList&) -> Result<std::vector<TensorType>> {
      return std::vector<TensorType>{EncodedBytes(), Scalar(DType::kInt64)};
    };
    first.name = "first";
    first.infer = [this](std::span<const TensorType> in,
                         const ParamList&) -> Result<std::vector<TensorType>> {
      if (first_fails) {
        return MakeError(ErrorCode::kInvalidSpec, "`first` cannot take " + in[0].ToString(),
                         "decode it first");
      }
      return std::vector<TensorType>{Image(DType::kUInt8, Layout::kHWC, kDynamic, kDynamic, 3)};
    };
    second.name = "second";
    second.infer = [this](std::span<const TensorType> in,
                          const ParamList&) -> Result<std::vector<TensorType>> {
      ++second_calls;
      TensorType t = in[0];
      t.dims = {8, 8, 3};
      return std::vector<TensorType>{t};
    };
    batch.name = "batch";
    batch.op_class = OpClass::kBatch;
    batch.num_inputs = -1;
    batch.infer = [](std::span<const TensorType> in,
                     const ParamList&) -> Result<std::vector<TensorType>> {
      std::vector<TensorType> out;
      for (TensorType t : in) {
        t.dims.insert(t.dims.begin(), 4);
        out.push_back(t);
      }
      return out;
    };

    Spec spec;
    spec.name = "chain";
    spec.file = "c.yaml";
    auto step = [](const OpDef& op, std::vector<std::string> in, std::vector<std::string> out,
                   int line) {
      SpecStep s;
      s.op = &op;
      s.inputs = std::move(in);
      s.outputs = std::move(out);
      s.mark = SourceMark{"c.yaml", line, 5};
      return s;
    };
    spec.source = step(source, {}, {"jpg", "cls"}, 2);
    spec.graph = {step(first, {"jpg"}, {"image"}, 4), step(second, {"image"}, {"image.1"}, 5)};
    spec.batch = step(batch, {"image.1", "cls"}, {"image", "label"}, 7);
    graph = BuildGraph(spec);
  }
};

TEST(PassPipelineTest, TypeInferenceIsFirstAndNamesAreUnique) {
  const std::vector<Pass>& passes = PassPipeline();
  ASSERT_FALSE(passes.empty());
  EXPECT_EQ(passes.front().name, "type_inference");
  for (size_t i = 0; i < passes.size(); ++i) {
    EXPECT_EQ(FindPass(passes[i].name), &passes[i]);
    EXPECT_FALSE(passes[i].doc.empty());
  }
  EXPECT_EQ(FindPass("no_such_pass"), nullptr);
}

TEST(PassPipelineTest, UnknownStopAfterNamesTheValidPasses) {
  Chain c;
  Diagnostics diags;
  Status s = RunPasses(c.graph, diags, "type_inferenc");
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(s.error().message.find("unknown pass `type_inferenc`"), std::string::npos);
  EXPECT_NE(s.error().hint.find("type_inference"), std::string::npos);
  // Nothing ran.
  EXPECT_FALSE(c.graph.value(0).type.has_value());
}

TEST(PassPipelineTest, StopAfterRunsThatPassAndVerifies) {
  Chain c;
  Diagnostics diags;
  ASSERT_TRUE(RunPasses(c.graph, diags, "type_inference").has_value());
  EXPECT_FALSE(diags.has_errors());
  EXPECT_TRUE(c.graph.typed);
  const Value& out = c.graph.value(c.graph.nodes.back().outputs[0]);
  ASSERT_TRUE(out.type.has_value());
  EXPECT_EQ(out.type->ToString(), "uint8[4,8,8,3] HWC");
}

TEST(PassPipelineTest, VerifierFailureAfterAPassIsAnInternalError) {
  Chain c;
  c.graph.nodes[2].inputs[0] = 42;
  Diagnostics diags;
  Status s = RunPasses(c.graph, diags);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, ErrorCode::kInternal);
  EXPECT_NE(s.error().message.find("value id 42"), std::string::npos) << s.error().message;
}

TEST(TypeInferenceTest, ErrorAtNodeMarkWithoutCascade) {
  Chain c;
  c.first_fails = true;
  Diagnostics diags;
  ASSERT_TRUE(RunPasses(c.graph, diags).has_value());
  ASSERT_EQ(diags.errors().size(), 1u) << diags.Render();
  const Error& e = diags.errors()[0];
  EXPECT_EQ(e.mark.line, 4);  // the failing step's mark
  EXPECT_EQ(e.mark.file, "c.yaml");
  EXPECT_EQ(e.message, "`first` cannot take bytes[?]");
  EXPECT_EQ(e.hint, "decode it first");
  EXPECT_EQ(c.second_calls, 0);  // skipped: its input is untyped
  EXPECT_FALSE(c.graph.typed);
  EXPECT_FALSE(c.graph.value(c.graph.FindValue("image")).type.has_value());
  EXPECT_FALSE(c.graph.value(c.graph.FindValue("batch.image")).type.has_value());
  // A node is typed all or nothing: the batch has one untyped input, so none
  // of its outputs gets a type; values not downstream of the error keep theirs.
  EXPECT_FALSE(c.graph.value(c.graph.FindValue("batch.label")).type.has_value());
  ASSERT_TRUE(c.graph.value(c.graph.FindValue("cls")).type.has_value());
  EXPECT_EQ(c.graph.value(c.graph.FindValue("cls")).type->ToString(), "int64[]");
  EXPECT_NE(PrintGraph(c.graph).find("%image: ?type = first(%jpg)"), std::string::npos);
}

TEST(TypeInferenceTest, WrongOutputCountIsReported) {
  Chain c;
  c.second.infer = [](std::span<const TensorType>,
                      const ParamList&) -> Result<std::vector<TensorType>> {
    return std::vector<TensorType>{};
  };
  Diagnostics diags;
  InferTypes(c.graph, diags);
  ASSERT_EQ(diags.errors().size(), 1u);
  EXPECT_EQ(diags.errors()[0].code, ErrorCode::kInternal);
  EXPECT_EQ(diags.errors()[0].mark.line, 5);
}

}  // namespace
}  // namespace sluice
