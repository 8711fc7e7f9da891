// The cost model's formulas on synthetic profiles (docs/cost_model.md): sample
// shape, decoded region, split points, per-group and whole-graph costs.
#include "compiler/cost/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

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

const char* kEval =
    "  - resize: {size: 256}\n"
    "  - center_crop: {size: [224, 224]}\n"
    "  - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}\n"
    "  - layout: {to: CHW}\n";

const char* kCropFirst =
    "  - center_crop: {size: [300, 300]}\n"
    "  - resize: {size: [224, 224]}\n"
    "  - cast: {dtype: float32}\n";

const char* kGray =
    "  - center_crop: {size: [224, 224]}\n"
    "  - grayscale: {num_output_channels: 1}\n"
    "  - cast: {dtype: float32}\n";

Graph Compile(const std::string& steps) {
  std::string text =
      "sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\ngraph:\n"
      "  - decode_jpeg: {in: jpg, out: image}\n" +
      steps + "batch:\n  size: 256\n  fields: {image: image, label: cls}\n";
  Diagnostics diags;
  Spec spec = ParseSpecText(text, "t.yaml", diags);
  EXPECT_FALSE(diags.has_errors()) << diags.Render();
  Graph graph = BuildGraph(spec);
  Status status = RunPasses(graph, diags);
  EXPECT_TRUE(status) << status.error().ToString();
  EXPECT_FALSE(diags.has_errors()) << diags.Render();
  return graph;
}

HardwareProfile Profile() {
  HardwareProfile p = testing_profile::SyntheticCpu("");
  p.cpu.memory_bandwidth_gbps = 0;  // no memory term
  p.gpu = testing_profile::SyntheticGpu("g", 300, 25.6e-6);
  return p;
}

TEST(CostModel, SampleShapeFromTheProfileOrImagenetDefaults) {
  HardwareProfile p = Profile();
  SampleShape d = ExpectedSampleShape(p);
  EXPECT_EQ(d.width, 500);
  EXPECT_EQ(d.height, 375);
  EXPECT_EQ(d.file_bytes, 110000);
  EXPECT_FALSE(d.from_profile);
  p.storage = HardwareProfile::Storage{.path = "/d",
                                       .read_mbps = 500,
                                       .latency_s = 1e-4,
                                       .mean_file_bytes = 200000,
                                       .mean_width = 640,
                                       .mean_height = 480};
  SampleShape s = ExpectedSampleShape(p);
  EXPECT_EQ(s.width, 640);
  EXPECT_EQ(s.height, 480);
  EXPECT_EQ(s.file_bytes, 200000);
  EXPECT_TRUE(s.from_profile);
}

TEST(CostModel, SplitPointsAreAfterTheLastUint8Image) {
  EXPECT_EQ(GpuSplitPoints(BuildFusedChains(Compile(kTrain))[0]), std::vector<int>{2});
  // normalize's float32 output cannot be staged: only the split before it.
  EXPECT_EQ(GpuSplitPoints(BuildFusedChains(Compile(kEval))[0]), std::vector<int>{2});
  // grayscale keeps uint8: both before it and after it are valid.
  EXPECT_EQ(GpuSplitPoints(BuildFusedChains(Compile(kGray))[0]), (std::vector<int>{1, 2}));
}

TEST(CostModel, ResizeBeforeCropDecodesTheWholeImage) {
  // The reference resizes the whole image before the crop, so the resample
  // window (and the loader's decode region) is the whole image.
  DecodeRegion r = ExpectedDecodeRegion(BuildFusedChains(Compile(kEval))[0], 500, 375);
  EXPECT_DOUBLE_EQ(r.rows_fraction, 1);
  EXPECT_DOUBLE_EQ(r.area_fraction, 1);
  EXPECT_DOUBLE_EQ(r.effective_fraction, 1);
}

TEST(CostModel, CropBeforeResizeDecodesItsWindowOnly) {
  // A centred 300x300 window of 500x375: rows down to (375 + 300) / 2, columns
  // [100, 400) widened to iMCU boundaries [96, 400).
  DecodeRegion r = ExpectedDecodeRegion(BuildFusedChains(Compile(kCropFirst))[0], 500, 375);
  EXPECT_NEAR(r.rows_fraction, 337.0 / 375, 0.005);
  EXPECT_NEAR(r.area_fraction, 300.0 * 304 / (500 * 375), 0.005);
  EXPECT_NEAR(r.effective_fraction,
              kJpegEntropyShare * r.rows_fraction + (1 - kJpegEntropyShare) * r.area_fraction,
              1e-12);
}

