// The cost model (see cost_model.h and docs/cost_model.md).
#include "compiler/cost/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "compiler/passes/fused_chains.h"
#include "compiler/passes/fusion_util.h"
#include "ops/fusion/sample_args.h"

namespace sluice {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double Elements(const TensorType& type) {
  double n = 1;
  for (int64_t d : type.dims) n *= d < 0 ? 0 : static_cast<double>(d);
  return n;
}

// Height x width of an image type (0 when dynamic or not an image).
double Pixels(const TensorType& type) {
  const int h = type.height_axis(), w = type.width_axis();
  if (h < 0 || w < 0 || type.dims[h] < 0 || type.dims[w] < 0) return 0;
  return static_cast<double>(type.dims[h]) * static_cast<double>(type.dims[w]);
}

int64_t BatchSize(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    if (node.op == nullptr || node.op->op_class != OpClass::kBatch) continue;
    const ParamValue* size = FindParam(node.params, "size");
    if (size != nullptr && std::holds_alternative<int64_t>(size->value)) return size->AsInt();
  }
  return 1;
}

// The fusion group whose first node reads value `v`, or -1.
int GroupReading(const Graph& graph, ValueId v) {
  for (NodeId c : graph.Consumers(v)) {
    const int g = graph.nodes[c].fusion_group;
    if (g < 0) continue;
    // First node of the group?
    bool first = true;
    for (NodeId n = 0; n < c; ++n) first = first && graph.nodes[n].fusion_group != g;
    if (first) return g;
  }
  return -1;
}

std::string Seconds(double s) {
  char buf[64];
  if (s >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  }
  return buf;
}

}  // namespace

SampleShape ExpectedSampleShape(const HardwareProfile& profile) {
  SampleShape shape;
  if (profile.storage) {
    if (profile.storage->mean_width > 0 && profile.storage->mean_height > 0) {
      shape.width = profile.storage->mean_width;
      shape.height = profile.storage->mean_height;
      shape.from_profile = true;
    }
    if (profile.storage->mean_file_bytes > 0) shape.file_bytes = profile.storage->mean_file_bytes;
  }
  return shape;
}

DecodeRegion ExpectedDecodeRegion(const FusedChain& chain, double width, double height) {
  DecodeRegion region;
  const int64_t w = std::max<int64_t>(1, std::llround(width));
  const int64_t h = std::max<int64_t>(1, std::llround(height));
  double rows = 0, area = 0;
  int counted = 0;
  for (int i = 0; i < kDecodeSamples; ++i) {
    auto args = ComputeSampleArgs(chain, h, w, /*seed=*/0, /*epoch=*/0, static_cast<uint64_t>(i));
    if (!args) return region;  // full decode
    // The rectangle the loader asks the decoder for (runtime/exec/sample_worker.cc).
    const int64_t y_lo = std::max<int64_t>({args->y.window_start, args->y.src_lo, 0});
    const int64_t y_hi =
        std::min<int64_t>({int64_t{args->y.window_start} + args->y.window, args->y.src_hi, h});
    int64_t x_lo = std::max<int64_t>({args->x.window_start, args->x.src_lo, 0});
    int64_t x_hi =
        std::min<int64_t>({int64_t{args->x.window_start} + args->x.window, args->x.src_hi, w});
    if (y_hi <= y_lo || x_hi <= x_lo) continue;  // nothing decoded (all fill)
    x_lo = x_lo / kImcuWidth * kImcuWidth;
    x_hi = std::min<int64_t>(w, (x_hi + kImcuWidth - 1) / kImcuWidth * kImcuWidth);
    rows += static_cast<double>(y_hi) / static_cast<double>(h);
    area += static_cast<double>((y_hi - y_lo) * (x_hi - x_lo)) / static_cast<double>(w * h);
    ++counted;
  }
  if (counted == 0) return region;
  region.rows_fraction = rows / kDecodeSamples;
  region.area_fraction = area / kDecodeSamples;
  region.effective_fraction =
      kJpegEntropyShare * region.rows_fraction + (1 - kJpegEntropyShare) * region.area_fraction;
  return region;
}

