// Passes decode_pushdown and memory_planning: what each decides from the
// fused graph (and, for memory, the placement), as the IR and plan.json carry it.
#include <gtest/gtest.h>

#include <string>

#include "compiler/cost/cost_model.h"
#include "compiler/passes/pass.h"
#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"
#include "tests/compiler/synthetic_profile.h"

namespace sluice {
namespace {

Graph RunAll(const std::string& graph_steps, const std::string& fields,
             const std::string& output = "", const HardwareProfile* profile = nullptr) {
  const std::string text =
      "sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\ngraph:\n" + graph_steps +
      "batch: {size: 8, fields: " + fields + "}\n" + output;
  Diagnostics diags;
  Spec spec = ParseSpecText(text, "t.yaml", diags);
  EXPECT_FALSE(diags.has_errors()) << diags.Render();
  Graph graph = BuildGraph(spec);
  PassContext context{diags, profile};
  if (profile != nullptr) context.predict = CostModelPredictor(*profile);
  Status status = RunPasses(graph, context);
  EXPECT_TRUE(status) << status.error().ToString();
  EXPECT_FALSE(diags.has_errors()) << diags.Render();
  return graph;
}

const Node& Decode(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    if (node.op->op_class == OpClass::kDecode) return node;
  }
  ADD_FAILURE() << "no decode";
  return graph.nodes[0];
}

TEST(DecodePushdownPass, OneFusedChainGetsRoiAndDctWhenItRescales) {
  Graph g = RunAll(
      "  - decode_jpeg: {in: jpg, out: image}\n"
      "  - random_resized_crop: {size: [32, 32]}\n",
      "{image: image, label: cls}");
  const Node::Pushdown& p = Decode(g).pushdown;
  EXPECT_TRUE(p.decided);
  EXPECT_TRUE(p.roi);
  EXPECT_TRUE(p.dct_scaling);
  EXPECT_NE(p.reason.find("region of interest"), std::string::npos) << p.reason;

  Graph crop = RunAll(
      "  - decode_jpeg: {in: jpg, out: image}\n"
      "  - center_crop: {size: [32, 32]}\n",
      "{image: image, label: cls}");
  EXPECT_TRUE(Decode(crop).pushdown.roi);
  EXPECT_FALSE(Decode(crop).pushdown.dct_scaling);  // no rescale: nothing to scale down
}

TEST(DecodePushdownPass, OffWithAReferenceChainOrTwoChains) {
  Graph ref = RunAll(
      "  - decode_jpeg: {in: jpg, out: image}\n"
      "  - center_crop: {size: [16, 16]}\n"
      "  - resize: {size: [8, 8]}\n"
      "  - random_resized_crop: {size: [4, 4]}\n",
      "{image: image, label: cls}");
  const Node::Pushdown& r = Decode(ref).pushdown;
  EXPECT_TRUE(r.decided);
  EXPECT_FALSE(r.roi);
  EXPECT_FALSE(r.dct_scaling);
  EXPECT_TRUE(r.reason.starts_with("off:")) << r.reason;

  Graph two = RunAll(
      "  - decode_jpeg: {in: jpg, out: a}\n"
      "  - center_crop: {in: a, size: [16, 16], out: x}\n"
      "  - decode_jpeg: {in: jpg, out: b}\n"
      "  - center_crop: {in: b, size: [8, 8], out: y}\n",
      "{x: x, y: y}");
  for (const Node& node : two.nodes) {
    if (node.op->op_class != OpClass::kDecode) continue;
    EXPECT_TRUE(node.pushdown.decided);
    EXPECT_FALSE(node.pushdown.roi) << node.pushdown.reason;
    EXPECT_NE(node.pushdown.reason.find("2 fused chains"), std::string::npos)
        << node.pushdown.reason;
  }
}

TEST(MemoryPlanningPass, FieldBlocksInNameOrderAligned) {
  Graph g = RunAll(
      "  - decode_jpeg: {in: jpg, out: image}\n"
      "  - center_crop: {size: [3, 5], out: small}\n"
      "  - decode_jpeg: {in: jpg, out: other}\n"
      "  - center_crop: {in: other, size: [2, 2], out: big}\n",
      "{small: small, big: big, label: cls}");
  const MemoryPlan& m = g.memory;
  ASSERT_TRUE(m.planned);
  EXPECT_EQ(m.batch_size, 8);
  ASSERT_EQ(m.fields.size(), 3u);
  EXPECT_EQ(m.fields[0].field, "big");  // name order
  EXPECT_EQ(m.fields[0].bytes_per_sample, 2 * 2 * 3);
  EXPECT_EQ(m.fields[0].offset, 0);
  EXPECT_EQ(m.fields[1].field, "label");
  EXPECT_EQ(m.fields[1].dtype, DType::kInt64);
  EXPECT_EQ(m.fields[1].sample_shape, std::vector<int64_t>{});
  EXPECT_EQ(m.fields[1].offset, 128);  // 8 * 12 = 96, aligned up to 128
  EXPECT_EQ(m.fields[2].field, "small");
  EXPECT_EQ(m.fields[2].bytes_per_sample, 3 * 5 * 3);
  EXPECT_EQ(m.fields[2].offset, 192);           // 128 + 64
  EXPECT_EQ(m.batch_bytes, 192 + 8 * 45 + 24);  // 552 aligned to 576
  EXPECT_EQ(m.staged_batch_bytes, m.batch_bytes);
  for (const FieldMemory& f : m.fields) EXPECT_EQ(f.staging_bytes_per_sample, 0);
}

TEST(MemoryPlanningPass, GpuTailStagesUint8) {
  HardwareProfile p;
  p.machine = "synthetic";
  p.cpu.cores = 1;
  p.gpu = testing_profile::SyntheticGpu();
  Graph g = RunAll(
      "  - decode_jpeg: {in: jpg, out: image}\n"
      "  - center_crop: {size: [16, 16]}\n"
      "  - normalize: {mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25], scale: 255}\n"
      "  - cast: {dtype: float16}\n",
      "{image: image, label: cls}", "output: {device: cuda}\n", &p);
  ASSERT_EQ(g.placement.device, "cuda:0") << g.placement.reason;
  const MemoryPlan& m = g.memory;
  ASSERT_EQ(m.fields.size(), 2u);
  EXPECT_EQ(m.fields[0].field, "image");
  EXPECT_EQ(m.fields[0].bytes_per_sample, 16 * 16 * 3 * 2);
  EXPECT_EQ(m.fields[0].staging_bytes_per_sample, 16 * 16 * 3);
  EXPECT_EQ(m.fields[1].offset, 8 * 16 * 16 * 3 * 2);
  EXPECT_EQ(m.fields[1].staged_offset, 8 * 16 * 16 * 3);
  EXPECT_EQ(m.batch_bytes, 8 * 16 * 16 * 3 * 2 + 64);
  EXPECT_EQ(m.staged_batch_bytes, 8 * 16 * 16 * 3 + 64);
}

}  // namespace
}  // namespace sluice