TEST(CostModel, RandomResizedCropDecodesAFractionOfTheImage) {
  DecodeRegion r = ExpectedDecodeRegion(BuildFusedChains(Compile(kTrain))[0], 500, 375);
  // scale ~ U[0.08, 1]: mean area a bit above 0.5 less what does not fit; rows
  // to the crop's bottom cover most of the image.
  EXPECT_GT(r.area_fraction, 0.3);
  EXPECT_LT(r.area_fraction, 0.6);
  EXPECT_GT(r.rows_fraction, r.area_fraction);
  EXPECT_LT(r.rows_fraction, 1.0);
  EXPECT_LT(r.effective_fraction, 1.0);
}

TEST(CostModel, ChainCostPerPlacement) {
  HardwareProfile p = Profile();
  FusedChain chain = BuildFusedChains(Compile(kTrain))[0];
  GroupCost cpu = ChainCost(p, chain, -1, 256);
  // resample per output pixel + the three-op tail per output element (a third each).
  EXPECT_NEAR(cpu.kernel_cpu_s, 5e-9 * 224 * 224 + 0.5e-9 * 3 * 224 * 224, 1e-12);
  EXPECT_EQ(cpu.gpu_s, 0);
  EXPECT_EQ(cpu.h2d_bytes, 0);
  EXPECT_EQ(cpu.output_bytes, 2.0 * 3 * 224 * 224);  // float16
  GroupCost split = ChainCost(p, chain, 2, 256);
  EXPECT_NEAR(split.kernel_cpu_s, 5e-9 * 224 * 224, 1e-12);  // resample only, uint8 out
  EXPECT_EQ(split.h2d_bytes, 224.0 * 224 * 3);
  // color_jitter on the CPU costs one op's share of the tail.
  FusedChain jitter = BuildFusedChains(
      Compile("  - random_resized_crop: {size: [224, 224]}\n"
              "  - color_jitter: {brightness: 0.4}\n"
              "  - normalize: {mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], scale: 255}\n"
              "  - layout: {to: CHW}\n"
              "  - cast: {dtype: float16}\n"))[0];
  EXPECT_NEAR(ChainCost(p, jitter, 2, 256).kernel_cpu_s,
              5e-9 * 224 * 224 + 0.5e-9 / 3 * 3 * 224 * 224, 1e-12);
  EXPECT_NEAR(ChainCost(p, jitter, -1, 256).kernel_cpu_s,
              5e-9 * 224 * 224 + 4 * 0.5e-9 / 3 * 3 * 224 * 224, 1e-12);
  EXPECT_NEAR(split.gpu_s, 3.0 * 224 * 224 / 300e9 + 25.6e-6 / 256, 1e-15);
}

TEST(CostModel, WritingTheBatchSlotCostsMemoryBandwidth) {
  HardwareProfile p = Profile();
  FusedChain chain = BuildFusedChains(Compile(kTrain))[0];
  const double cpu0 = ChainCost(p, chain, -1, 256).kernel_cpu_s;
  const double split0 = ChainCost(p, chain, 2, 256).kernel_cpu_s;
  p.cpu.memory_bandwidth_gbps = 1;  // 1 GB/s
  // float16 output (2 bytes x 150528) vs uint8 staging (150528 bytes).
  EXPECT_NEAR(ChainCost(p, chain, -1, 256).kernel_cpu_s - cpu0, 2 * 150528 / 1e9, 1e-12);
  EXPECT_NEAR(ChainCost(p, chain, 2, 256).kernel_cpu_s - split0, 150528 / 1e9, 1e-12);
}