GroupCost ChainCost(const HardwareProfile& profile, const FusedChain& chain, int gpu_from,
                    int64_t batch_size) {
  GroupCost cost;
  const int n = static_cast<int>(chain.steps.size());
  const int cpu_end = gpu_from >= 0 && gpu_from < n ? gpu_from : n;
  const std::vector<TensorType> types = ChainStepTypes(chain);
  const bool typed = static_cast<int>(types.size()) == n;
  auto out_of = [&](int step) -> const TensorType& {
    return typed && step >= 0 ? types[step] : chain.output;
  };
  cost.output_bytes = Elements(chain.output) * DTypeSize(chain.output.dtype);

  // CPU: the composed resample once, per output pixel of the last step with a
  // resample cost term (times that term), then each step's pointwise term per
  // element of its output, at a third of the profile's per-element cost of the
  // three-op tail normalize, layout, cast (OpCost in ops/registry.h).
  int last_resample = -1;
  double pointwise_elems = 0;
  for (int i = 0; i < cpu_end; ++i) {
    const OpDef* op = chain.steps[i].op;
    if (op == nullptr) continue;
    if (op->cost.resample_px > 0) last_resample = i;
    pointwise_elems += op->cost.pointwise_elem * Elements(out_of(i));
  }
  if (last_resample >= 0) {
    double px = Pixels(out_of(last_resample));
    if (px == 0) px = Pixels(chain.output);
    cost.kernel_cpu_s += profile.cpu.resample_ns_per_px * 1e-9 * px *
                         chain.steps[last_resample].op->cost.resample_px;
  }
  cost.kernel_cpu_s +=
      profile.cpu.pointwise_ns_per_elem * 1e-9 * pointwise_elems / kProfiledTailOps;
  // The profile times the kernel writing one cache-hot buffer; in the loader
  // it writes a fresh slot of a large batch buffer (the output, or the staging
  // image of a split) each sample: those bytes go to memory.
  const double written = cpu_end < n
                             ? Elements(out_of(cpu_end - 1)) * DTypeSize(out_of(cpu_end - 1).dtype)
                             : cost.output_bytes;
  if (profile.cpu.memory_bandwidth_gbps > 0) {
    cost.kernel_cpu_s += written / (profile.cpu.memory_bandwidth_gbps * 1e9);
  }

  if (cpu_end < n) {
    cost.h2d_bytes = Elements(out_of(cpu_end - 1));  // uint8 staging
    if (profile.gpu && profile.gpu->pointwise_gelem_per_s > 0) {
      double elems = 0;
      for (int i = cpu_end; i < n; ++i) elems = std::max(elems, Elements(out_of(i)));
      cost.gpu_s = elems / (profile.gpu->pointwise_gelem_per_s * 1e9) +
                   profile.gpu->launch_s / static_cast<double>(std::max<int64_t>(1, batch_size));
    }
  }
  return cost;
}

double ReferenceChainCost(const HardwareProfile& profile, const FusedChain& chain,
                          const SampleShape& shape) {
  const std::vector<TensorType> types = ChainStepTypes(chain);
  if (types.size() != chain.steps.size()) return 0;
  // Run-time extents: the image's (or, for channels, 3).
  auto elements = [&](const TensorType& type) {
    double n = 1;
    for (int i = 0; i < type.rank(); ++i) {
      int64_t d = type.dims[i];
      if (d >= 0) {
        n *= static_cast<double>(d);
      } else if (i == type.height_axis()) {
        n *= shape.height;
      } else if (i == type.width_axis()) {
        n *= shape.width;
      } else {
        n *= 3;
      }
    }
    return n;
  };
  auto pixels = [&](const TensorType& type) {
    const int c = type.channel_axis();
    return c >= 0 && type.dims[c] > 0 ? elements(type) / static_cast<double>(type.dims[c])
                                      : elements(type) / 3;
  };
  double s = 0;
  for (size_t i = 0; i < chain.steps.size(); ++i) {
    const OpDef* op = chain.steps[i].op;
    if (op == nullptr) continue;
    s += op->cost.resample_px * profile.cpu.resample_ns_per_px * 1e-9 * pixels(types[i]);
    s += op->cost.pointwise_elem * profile.cpu.pointwise_ns_per_elem * 1e-9 * elements(types[i]) /
         kProfiledTailOps;
  }
  if (profile.cpu.memory_bandwidth_gbps > 0) {
    s += Elements(chain.output) * DTypeSize(chain.output.dtype) /
         (profile.cpu.memory_bandwidth_gbps * 1e9);
  }
  return s * kReferenceSlowdown;
}

double DecodeSeconds(const HardwareProfile& profile, double width, double height,
                     double effective_fraction) {
  // The dataset's own decode rate when the profile measured one (its
  // per-image overhead is folded into the rate), else the built-in sample's
  // rate plus its fixed per-image cost.
  const bool dataset_rate = profile.storage && profile.storage->decode_mpix_per_s > 0;
  const double rate =
      dataset_rate ? profile.storage->decode_mpix_per_s : profile.cpu.decode_mpix_per_s;
  double s = dataset_rate ? 0 : profile.cpu.decode_fixed_s;
  if (rate > 0) s += width * height / (rate * 1e6) * effective_fraction;
  return s;
}

