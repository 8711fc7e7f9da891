// The placement pass on synthetic hardware profiles: which steps move to the
// GPU for each output.device, profile and CPU budget, and what it records.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "common/hardware_profile.h"
#include "compiler/cost/cost_model.h"
#include "compiler/ir/ir.h"
#include "compiler/passes/fused_chains.h"
#include "compiler/passes/pass.h"
#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"
#include "tests/compiler/synthetic_profile.h"

namespace sluice {
namespace {

const char* kTrain =
    "  - random_resized_crop: {size: [224, 224]}\n"
    "  - random_flip: {horizontal: 0.5}\n"
    "  - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}\n"
    "  - layout: {to: CHW}\n"
    "  - cast: {dtype: float16}\n";

const char* kTrainJitter =
    "  - random_resized_crop: {size: [224, 224]}\n"
    "  - random_flip: {horizontal: 0.5}\n"
    "  - color_jitter: {brightness: 0.4, contrast: 0.4, saturation: 0.4}\n"
    "  - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}\n"
    "  - layout: {to: CHW}\n"
    "  - cast: {dtype: float16}\n";

// uint8 output: nothing a GPU could take.
const char* kBytesOnly =
    "  - random_resized_crop: {size: [224, 224]}\n"
    "  - color_jitter: {brightness: 0.4}\n";

// A 2-core CPU (about 1 ms per ImageNet sample on one core).
HardwareProfile CpuOnly() { return testing_profile::SyntheticCpu("synthetic 2-core CPU"); }

// A fast GPU beside a CPU whose pointwise tail is costly (2 ns per element:
// 0.3 ms of an ImageNet sample's ~1.5 ms), so that moving the tail clears the
// margin a split must win by (kSplitMustWinBy).
HardwareProfile FastGpu() {
  HardwareProfile p = CpuOnly();
  p.machine = "synthetic 2-core CPU + fast GPU";
  p.cpu.pointwise_ns_per_elem = 2;
  p.gpu = testing_profile::SyntheticGpu("fast");
  return p;
}

Graph Place(const std::string& steps, std::optional<HardwareProfile> profile,
            const std::string& device = "auto", int cpu_budget_override = -1) {
  std::string text =
      "sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\ngraph:\n"
      "  - decode_jpeg: {in: jpg, out: image}\n" +
      steps +
      "batch:\n  size: 256\n  fields: {image: image, label: cls}\noutput:\n  device: " + device +
      "\n";
  Diagnostics diags;
  Spec spec = ParseSpecText(text, "t.yaml", diags);
  EXPECT_FALSE(diags.has_errors()) << diags.Render();
  Graph graph = BuildGraph(spec);
  PassContext context{diags, profile ? &*profile : nullptr, cpu_budget_override};
  if (profile) context.predict = CostModelPredictor(*profile);
  Status status = RunPasses(graph, context);
  EXPECT_TRUE(status) << status.error().ToString();
  EXPECT_FALSE(diags.has_errors()) << diags.Render();
  EXPECT_TRUE(graph.placement.ran);
  return graph;
}

// "c" / "g" per node (source, decode, steps..., batch).
std::string Devices(const Graph& graph) {
  std::string out;
  for (const Node& node : graph.nodes) out += node.device == Device::kGpu ? 'g' : 'c';
  return out;
}

const PlacementAlternative& Chosen(const Graph& graph) {
  return graph.placement.alternatives.at(graph.placement.chosen);
}

// Placement follows the fusion passes and decode_pushdown (which decides on
// the fused groups, not their devices); memory_planning, which lays out the GPU
// staging placement chose, is the only pass after it.
TEST(Placement, RunsAfterPointwiseFusion) {
  const std::vector<Pass>& passes = PassPipeline();
  ASSERT_GE(passes.size(), 4u);
  EXPECT_EQ(passes.back().name, "memory_planning");
  EXPECT_EQ(passes[passes.size() - 2].name, "placement");
  EXPECT_EQ(passes[passes.size() - 3].name, "decode_pushdown");
  EXPECT_EQ(passes[passes.size() - 4].name, "pointwise_fusion");
}

TEST(Placement, NoProfileKeepsEverythingOnTheCpu) {
  Graph graph = Place(kTrain, std::nullopt);
  EXPECT_EQ(Devices(graph), "cccccccc");
  EXPECT_EQ(graph.placement.device, "cpu");
  EXPECT_TRUE(graph.placement.alternatives.empty());
  EXPECT_NE(graph.placement.reason.find("no hardware profile"), std::string::npos)
      << graph.placement.reason;
  EXPECT_EQ(BuildFusedChains(graph)[0].gpu_from, -1);
}

TEST(Placement, NoGpuInTheProfileKeepsEverythingOnTheCpu) {
  Graph graph = Place(kTrain, CpuOnly(), "auto", 1);
  EXPECT_EQ(Devices(graph), "cccccccc");
  EXPECT_EQ(graph.placement.device, "cpu");
  EXPECT_NE(graph.placement.reason.find("has no GPU"), std::string::npos) << graph.placement.reason;
  ASSERT_EQ(graph.placement.alternatives.size(), 1u);
  EXPECT_EQ(Chosen(graph).gpu_from, std::vector<int>{-1});
  EXPECT_GT(Chosen(graph).images_per_second, 0);
  EXPECT_EQ(Chosen(graph).limit, "cpu");
  EXPECT_EQ(graph.placement.cpu_budget, 1);
  EXPECT_EQ(graph.placement.cpu_budget_from, "--cpu-budget");
}

TEST(Placement, FastGpuAndOneCoreMovesThePointwiseTailAndShipsUint8) {
  Graph graph = Place(kTrain, FastGpu(), "auto", 1);
  // source, decode, rrc, flip | normalize, layout, cast | batch
  EXPECT_EQ(Devices(graph), "ccccgggc");
  EXPECT_EQ(graph.placement.device, "cuda:0");
  ASSERT_EQ(graph.placement.alternatives.size(), 2u);  // all cpu, split at normalize
  EXPECT_EQ(graph.placement.chosen, 1);
  const PlacementAlternative& chosen = Chosen(graph);
  EXPECT_EQ(chosen.gpu_from, std::vector<int>{2});
  EXPECT_DOUBLE_EQ(chosen.h2d_bytes_per_sample, 224.0 * 224 * 3);  // uint8, not float16
  EXPECT_GT(chosen.images_per_second, graph.placement.alternatives[0].images_per_second);
  EXPECT_LT(chosen.cpu_s_per_sample, graph.placement.alternatives[0].cpu_s_per_sample);
  EXPECT_EQ(BuildFusedChains(graph)[0].gpu_from, 2);
  EXPECT_NE(PrintGraph(graph).find("placement: device=\"cuda:0\""), std::string::npos);
}

// A split predicted faster, but by less than the margin (the model leaves the
// GPU hand-off out; on an H200 a predicted +3% measured 0.90-0.97x), keeps the
// CPU and says why.
TEST(Placement, ASplitPredictedToWinByLessThanTheMarginStaysOnTheCpu) {
  HardwareProfile p = FastGpu();
  p.cpu.pointwise_ns_per_elem = 0.5;  // a cheap tail: moving it saves ~7%
  Graph graph = Place(kTrain, p, "auto", 1);
  ASSERT_EQ(graph.placement.alternatives.size(), 2u);
  const double cpu = graph.placement.alternatives[0].images_per_second;
  const double split = graph.placement.alternatives[1].images_per_second;
  EXPECT_GT(split, cpu);
  EXPECT_LT(split, cpu * 1.10);
  EXPECT_EQ(graph.placement.chosen, 0);
  EXPECT_EQ(Devices(graph), "cccccccc");
  EXPECT_NE(graph.placement.reason.find("less than the 10% a split must win by"), std::string::npos)
      << graph.placement.reason;
}

TEST(Placement, ColorJitterStaysOnTheCpu) {
  Graph graph = Place(kTrainJitter, FastGpu(), "auto", 1);
  // source, decode, rrc, flip, color_jitter | normalize, layout, cast | batch
  EXPECT_EQ(Devices(graph), "cccccgggc");
  FusedChain chain = BuildFusedChains(graph)[0];
  ASSERT_EQ(chain.gpu_from, 3);
  EXPECT_EQ(chain.steps[chain.gpu_from].op->name, "normalize");
  EXPECT_EQ(chain.steps[2].op->name, "color_jitter");
}

TEST(Placement, SlowBusKeepsEverythingOnTheCpu) {
  HardwareProfile p = FastGpu();
  p.gpu->h2d_pinned_gbps = 0.05;  // 50 MB/s: ~330 uint8 images/s
  p.gpu->h2d_pageable_gbps = 0.05;
  Graph graph = Place(kTrain, p, "auto", 1);
  EXPECT_EQ(Devices(graph), "cccccccc");
  EXPECT_EQ(graph.placement.device, "cpu");
  ASSERT_EQ(graph.placement.alternatives.size(), 2u);
  EXPECT_EQ(graph.placement.chosen, 0);
  EXPECT_EQ(graph.placement.alternatives[1].limit, "bus");
  EXPECT_LT(graph.placement.alternatives[1].images_per_second,
            graph.placement.alternatives[0].images_per_second);
}

TEST(Placement, LargeCpuBudgetStaysOnTheCpuWhenThatIsFaster) {
  HardwareProfile p = FastGpu();
  p.cpu.cores = 64;
  p.gpu->pointwise_gelem_per_s = 0.45;  // a GPU busy with training: ~3000 images/s
  Graph small = Place(kTrain, p, "auto", 1);
  EXPECT_EQ(small.placement.device, "cuda:0") << small.placement.reason;
  Graph large = Place(kTrain, p, "auto");  // budget auto = the profile's 64 cores
  EXPECT_EQ(large.placement.cpu_budget, 64);
  EXPECT_EQ(large.placement.cpu_budget_from, "profile cores");
  EXPECT_EQ(Devices(large), "cccccccc");
  EXPECT_EQ(large.placement.chosen, 0);
  EXPECT_EQ(large.placement.alternatives[1].limit, "gpu");
  EXPECT_NE(large.placement.reason.find("all on cpu"), std::string::npos) << large.placement.reason;
}

TEST(Placement, SpecCpuBudgetIsUsedWithoutOverride) {
  std::string steps = kTrain;
  Graph graph = Place(steps + "", FastGpu(), "auto\n  cpu_budget: 1");
  EXPECT_EQ(graph.placement.cpu_budget, 1);
  EXPECT_EQ(graph.placement.cpu_budget_from, "output.cpu_budget");
}

TEST(Placement, TiesGoToTheCpu) {
  HardwareProfile p = FastGpu();
  p.cpu.pointwise_ns_per_elem = 0;  // the tail is free on the CPU: nothing to gain
  p.cpu.memory_bandwidth_gbps = 0;  // and so are the batch slot's bytes (no term)
  Graph graph = Place(kTrain, p, "auto", 1);
  EXPECT_EQ(graph.placement.chosen, 0);
  EXPECT_EQ(Devices(graph), "cccccccc");
}

TEST(Placement, ForcedCpu) {
  Graph graph = Place(kTrain, FastGpu(), "cpu", 1);
  EXPECT_EQ(Devices(graph), "cccccccc");
  EXPECT_EQ(graph.placement.device, "cpu");
  EXPECT_EQ(graph.placement.reason, "output.device is cpu");
  ASSERT_EQ(graph.placement.alternatives.size(), 1u);  // the prediction for all on cpu
}

TEST(Placement, ForcedCudaMovesAllItCanEvenWhenSlower) {
  HardwareProfile p = FastGpu();
  p.gpu->h2d_pinned_gbps = 0.05;  // auto would keep the CPU (see SlowBus)
  Graph graph = Place(kTrainJitter, p, "cuda:1", 1);
  EXPECT_EQ(Devices(graph), "cccccgggc");
  EXPECT_EQ(graph.placement.device, "cuda:1");
  EXPECT_EQ(Chosen(graph).gpu_from, std::vector<int>{3});
  EXPECT_EQ(Chosen(graph).limit, "bus");
}

TEST(Placement, ForcedCudaWithoutProfileStillSplits) {
  Graph graph = Place(kTrain, std::nullopt, "cuda");
  EXPECT_EQ(Devices(graph), "ccccgggc");
  EXPECT_EQ(graph.placement.device, "cuda:0");
  ASSERT_EQ(graph.placement.alternatives.size(), 1u);
  EXPECT_FALSE(Chosen(graph).predicted);
}

TEST(Placement, ForcedCudaWithNothingMovableRunsOnTheCpuAndSaysSo) {
  Graph graph = Place(kBytesOnly, FastGpu(), "cuda:0", 1);
  EXPECT_EQ(Devices(graph), "ccccc");
  EXPECT_EQ(graph.placement.device, "cpu");
  EXPECT_NE(graph.placement.reason.find("no step can move to the GPU"), std::string::npos)
      << graph.placement.reason;
}

TEST(Placement, AutoWithNothingMovable) {
  Graph graph = Place(kBytesOnly, FastGpu(), "auto", 1);
  EXPECT_EQ(graph.placement.device, "cpu");
  EXPECT_EQ(graph.placement.alternatives.size(), 1u);
  EXPECT_NE(graph.placement.reason.find("no step can move"), std::string::npos);
}

TEST(Placement, GraphWithoutGpuNodesPrintsNoPlacementLine) {
  Graph graph = Place(kTrain, CpuOnly(), "auto", 1);
  EXPECT_EQ(PrintGraph(graph).find("placement:"), std::string::npos);
}

}  // namespace
}  // namespace sluice
