// Type inference over real specs: the front end, the registry's type rules and
// the pass together.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "compiler/ir/ir.h"
#include "compiler/passes/pass.h"
#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"

namespace sluice {
namespace {

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/" + relative);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Parses, builds and runs every pass; the diagnostics are left in `diags`.
Graph Compile(const std::string& text, Diagnostics& diags) {
  Spec spec = ParseSpecText(text, "test.yaml", diags);
  EXPECT_FALSE(diags.has_errors()) << diags.Render();
  Graph graph = BuildGraph(spec);
  Status s = RunPasses(graph, diags);
  EXPECT_TRUE(s.has_value()) << s.error().ToString();
  return graph;
}

std::string TypeOf(const Graph& g, const std::string& name) {
  ValueId v = g.FindValue(name);
  if (v < 0) return "<no value " + name + ">";
  return g.value(v).type ? g.value(v).type->ToString() : "?type";
}

TEST(TypeInferenceTest, ImagenetTrainChain) {
  std::string text = ReadSource("examples/imagenet_train.yaml");
  ASSERT_FALSE(text.empty());
  Diagnostics diags;
  Graph g = Compile(text, diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  EXPECT_TRUE(g.typed);
  EXPECT_TRUE(VerifyGraph(g).has_value());

  EXPECT_EQ(TypeOf(g, "jpg"), "bytes[?]");
  EXPECT_EQ(TypeOf(g, "cls"), "int64[]");
  EXPECT_EQ(TypeOf(g, "image"), "uint8[?,?,3] HWC");          // decode: extents known at run time
  EXPECT_EQ(TypeOf(g, "image.1"), "uint8[224,224,3] HWC");    // random_resized_crop: static
  EXPECT_EQ(TypeOf(g, "image.3"), "float32[224,224,3] HWC");  // normalize
  EXPECT_EQ(TypeOf(g, "image.4"), "float32[3,224,224] CHW");  // layout
  // Per sample, the last value feeding the batch:
  const Node& batch = g.nodes.back();
  ASSERT_EQ(batch.op->name, "batch");
  ASSERT_EQ(batch.inputs.size(), 2u);
  ASSERT_TRUE(g.value(batch.inputs[0]).type.has_value());
  EXPECT_EQ(g.value(batch.inputs[0]).type->ToString(), "float16[3,224,224] CHW");
  EXPECT_EQ(g.value(batch.inputs[0]).type->dtype, DType::kFloat16);
  // Batched:
  EXPECT_EQ(TypeOf(g, "batch.image"), "float16[256,3,224,224] CHW");
  EXPECT_EQ(TypeOf(g, "batch.label"), "int64[256]");
}

TEST(TypeInferenceTest, ShorterSideResizeIsDynamicUntilCenterCrop) {
  Diagnostics diags;
  Graph g = Compile(ReadSource("examples/imagenet_eval.yaml"), diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  EXPECT_EQ(TypeOf(g, "image.1"), "uint8[?,?,3] HWC");
  EXPECT_FALSE(g.value(g.FindValue("image.1")).type->is_static());
  EXPECT_EQ(TypeOf(g, "image.2"), "uint8[224,224,3] HWC");
  EXPECT_TRUE(g.value(g.FindValue("image.2")).type->is_static());
  EXPECT_EQ(TypeOf(g, "batch.image"), "float32[128,3,224,224] CHW");
}

// normalize with three means on a one-channel image is rejected once, at the
// normalize step; the cast after it is skipped, not reported again.
TEST(TypeInferenceTest, RealOpErrorDoesNotCascade) {
  const std::string text = R"(sluice: 1
name: bad
source: {format: image_folder, path: /d}
graph:
  - decode_jpeg: {in: jpg, out: image, color: gray}
  - center_crop: {size: 32}
  - normalize: {mean: [0.5, 0.5, 0.5], std: [0.2, 0.2, 0.2]}
  - cast: {dtype: float16}
batch: {size: 4, fields: {image: image, label: cls}}
)";
  Diagnostics diags;
  Spec spec = ParseSpecText(text, "bad.yaml", diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  Graph g = BuildGraph(spec);
  ASSERT_TRUE(RunPasses(g, diags).has_value());
  ASSERT_EQ(diags.errors().size(), 1u) << diags.Render();
  EXPECT_EQ(diags.errors()[0].mark.file, "bad.yaml");
  EXPECT_EQ(diags.errors()[0].mark.line, 7) << diags.Render();
  EXPECT_NE(diags.errors()[0].message.find("normalize"), std::string::npos) << diags.Render();
  EXPECT_EQ(TypeOf(g, "image.1"), "uint8[32,32,1] HWC");
  EXPECT_EQ(TypeOf(g, "image.2"), "?type");
  EXPECT_EQ(TypeOf(g, "image.3"), "?type");
  EXPECT_EQ(TypeOf(g, "batch.image"), "?type");
  EXPECT_EQ(TypeOf(g, "batch.label"), "?type");  // the batch node is skipped as a whole
  EXPECT_EQ(TypeOf(g, "cls"), "int64[]");
  EXPECT_FALSE(g.typed);
}

// --emit=ir-after=type_inference: RunPasses stops right after the named pass,
// so the graph equals one that only type inference touched, whatever passes
// come later in the pipeline.
TEST(TypeInferenceTest, StopAfterRunsNoLaterPass) {
  Diagnostics diags;
  Spec spec = ParseSpecText(ReadSource("examples/imagenet_train.yaml"), "t.yaml", diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  Graph stopped = BuildGraph(spec);
  ASSERT_TRUE(RunPasses(stopped, diags, "type_inference").has_value());
  Graph only = BuildGraph(spec);
  InferTypes(only, diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  EXPECT_EQ(PrintGraph(stopped), PrintGraph(only));
  for (const Node& node : stopped.nodes) EXPECT_EQ(node.fusion_group, -1);
}

}  // namespace
}  // namespace sluice
