// IR construction, verification and printing, on small hand-made ops so that
// the invariants are tested independently of the real registry's contents.
#include "compiler/ir/ir.h"

#include <gtest/gtest.h>

#include "compiler/spec/spec.h"

namespace sluice {
namespace {

struct TestOps {
  OpDef source, step, batch;
  TestOps() {
    source.name = "src";
    source.op_class = OpClass::kSource;
    source.num_inputs = 0;
    source.output_names = {"jpg", "cls"};
    source.params = {ParamDef{.name = "path", .type = ParamType::kString, .required = true}};

    step.name = "twiddle";
    step.op_class = OpClass::kPointwise;
    step.params = {
        ParamDef{.name = "amount", .type = ParamType::kFloat, .default_value = ParamValue{0.5}},
        ParamDef{.name = "size",
                 .type = ParamType::kIntList,
                 .default_value = ParamValue{std::vector<int64_t>{2, 3}}}};

    batch.name = "batch";
    batch.op_class = OpClass::kBatch;
    batch.num_inputs = -1;
    batch.params = {ParamDef{.name = "size", .type = ParamType::kInt, .required = true}};
  }
};

SpecStep Step(const OpDef& op, std::vector<std::string> in, std::vector<std::string> out,
              ParamList params, int line) {
  SpecStep s;
  s.op = &op;
  s.inputs = std::move(in);
  s.outputs = std::move(out);
  s.params = std::move(params);
  s.mark = SourceMark{"t.yaml", line, 5};
  return s;
}

ParamList Twiddle(double amount) {
  return {{"amount", ParamValue{amount}}, {"size", ParamValue{std::vector<int64_t>{2, 3}}}};
}

// src -> jpg, cls; twiddle(jpg) -> x; twiddle(x) -> x.1; batch(x.1, cls).
Spec MakeSpec(const TestOps& ops) {
  Spec spec;
  spec.file = "t.yaml";
  spec.name = "tiny";
  spec.source = Step(ops.source, {}, {"jpg", "cls"}, {{"path", ParamValue{std::string("/d")}}}, 3);
  spec.graph.push_back(Step(ops.step, {"jpg"}, {"x"}, Twiddle(0.25), 7));
  spec.graph.push_back(Step(ops.step, {"x"}, {"x.1"}, Twiddle(1), 8));
  spec.batch =
      Step(ops.batch, {"x.1", "cls"}, {"image", "label"}, {{"size", ParamValue{int64_t{4}}}}, 10);
  return spec;
}

TEST(IrTest, BuildGraphMakesSourceStepsAndBatch) {
  TestOps ops;
  Graph g = BuildGraph(MakeSpec(ops));
  ASSERT_EQ(g.nodes.size(), 4u);
  EXPECT_EQ(g.nodes[0].op, &ops.source);
  EXPECT_EQ(g.nodes[3].op, &ops.batch);
  for (size_t i = 0; i < g.nodes.size(); ++i) EXPECT_EQ(g.nodes[i].op_id, static_cast<int>(i));
  // The second twiddle reads the first's output.
  ASSERT_EQ(g.nodes[2].inputs.size(), 1u);
  EXPECT_EQ(g.value(g.nodes[2].inputs[0]).name, "x");
  EXPECT_EQ(g.value(g.nodes[2].inputs[0]).producer, 1);
  // Batch outputs are prefixed so they cannot collide with per-sample names.
  ASSERT_EQ(g.nodes[3].outputs.size(), 2u);
  EXPECT_EQ(g.value(g.nodes[3].outputs[0]).name, "batch.image");
  EXPECT_EQ(g.value(g.nodes[3].outputs[1]).name, "batch.label");
  EXPECT_EQ(g.value(g.nodes[3].inputs[1]).name, "cls");
  EXPECT_EQ(g.nodes[1].mark.line, 7);
  EXPECT_EQ(g.FindValue("x.1"), g.nodes[2].outputs[0]);
  EXPECT_EQ(g.FindValue("nope"), -1);
  std::vector<NodeId> consumers = g.Consumers(g.FindValue("cls"));
  EXPECT_EQ(consumers, std::vector<NodeId>{3});
  EXPECT_TRUE(VerifyGraph(g).has_value()) << VerifyGraph(g).error().message;
}

TEST(IrTest, VerifierCatchesOutOfRangeId) {
  TestOps ops;
  Graph g = BuildGraph(MakeSpec(ops));
  g.nodes[2].inputs[0] = 99;
  Status s = VerifyGraph(g);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, ErrorCode::kInternal);
  EXPECT_NE(s.error().message.find("value id 99"), std::string::npos) << s.error().message;
}

TEST(IrTest, VerifierCatchesNonTopologicalOrder) {
  TestOps ops;
  Graph g = BuildGraph(MakeSpec(ops));
  // Swap the two twiddles (and fix the producers), so node 1 reads x before node 2 makes it.
  std::swap(g.nodes[1], g.nodes[2]);
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes.size()); ++n) {
    for (ValueId v : g.nodes[n].outputs) g.value(v).producer = n;
  }
  Status s = VerifyGraph(g);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("topological"), std::string::npos) << s.error().message;
}

