// geometry_composition and pointwise_fusion on real specs: which nodes form a
// fusion group, which chains stay unfused, and the notes that say why.
#include <gtest/gtest.h>

#include <string>

#include "compiler/ir/ir.h"
#include "compiler/passes/fused_chains.h"
#include "compiler/passes/pass.h"
#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"

namespace sluice {
namespace {

// Compiles a spec whose graph is `steps` (YAML list items) up to `stop_after`.
Graph Compile(const std::string& steps, const std::string& stop_after = {}) {
  std::string text =
      "sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\ngraph:\n"
      "  - decode_jpeg: {in: jpg, out: image}\n" +
      steps + "batch:\n  size: 4\n  fields: {image: image, label: cls}\n";
  Diagnostics diags;
  Spec spec = ParseSpecText(text, "t.yaml", diags);
  EXPECT_FALSE(diags.has_errors()) << diags.Render();
  Graph graph = BuildGraph(spec);
  Status status = RunPasses(graph, diags, stop_after);
  EXPECT_TRUE(status) << status.error().ToString();
  EXPECT_FALSE(diags.has_errors()) << diags.Render();
  return graph;
}

// Fusion group of each node, in node order (source, decode, steps..., batch).
std::vector<int> Groups(const Graph& graph) {
  std::vector<int> out;
  for (const Node& node : graph.nodes) out.push_back(node.fusion_group);
  return out;
}

std::string AllNotes(const Graph& graph) {
  std::string out;
  for (const std::string& n : graph.notes) out += n + "\n";
  return out;
}

const char* kTrain =
    "  - random_resized_crop: {size: [224, 224]}\n"
    "  - random_flip: {horizontal: 0.5}\n"
    "  - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}\n"
    "  - layout: {to: CHW}\n"
    "  - cast: {dtype: float16}\n";

TEST(FusionPasses, PipelineOrder) {
  ASSERT_NE(FindPass("geometry_composition"), nullptr);
  ASSERT_NE(FindPass("pointwise_fusion"), nullptr);
  EXPECT_EQ(PassNames(),
            "type_inference, geometry_composition, pointwise_fusion, decode_pushdown, placement, "
            "memory_planning");
}

TEST(FusionPasses, ImagenetTrainGeometryThenPointwise) {
  Graph geometry = Compile(kTrain, "geometry_composition");
  EXPECT_EQ(Groups(geometry), (std::vector<int>{-1, -1, 0, 0, -1, -1, -1, -1}));
  Graph fused = Compile(kTrain);
  EXPECT_EQ(Groups(fused), (std::vector<int>{-1, -1, 0, 0, 0, 0, 0, -1}));
  EXPECT_TRUE(fused.notes.empty()) << AllNotes(fused);

  std::vector<FusedChain> chains = BuildFusedChains(fused);
  ASSERT_EQ(chains.size(), 1u);
  EXPECT_EQ(chains[0].symbol, "sluice_chain_0");
  EXPECT_EQ(chains[0].input.ToString(), "uint8[?,?,3] HWC");
  EXPECT_EQ(chains[0].output.ToString(), "float16[3,224,224] CHW");
  ASSERT_EQ(chains[0].steps.size(), 5u);
  EXPECT_EQ(chains[0].steps[0].op->name, "random_resized_crop");
  EXPECT_EQ(chains[0].steps[0].op_id, 2);
  EXPECT_EQ(chains[0].steps[4].op->name, "cast");
  EXPECT_EQ(chains[0].steps[4].params.at("dtype").AsString(), "float16");
}

TEST(FusionPasses, ImagenetEvalShorterSideResizeThenCenterCrop) {
  Graph graph = Compile(
      "  - resize: {size: 256}\n"
      "  - center_crop: {size: [224, 224]}\n"
      "  - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}\n"
      "  - layout: {to: CHW}\n"
      "  - cast: {dtype: float32}\n");
  EXPECT_EQ(Groups(graph), (std::vector<int>{-1, -1, 0, 0, 0, 0, 0, -1}));
  std::vector<FusedChain> chains = BuildFusedChains(graph);
  ASSERT_EQ(chains.size(), 1u);
  EXPECT_EQ(chains[0].output.ToString(), "float32[3,224,224] CHW");
}

TEST(FusionPasses, CropsPadsAndFlipsComposeWithOneRescale) {
  Graph graph = Compile(
      "  - crop: {top: 4, left: 4, height: 100, width: 120}\n"
      "  - random_flip: {horizontal: 0.5, vertical: 0.5}\n"
      "  - resize: {size: [64, 64]}\n"
      "  - pad: {padding: [2]}\n"
      "  - center_crop: {size: [60, 60]}\n");
  EXPECT_EQ(Groups(graph), (std::vector<int>{-1, -1, 0, 0, 0, 0, 0, -1}));
}

TEST(FusionPasses, TwoRescalesAreNotNormalForm) {
  Graph graph = Compile(
      "  - resize: {size: [256, 256]}\n"
      "  - random_resized_crop: {size: [224, 224]}\n"
      "  - normalize: {mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5]}\n");
  EXPECT_EQ(Groups(graph), (std::vector<int>{-1, -1, -1, -1, -1, -1}));
  ASSERT_EQ(graph.notes.size(), 1u);
  EXPECT_NE(graph.notes[0].find("rescales more than once"), std::string::npos) << graph.notes[0];
  EXPECT_NE(graph.notes[0].find("`resize` (line 6)"), std::string::npos) << graph.notes[0];
  EXPECT_NE(graph.notes[0].find("`random_resized_crop` (line 7)"), std::string::npos);
  EXPECT_TRUE(BuildFusedChains(graph).empty());
  EXPECT_NE(PrintGraph(graph).find("note: not fused: the resample chain"), std::string::npos);
}

TEST(FusionPasses, PointwiseBeforeResampleIsNotFused) {
  Graph graph = Compile(
      "  - grayscale: {}\n"
      "  - resize: {size: [32, 32]}\n");
  EXPECT_EQ(Groups(graph), (std::vector<int>{-1, -1, -1, -1, -1}));
  ASSERT_EQ(graph.notes.size(), 1u);
  EXPECT_NE(graph.notes[0].find("`grayscale` (line 6) follows `decode_jpeg`"), std::string::npos)
      << graph.notes[0];
}

TEST(FusionPasses, ResampleAfterPointwiseStaysOutsideTheGroup) {
  Graph graph = Compile(
      "  - resize: {size: [64, 64]}\n"
      "  - random_flip: {horizontal: 0.5}\n"
      "  - grayscale: {}\n"
      "  - center_crop: {size: [32, 32]}\n");
  EXPECT_EQ(Groups(graph), (std::vector<int>{-1, -1, 0, 0, 0, -1, -1}));
  ASSERT_EQ(graph.notes.size(), 1u);
  EXPECT_NE(graph.notes[0].find("`center_crop` (line 9) follows the pointwise ops"),
            std::string::npos)
      << graph.notes[0];
}

TEST(FusionPasses, CodegenRejectionDissolvesTheGroup) {
  // pad with mode reflect is not in what the code generator fuses.
  Graph graph = Compile(
      "  - resize: {size: [64, 64]}\n"
      "  - pad: {padding: [2], mode: reflect}\n");
  EXPECT_EQ(Groups(graph), (std::vector<int>{-1, -1, -1, -1, -1}));
  ASSERT_EQ(graph.notes.size(), 1u);
  EXPECT_NE(graph.notes[0].find("reflect"), std::string::npos) << graph.notes[0];
}

TEST(FusionPasses, EveryDecodeGetsItsOwnGroupNumberedDensely) {
  std::string text =
      "sluice: 1\nname: two\nsource: {format: image_folder, path: /d}\ngraph:\n"
      "  - decode_jpeg: {in: jpg, out: a}\n"
      "  - resize: {in: a, out: a2, size: [8, 8]}\n"
      "  - decode_jpeg: {in: jpg, out: b}\n"
      "  - resize: {in: b, out: b2, size: [16, 16]}\n"
      "  - cast: {in: b2, out: b3, dtype: float32}\n"
      "batch:\n  size: 2\n  fields: {a: a2, b: b3, label: cls}\n";
  Diagnostics diags;
  Spec spec = ParseSpecText(text, "two.yaml", diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  Graph graph = BuildGraph(spec);
  ASSERT_TRUE(RunPasses(graph, diags));
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  EXPECT_EQ(Groups(graph), (std::vector<int>{-1, -1, 0, -1, 1, 1, -1}));
  std::vector<FusedChain> chains = BuildFusedChains(graph);
  ASSERT_EQ(chains.size(), 2u);
  EXPECT_EQ(chains[1].symbol, "sluice_chain_1");
  EXPECT_EQ(chains[1].output.ToString(), "float32[16,16,3] HWC");
}

}  // namespace
}  // namespace sluice
