// The cost model: per-sample CPU seconds, GPU seconds and host-to-device bytes
// of a placed graph, predicted from a hardware profile, and the loader
// throughput (images/s) that follows for a CPU budget. The placement pass
// (compiler/passes/placement.cc) picks the placement with the highest
// prediction; plan.json and report.txt state it. docs/cost_model.md gives the
// formulas and the assumptions behind them; in short, per sample:
//
//   cpu_s  = read_s + decode_s + kernel_cpu_s + reference_cpu_s   (one core)
//   read_s = storage.latency_s + file_bytes / storage.read_mbps   (0 without storage)
//   decode_s = cpu.decode_fixed_s + W*H / decode_rate *
//              (e * rows_fraction + (1 - e) * area_fraction)
//       e = kJpegEntropyShare: the share of a full decode spent in Huffman
//       decoding, which covers every row down to the crop's bottom at full
//       width; IDCT, upsampling and colour conversion cover only the region of
//       interest (rows of the crop, iMCU-aligned columns). The fractions are
//       averaged over kDecodeSamples draws of the chain's own random crop.
//   kernel_cpu_s = resample_ns_per_px * resampled pixels          (if a resample op is on the CPU)
//                + pointwise_ns_per_elem / 3 * sum over the pointwise ops on the CPU
//                  of their output elements   (the profile times the 3-op tail
//                                              normalize, layout, cast per output element)
//                + bytes the CPU part writes (output, or uint8 staging) / memory_bandwidth_gbps
//                  (a fresh batch slot each sample; the profile's kernel timing is cache-hot)
//   reference_cpu_s = kReferenceSlowdown * (the same terms for every step of each
//                  reference chain, each step materialized)   (fields not fused)
//   gpu_s  = elements of the GPU part's output / gpu.pointwise_gelem_per_s
//            + gpu.launch_s / batch size                      (0 when nothing is on the GPU)
//   h2d_bytes = bytes of the uint8 HWC staging image of each split group
//            (0 when nothing is on the GPU: the loader then hands batches over in host
//            memory and a trainer on the GPU copies the full output itself)
//   images/s = min(cpu_budget / cpu_s, 1 / gpu_s, h2d_pinned_gbps * 1e9 / h2d_bytes)
//
// W x H (and the file size) is the profile's storage.mean_width/mean_height
// (mean_file_bytes) when measured, else ImageNet's 500 x 375 (110 kB).
//
// The split points placement weighs (GpuSplitPoints) and the per-step types
// (ChainStepTypes) are facts of the fusion groups, not of the model: they live
// in compiler/passes/fused_chains.h. The model reaches the placement pass only
// through PassContext::predict (CostModelPredictor below, set by the driver),
// so no pass includes this header.
//
// Thread safety: pure functions over their arguments.
#pragma once

#include <string>
#include <vector>

#include "common/hardware_profile.h"
#include "compiler/ir/ir.h"
#include "compiler/passes/pass.h"
#include "ops/fusion/fused_chain.h"
#include "sluice/result.h"