TEST(IrTest, VerifierCatchesDuplicateValueNames) {
  TestOps ops;
  Graph g = BuildGraph(MakeSpec(ops));
  g.value(g.nodes[2].outputs[0]).name = "x";
  Status s = VerifyGraph(g);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("%x is used twice"), std::string::npos) << s.error().message;
}

TEST(IrTest, VerifierCatchesTwoProducersAndStaleProducer) {
  TestOps ops;
  Graph g = BuildGraph(MakeSpec(ops));
  g.nodes[2].outputs[0] = g.nodes[1].outputs[0];  // both twiddles write x
  Status s = VerifyGraph(g);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("produced by both"), std::string::npos) << s.error().message;

  Graph h = BuildGraph(MakeSpec(ops));
  h.value(h.nodes[1].outputs[0]).producer = 2;
  s = VerifyGraph(h);
  ASSERT_FALSE(s.has_value());
}

TEST(IrTest, VerifierCatchesArityParamsAndShape) {
  TestOps ops;
  Graph g = BuildGraph(MakeSpec(ops));
  g.nodes[1].inputs.push_back(g.nodes[0].outputs[1]);
  Status s = VerifyGraph(g);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("has 2 inputs; the op takes 1"), std::string::npos)
      << s.error().message;

  g = BuildGraph(MakeSpec(ops));
  g.nodes[1].params.erase("amount");
  s = VerifyGraph(g);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("lacks parameter `amount`"), std::string::npos);

  g = BuildGraph(MakeSpec(ops));
  g.nodes[1].params["bogus"] = ParamValue{true};
  s = VerifyGraph(g);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("undeclared parameter `bogus`"), std::string::npos);

  g = BuildGraph(MakeSpec(ops));
  g.nodes[1].op_id = 2;
  s = VerifyGraph(g);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("repeats op_id 2"), std::string::npos);

  g = BuildGraph(MakeSpec(ops));
  g.nodes.pop_back();  // no batch at the end (the batch outputs lose their producer too)
  s = VerifyGraph(g);
  ASSERT_FALSE(s.has_value());
}

TEST(IrTest, VerifierRequiresTypesOnceTyped) {
  TestOps ops;
  Graph g = BuildGraph(MakeSpec(ops));
  g.typed = true;
  Status s = VerifyGraph(g);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("has no type"), std::string::npos);
  for (Value& v : g.values) v.type = Scalar(DType::kInt64);
  EXPECT_TRUE(VerifyGraph(g).has_value());
}

TEST(IrTest, PrinterIsStableAndShowsAnnotationsOnlyWhenSet) {
  TestOps ops;
  Graph g = BuildGraph(MakeSpec(ops));
  EXPECT_EQ(PrintGraph(g),
            "sluice.ir \"tiny\"  (spec: t.yaml)\n"
            "%jpg: ?type, %cls: ?type = src(path=\"/d\")\n"
            "%x: ?type = twiddle(%jpg, amount=0.25, size=[2,3])\n"
            "%x.1: ?type = twiddle(%x, amount=1, size=[2,3])\n"
            "%batch.image: ?type, %batch.label: ?type = batch(%x.1, %cls, size=4)\n");
  g.value(g.nodes[1].outputs[0]).type = Image(DType::kUInt8, Layout::kHWC, kDynamic, 7, 3);
  g.nodes[2].fusion_group = 1;
  g.nodes[2].device = Device::kGpu;
  g.nodes[2].op_id = 9;
  std::string text = PrintGraph(g);
  EXPECT_NE(text.find("%x: uint8[?,7,3] HWC = twiddle(%jpg, amount=0.25, size=[2,3])\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("twiddle(%x, amount=1, size=[2,3])  [op_id=9, fusion=1, device=gpu]\n"),
            std::string::npos)
      << text;
}

TEST(IrTest, FormatParamShowsAutoForAutoInt) {
  ParamDef def{.name = "threads", .type = ParamType::kAutoInt};
  EXPECT_EQ(FormatParam(&def, ParamValue{int64_t{-1}}), "auto");
  EXPECT_EQ(FormatParam(&def, ParamValue{int64_t{8}}), "8");
  EXPECT_EQ(FormatParam(nullptr, ParamValue{int64_t{-1}}), "-1");
}

}  // namespace
}  // namespace sluice