CostPrediction PredictCost(const HardwareProfile& profile, const Graph& graph,
                           const std::vector<int>& gpu_from, int cpu_budget) {
  CostPrediction p;
  p.shape = ExpectedSampleShape(profile);
  p.cpu_budget = std::max(1, cpu_budget);
  if (profile.storage && profile.storage->read_mbps > 0) {
    p.read_s = profile.storage->latency_s + p.shape.file_bytes / (profile.storage->read_mbps * 1e6);
  }
  const int64_t batch_size = BatchSize(graph);
  const std::vector<ReferenceFieldChain> references = BuildReferenceChains(graph);
  for (const Node& node : graph.nodes) {
    if (node.op == nullptr || node.op->op_class != OpClass::kDecode) continue;
    DecodeRegion region;  // a full decode
    if (!node.outputs.empty() && references.empty()) {
      const int g = GroupReading(graph, node.outputs[0]);
      if (g >= 0)
        region = ExpectedDecodeRegion(ChainForGroup(graph, g), p.shape.width, p.shape.height);
    }
    p.decode_regions.push_back(region);
    p.decode_s += DecodeSeconds(profile, p.shape.width, p.shape.height, region.effective_fraction);
  }
  const int groups = CountFusionGroups(graph);
  for (int g = 0; g < groups; ++g) {
    const std::vector<NodeId> members = GroupNodes(graph, g);
    if (members.empty() || BatchFieldOf(graph, graph.nodes[members.back()].outputs[0]).empty()) {
      continue;  // not run by the loader on its own
    }
    const int split = g < static_cast<int>(gpu_from.size()) ? gpu_from[g] : -1;
    GroupCost c = ChainCost(profile, ChainForGroup(graph, g), split, batch_size);
    p.kernel_cpu_s += c.kernel_cpu_s;
    p.gpu_s += c.gpu_s;
    p.h2d_bytes += c.h2d_bytes;
    if (c.h2d_bytes == 0) p.trainer_h2d_bytes += c.output_bytes;
  }
  for (const ReferenceFieldChain& ref : references) {
    p.reference_cpu_s += ReferenceChainCost(profile, ref.chain, p.shape);
  }
  p.cpu_s = p.read_s + p.decode_s + p.kernel_cpu_s + p.reference_cpu_s;

  p.cpu_images_per_second = p.cpu_s > 0 ? p.cpu_budget / p.cpu_s : kInf;
  p.gpu_images_per_second = p.gpu_s > 0 ? 1 / p.gpu_s : kInf;
  const double bus = profile.gpu ? profile.gpu->h2d_pinned_gbps * 1e9 : 0;
  p.bus_images_per_second = p.h2d_bytes > 0 && bus > 0 ? bus / p.h2d_bytes : kInf;
  p.images_per_second = p.cpu_images_per_second;
  p.limit = "cpu";
  if (p.gpu_images_per_second < p.images_per_second) {
    p.images_per_second = p.gpu_images_per_second;
    p.limit = "gpu";
  }
  if (p.bus_images_per_second < p.images_per_second) {
    p.images_per_second = p.bus_images_per_second;
    p.limit = "bus";
  }
  if (!std::isfinite(p.images_per_second)) p.images_per_second = 0;  // nothing measured
  return p;
}

PlacementPredictor CostModelPredictor(const HardwareProfile& profile) {
  return [&profile](const Graph& graph, const std::vector<int>& gpu_from, int cpu_budget) {
    const CostPrediction c = PredictCost(profile, graph, gpu_from, cpu_budget);
    PlacementPrediction p;
    p.images_per_second = c.images_per_second;
    p.cpu_s_per_sample = c.cpu_s;
    p.gpu_s_per_sample = c.gpu_s;
    p.h2d_bytes_per_sample = c.h2d_bytes;
    p.limit = c.limit;
    return p;
  };
}

std::string DescribePrediction(const CostPrediction& p) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.0f images/s, %s-bound (cpu %.0f/s = %d core%s / %s per sample",
                p.images_per_second, p.limit.c_str(), p.cpu_images_per_second, p.cpu_budget,
                p.cpu_budget == 1 ? "" : "s", Seconds(p.cpu_s).c_str());
  std::string out = buf;
  if (p.gpu_s > 0) {
    std::snprintf(buf, sizeof buf, "; gpu %.0f/s = %s per sample", p.gpu_images_per_second,
                  Seconds(p.gpu_s).c_str());
    out += buf;
  }
  if (p.h2d_bytes > 0) {
    std::snprintf(buf, sizeof buf, "; bus %.0f/s = %.0f B per sample", p.bus_images_per_second,
                  p.h2d_bytes);
    out += buf;
  }
  return out + ")";
}

}  // namespace sluice