namespace sluice {

// Share of a full libjpeg-turbo decode (4:2:0, quality ~90) spent in Huffman
// decoding, measured on this repository's synthetic ImageNet-like set: see
// docs/cost_model.md ("Calibration").
inline constexpr double kJpegEntropyShare = 0.50;
// Random crops averaged to estimate the decoded region of a chain.
inline constexpr int kDecodeSamples = 256;
// Defaults when the profile has no dataset statistics (ImageNet's typical JPEG).
inline constexpr double kDefaultImageWidth = 500, kDefaultImageHeight = 375;
inline constexpr double kDefaultFileBytes = 110000;
// The pointwise ops in the tail `sluice profile` times for pointwise_ns_per_elem
// (normalize, layout, cast); the model charges each op an equal share.
inline constexpr double kProfiledTailOps = 3;
// iMCU width of 4:2:0 JPEGs: the column granularity of region-of-interest decode.
inline constexpr int kImcuWidth = 16;
// How much slower a chain run step by step on the reference implementations
// (the loader's path for batch fields no fusion group writes) is than the
// same chain as a fused kernel: bench/RESULTS.md measured unfused / fused ≈ 63
// (round 5) and ≈ 77 (round 6) for examples/imagenet_train.yaml's chain
// (BM_UnfusedReference vs BM_FusedKernel, same binary and session); a round
// value between them. See docs/cost_model.md.
inline constexpr double kReferenceSlowdown = 70;

// The per-sample image the model assumes.
struct SampleShape {
  double width = kDefaultImageWidth;
  double height = kDefaultImageHeight;
  double file_bytes = kDefaultFileBytes;
  bool from_profile = false;  // true when width/height came from profile.storage
};
SampleShape ExpectedSampleShape(const HardwareProfile& profile);

// Expected fractions of a W x H JPEG that the runtime's region-of-interest
// decode touches for chain `chain` (averaged over kDecodeSamples samples of
// its random draws, seed 0, epoch 0, the same arguments the loader computes):
// rows_fraction = E[bottom row of the crop] / H (Huffman decoding), and
// area_fraction = E[crop rows x iMCU-aligned crop columns] / (W H). A chain
// whose arguments cannot be computed for this size counts as a full decode.
struct DecodeRegion {
  double rows_fraction = 1;
  double area_fraction = 1;
  // e * rows_fraction + (1 - e) * area_fraction: the decode time relative to a
  // full decode, without the fixed per-image cost.
  double effective_fraction = 1;
};
DecodeRegion ExpectedDecodeRegion(const FusedChain& chain, double width, double height);

// Seconds one core spends decoding a W x H JPEG of which `effective_fraction`
// (DecodeRegion::effective_fraction; 1 = a full decode) is decoded: the
// dataset's decode rate from the profile when it measured one (per-image
// overhead folded in), else cpu.decode_mpix_per_s plus cpu.decode_fixed_s.
// PredictCost's decode term; `sluice inspect --data` sums it over a dataset.
double DecodeSeconds(const HardwareProfile& profile, double width, double height,
                     double effective_fraction = 1);

// Cost of one fusion group at one split (gpu_from = -1: all on the CPU).
struct GroupCost {
  double kernel_cpu_s = 0;  // the CPU kernel (steps [0, gpu_from) or all)
  double gpu_s = 0;         // the GPU part, per sample (launch amortized over the batch)
  double h2d_bytes = 0;     // staging bytes per sample (0 when all on the CPU)
  double output_bytes = 0;  // the chain's output per sample (what a CPU-placed group hands over)
};
GroupCost ChainCost(const HardwareProfile& profile, const FusedChain& chain, int gpu_from,
                    int64_t batch_size);

// CPU seconds per sample of a chain run on the reference implementations
// (compiler/passes/fused_chains.h ReferenceFieldChain): what the same steps
// would cost as a fused kernel on the CPU, with every step materialized
// (each resample step charged per output pixel, each pointwise step per output
// element; run-time image sizes taken as `shape`'s W x H), plus writing the
// output, all times kReferenceSlowdown.
double ReferenceChainCost(const HardwareProfile& profile, const FusedChain& chain,
                          const SampleShape& shape);

// A whole-graph prediction for one placement.
struct CostPrediction {
  SampleShape shape;
  double read_s = 0;
  double decode_s = 0;
  double kernel_cpu_s = 0;     // fused kernels that write a batch field
  double reference_cpu_s = 0;  // batch fields run on the reference implementations
  double cpu_s = 0;            // read + decode + kernels + reference chains, one core
  double gpu_s = 0;
  double h2d_bytes = 0;
  double trainer_h2d_bytes = 0;  // output bytes of CPU-placed groups (informational)
  int cpu_budget = 1;
  double cpu_images_per_second = 0;
  double gpu_images_per_second = 0;          // +inf when nothing is on the GPU
  double bus_images_per_second = 0;          // +inf when nothing crosses the bus
  double images_per_second = 0;              // the minimum of the three
  std::string limit;                         // "cpu", "gpu" or "bus"
  std::vector<DecodeRegion> decode_regions;  // one per decode node, in node order
};

// Predicts `graph` (typed, after the fusion passes) with fusion group g split
// at gpu_from[g] (-1 or missing: all CPU), for a CPU budget of `cpu_budget`
// cores (>= 1). The batch size is the batch node's `size`. A fusion group
// whose output no batch field reads costs nothing (the loader runs it only as
// part of a reference chain); each reference chain costs ReferenceChainCost,
// and when there is one, every decode is a full decode (the loader turns
// region-of-interest decode off). A GPU part with a
// profile that has no GPU (or a zero rate) counts as free, and a bus of zero
// bandwidth as unlimited; the placement pass never asks for that except when a
// user forces a GPU device, and its reason says so.
CostPrediction PredictCost(const HardwareProfile& profile, const Graph& graph,
                           const std::vector<int>& gpu_from, int cpu_budget);

// The placement pass's predictor for `profile` (PassContext::predict):
// PredictCost's images/s, CPU and GPU seconds, bus bytes and limit. The
// returned function refers to `profile`, which must outlive it.
PlacementPredictor CostModelPredictor(const HardwareProfile& profile);

// "1234 images/s (cpu-bound: 2 cores x 1.62 ms/sample; gpu 0 ms, bus 0 B)" for reports.
std::string DescribePrediction(const CostPrediction& prediction);

}  // namespace sluice