TEST(CostModel, PredictionAddsReadDecodeAndKernelsAndTakesTheTightestLimit) {
  HardwareProfile p = Profile();
  p.storage = HardwareProfile::Storage{
      .path = "/d", .read_mbps = 1000, .latency_s = 1e-4, .mean_file_bytes = 100000};
  Graph graph = Compile(kTrain);
  CostPrediction c = PredictCost(p, graph, {-1}, 2);
  EXPECT_NEAR(c.read_s, 1e-4 + 100000 / 1e9, 1e-12);
  ASSERT_EQ(c.decode_regions.size(), 1u);
  EXPECT_NEAR(c.decode_s, 50e-6 + 500.0 * 375 / 100e6 * c.decode_regions[0].effective_fraction,
              1e-12);
  EXPECT_NEAR(c.cpu_s, c.read_s + c.decode_s + c.kernel_cpu_s, 1e-15);
  EXPECT_NEAR(c.images_per_second, 2 / c.cpu_s, 1e-6);
  EXPECT_EQ(c.limit, "cpu");
  EXPECT_EQ(c.h2d_bytes, 0);
  EXPECT_EQ(c.trainer_h2d_bytes, 2.0 * 3 * 224 * 224);
  EXPECT_TRUE(std::isinf(c.bus_images_per_second));

  // Twice the cores, twice the CPU-bound throughput.
  EXPECT_NEAR(PredictCost(p, graph, {-1}, 4).images_per_second, 2 * c.images_per_second, 1e-6);

  // The dataset's own decode rate, when measured, replaces the built-in
  // sample's rate and fixed cost (its per-image overhead is in the rate).
  HardwareProfile q = p;
  q.storage->decode_mpix_per_s = 50;
  CostPrediction own = PredictCost(q, graph, {-1}, 2);
  EXPECT_NEAR(own.decode_s, 500.0 * 375 / 50e6 * own.decode_regions[0].effective_fraction,
              1e-12);
  EXPECT_GT(own.decode_s, c.decode_s);

  // A 10 MB/s bus bounds the split at 10e6 / 150528 images/s.
  p.gpu->h2d_pinned_gbps = 0.01;
  CostPrediction bus = PredictCost(p, graph, {2}, 2);
  EXPECT_EQ(bus.limit, "bus");
  EXPECT_NEAR(bus.images_per_second, 0.01e9 / (224.0 * 224 * 3), 1e-6);
  EXPECT_LT(bus.cpu_s, c.cpu_s);

  // A slow GPU bounds it instead.
  p.gpu->h2d_pinned_gbps = 24;
  p.gpu->pointwise_gelem_per_s = 0.1;
  CostPrediction gpu = PredictCost(p, graph, {2}, 2);
  EXPECT_EQ(gpu.limit, "gpu");
  EXPECT_NEAR(gpu.images_per_second, 1 / gpu.gpu_s, 1e-9);
  EXPECT_NE(DescribePrediction(gpu).find("gpu-bound"), std::string::npos);
}

// color_jitter before the crop: no fusion group; the field runs on the
// reference implementations and is charged kReferenceSlowdown x the same steps
// fused (each materialized), with a full decode.
TEST(CostModel, ReferenceChainCostsTheSlowdownTimesItsStepsAndAFullDecode) {
  const char* jitter_first =
      "  - color_jitter: {brightness: 0.4}\n"
      "  - center_crop: {size: [224, 224]}\n"
      "  - cast: {dtype: float32}\n";
  HardwareProfile p = Profile();
  Graph graph = Compile(jitter_first);
  ASSERT_EQ(CountFusionGroups(graph), 0);
  std::vector<ReferenceFieldChain> refs = BuildReferenceChains(graph);
  ASSERT_EQ(refs.size(), 1u);
  CostPrediction c = PredictCost(p, graph, {}, 2);
  // color_jitter on the whole 500x375x3 image, center_crop 224x224 px, cast 224x224x3.
  const double fused = 0.5e-9 * 500 * 375 * 3 / 3 + 5e-9 * 224 * 224 + 0.5e-9 * 224 * 224 * 3 / 3;
  EXPECT_NEAR(c.reference_cpu_s, kReferenceSlowdown * fused, 1e-12);
  EXPECT_NEAR(ReferenceChainCost(p, refs[0].chain, c.shape), c.reference_cpu_s, 1e-15);
  EXPECT_EQ(c.kernel_cpu_s, 0);
  ASSERT_EQ(c.decode_regions.size(), 1u);
  EXPECT_EQ(c.decode_regions[0].effective_fraction, 1);  // no region of interest
  EXPECT_NEAR(c.cpu_s, c.read_s + c.decode_s + c.reference_cpu_s, 1e-15);

  // The same field fused (crop first) costs far less, and decodes only the crop.
  CostPrediction fused_graph = PredictCost(p, Compile(kCropFirst), {-1}, 2);
  EXPECT_EQ(fused_graph.reference_cpu_s, 0);
  EXPECT_GT(c.cpu_s, 10 * fused_graph.cpu_s);
}

}  // namespace
}  // namespace sluice
