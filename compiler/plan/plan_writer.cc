// The plan artifact writer (see plan_writer.h; layout in docs/plan.md).
#include "compiler/plan/plan_writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "common/atomic_file.h"
#include "compiler/cost/cost_model.h"
#include "compiler/passes/fused_chains.h"
#include "compiler/passes/pass.h"
#include "ops/fusion/gpu_staging.h"
#include "ops/fusion/plan_format.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace sluice {
namespace {

using json = nlohmann::json;
namespace pf = plan_format;

const Node* FindSource(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    if (node.op && node.op->op_class == OpClass::kSource) return &node;
  }
  return nullptr;
}

const Node* FindBatch(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    if (node.op && node.op->op_class == OpClass::kBatch) return &node;
  }
  return nullptr;
}

std::string OutputDevice(const Graph& graph) {
  const ParamValue* device = FindParam(graph.output, "device");
  return device && std::holds_alternative<std::string>(device->value) ? device->AsString() : "auto";
}

// What plan.json and report.txt state about placement: the pass's decision
// (Graph::placement), made effective only where the code generator built the
// GPU part of a split group. Without it the group runs whole on the CPU.
struct EffectivePlacement {
  std::vector<int> gpu_from;    // per group, -1 = all on the CPU
  std::vector<Device> devices;  // per node
  std::string device = "cpu";   // "cpu" or "cuda:N"
  std::string reason;
  const PlacementAlternative* predicted = nullptr;  // the alternative that runs, if predicted
  std::optional<CostPrediction> cost;               // its breakdown (with a profile)
};

EffectivePlacement Effective(const Graph& graph, const KernelRecord& kernels,
                             const HardwareProfile* profile) {
  EffectivePlacement e;
  const PlacementDecision& d = graph.placement;
  const int count = CountFusionGroups(graph);
  e.gpu_from.assign(count, -1);
  e.devices.assign(graph.nodes.size(), Device::kCpu);
  if (!d.ran) {
    e.reason = "the placement pass did not run: everything runs on the CPU";
    return e;
  }
  e.reason = d.reason;
  std::string dropped;
  for (int g = 0; g < count; ++g) {
    FusedChain chain = ChainForGroup(graph, g);
    if (chain.gpu_from < 0) continue;
    const bool built = g < static_cast<int>(kernels.artifact.kernels.size()) &&
                       !kernels.artifact.kernels[g].gpu_batch_symbol.empty() &&
                       !kernels.artifact.kernels[g].cpu_part_symbol.empty();
    if (!built) {
      if (dropped.empty()) {
        dropped =
            kernels.artifact.cuda_target.empty()
                ? "CUDA kernels were not built" + (kernels.artifact.cuda_note.empty()
                                                       ? std::string()
                                                       : " (" + kernels.artifact.cuda_note + ")")
                : "the code generator built no GPU part for group " + std::to_string(g);
      }
      continue;
    }
    e.gpu_from[g] = chain.gpu_from;
  }
  bool any = false;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.fusion_group >= 0 && e.gpu_from[node.fusion_group] >= 0 &&
        node.device == Device::kGpu) {
      e.devices[n] = Device::kGpu;
      any = true;
    }
  }
  if (any) e.device = d.device;
  if (!dropped.empty()) {
    e.reason += "; but " + dropped + ", so " +
                (any ? std::string("the other split groups run on the GPU")
                     : std::string("everything runs on the CPU"));
  }
  for (const PlacementAlternative& a : d.alternatives) {
    if (a.predicted && a.gpu_from == e.gpu_from) {
      e.predicted = &a;
      break;
    }
  }
  if (profile != nullptr && d.cpu_budget > 0) {
    e.cost = PredictCost(*profile, graph, e.gpu_from, d.cpu_budget);
  }
  return e;
}

json AlternativeJson(const PlacementAlternative& a, bool chosen) {
  json j{{"name", a.name}, {"gpu_from", a.gpu_from}, {"chosen", chosen}};
  if (a.predicted) {
    j["images_per_second"] = a.images_per_second;
    j["cpu_s_per_sample"] = a.cpu_s_per_sample;
    j["gpu_s_per_sample"] = a.gpu_s_per_sample;
    j["h2d_bytes_per_sample"] = a.h2d_bytes_per_sample;
    j["limit"] = a.limit;
  } else {
    j["images_per_second"] = nullptr;
  }
  return j;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// "1.234 ms", or "0.5 us" below 0.1 ms.
std::string Ms(double s) {
  if (s > 0 && s < 1e-4) return Fixed(s * 1e6, 1) + " us";
  return Fixed(s * 1e3, 3) + " ms";
}

json ValueRef(const Graph& graph, ValueId id) {
  const Value& v = graph.value(id);
  return json{{"name", v.name}, {"type", v.type ? pf::TypeToJson(*v.type) : json(nullptr)}};
}

// A chain's steps as plan.json stores them (read back by Plan::Load).
std::vector<PlanStepDoc> StepDocs(const FusedChain& chain) {
  std::vector<PlanStepDoc> steps;
  for (const ChainStep& step : chain.steps) {
    steps.push_back(PlanStepDoc{step.op->name, step.op_id, pf::ParamsToJson(step.params)});
  }
  return steps;
}

// The decode node the fused and reference chains read (the first decode).
const Node* FindDecode(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    if (node.op && node.op->op_class == OpClass::kDecode) return &node;
  }
  return nullptr;
}

// The memory plan with the staging of GPU tails that do not run dropped.
std::optional<PlanMemoryDoc> MemoryDoc(const Graph& graph, const EffectivePlacement& placement) {
  if (!graph.memory.planned) return std::nullopt;
  std::vector<FieldMemory> fields = graph.memory.fields;
  for (FieldMemory& f : fields) {
    bool staged = false;
    for (int g = 0; g < static_cast<int>(placement.gpu_from.size()); ++g) {
      if (placement.gpu_from[g] < 0) continue;
      for (const Node& node : graph.nodes) {
        if (node.fusion_group != g || node.outputs.empty()) continue;
        staged = staged || BatchFieldOf(graph, node.outputs[0]) == f.field;
      }
    }
    if (!staged) f.staging_bytes_per_sample = 0;
  }
  MemoryPlan m = LayOutBatch(std::move(fields), graph.memory.batch_size);
  PlanMemoryDoc doc;
  doc.batch_size = m.batch_size;
  doc.batch_bytes = m.batch_bytes;
  doc.staged_batch_bytes = m.staged_batch_bytes;
  for (const FieldMemory& f : m.fields) {
    doc.fields.push_back(PlanFieldMemoryDoc{f.field, f.dtype, f.sample_shape, f.bytes_per_sample,
                                            f.offset, f.staging_bytes_per_sample, f.staged_offset});
  }
  return doc;
}

std::string NodeWhere(const Node& node) {
  std::string out = node.op ? node.op->name : "?";
  if (node.mark.valid()) out += " (line " + std::to_string(node.mark.line) + ")";
  return out;
}

// plan.json "graph": every node as placed (and built), and the notes.
json GraphJson(const Graph& graph, const EffectivePlacement& placement) {
  json nodes = json::array();
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    json jn{{"id", n},
            {"op", node.op ? node.op->name : ""},
            {"class", node.op ? std::string(OpClassName(node.op->op_class)) : ""},
            {"op_id", node.op_id},
            {"params", pf::ParamsToJson(node.params)},
            {"inputs", json::array()},
            {"outputs", json::array()},
            {"group", node.fusion_group},
            {"device", placement.devices[n] == Device::kGpu ? "gpu" : "cpu"}};
    if (node.mark.valid()) jn["line"] = node.mark.line;
    for (ValueId v : node.inputs) jn["inputs"].push_back(ValueRef(graph, v));
    for (ValueId v : node.outputs) jn["outputs"].push_back(ValueRef(graph, v));
    nodes.push_back(std::move(jn));
  }
  return json{{"nodes", nodes}, {"notes", graph.notes}};
}

// plan.json "fusion_groups".
std::vector<PlanGroupDoc> GroupDocs(const Graph& graph, const KernelRecord& kernels,
                                    const EffectivePlacement& placement) {
  std::vector<PlanGroupDoc> groups;
  const json args = kernels.artifact.arg_names;
  const int count = CountFusionGroups(graph);
  for (int g = 0; g < count; ++g) {
    FusedChain chain = ChainForGroup(graph, g);
    json node_ids = json::array();
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      if (graph.nodes[n].fusion_group == g) node_ids.push_back(n);
    }
    PlanGroupDoc group;
    if (g < static_cast<int>(kernels.artifact.kernels.size())) {
      group.cuda_symbol = kernels.artifact.kernels[g].cuda_symbol;
      group.cpu_part_symbol = kernels.artifact.kernels[g].cpu_part_symbol;
      group.gpu_batch_symbol = kernels.artifact.kernels[g].gpu_batch_symbol;
    }
    group.gpu_from = placement.gpu_from[g];
    if (group.gpu_from >= 1) {
      std::vector<TensorType> types = ChainStepTypes(chain);
      if (group.gpu_from <= static_cast<int>(types.size())) {
        group.staging_type = GpuStagingType(types[group.gpu_from - 1]);
      }
    }
    const Node& last = graph.nodes[node_ids.back().get<size_t>()];
    const Node& first = graph.nodes[node_ids.front().get<size_t>()];
    group.id = g;
    group.symbol = chain.symbol;
    group.nodes = node_ids;
    group.input = graph.value(first.inputs[0]).name;
    group.input_type = chain.input;
    group.output = graph.value(last.outputs[0]).name;
    group.output_type = chain.output;
    group.batch_field = BatchFieldOf(graph, last.outputs[0]);
    group.steps = StepDocs(chain);
    group.abi =
        json{{"signature", "int SYMBOL(halide_buffer_t* in, SCALAR ARGS..., halide_buffer_t* out)"},
             {"reference", "ops/fusion/kernel_abi.h"},
             {"args", args}};
    groups.push_back(std::move(group));
  }

  return groups;
}

// plan.json "reference_chains": batch fields no fusion group writes, run per
// sample on the reference implementations (an old loader, which does not read
// this key, fails with its "written neither by a fused kernel nor the source's
// label" error).
std::vector<PlanReferenceDoc> ReferenceDocs(const Graph& graph) {
  std::vector<PlanReferenceDoc> references;
  for (const ReferenceFieldChain& ref : BuildReferenceChains(graph)) {
    const Node& decode = graph.nodes[ref.decode];
    const Node& last = graph.nodes[ref.nodes.back()];
    PlanReferenceDoc r;
    for (const std::string& why : ref.reasons) r.reason += (r.reason.empty() ? "" : "; ") + why;
    r.batch_field = ref.field;
    r.symbol = ref.chain.symbol;
    r.nodes = ref.nodes;
    r.input = graph.value(decode.outputs[0]).name;
    r.input_type = ref.chain.input;
    r.output = graph.value(last.outputs[0]).name;
    r.output_type = ref.chain.output;
    r.steps = StepDocs(ref.chain);
    references.push_back(std::move(r));
  }

  return references;
}

// plan.json "placement" (its device is PlanDocument::placement_device too).
json PlacementJson(const Graph& graph, const EffectivePlacement& placement,
                   const HardwareProfile* profile) {
  const PlacementDecision& d = graph.placement;
  json placed = json::array();
  for (Device device : placement.devices) placed.push_back(device == Device::kGpu ? "gpu" : "cpu");
  json predicted = nullptr;
  if (placement.predicted != nullptr) {
    const PlacementAlternative& alt = *placement.predicted;
    predicted = json{{"images_per_second", alt.images_per_second},
                     {"cpu_s_per_sample", alt.cpu_s_per_sample},
                     {"gpu_s_per_sample", alt.gpu_s_per_sample},
                     {"h2d_bytes_per_sample", alt.h2d_bytes_per_sample},
                     {"limit", alt.limit}};
    if (placement.cost) {
      predicted["read_s_per_sample"] = placement.cost->read_s;
      predicted["decode_s_per_sample"] = placement.cost->decode_s;
      predicted["kernel_cpu_s_per_sample"] = placement.cost->kernel_cpu_s;
      predicted["reference_cpu_s_per_sample"] = placement.cost->reference_cpu_s;
    }
  }
  json alternatives = json::array();
  for (size_t i = 0; i < d.alternatives.size(); ++i) {
    alternatives.push_back(AlternativeJson(d.alternatives[i], static_cast<int>(i) == d.chosen));
  }
  return json{{"requested", d.ran ? d.requested : OutputDevice(graph)},
              {"device", placement.device},
              {"reason", placement.reason},
              {"nodes", placed},
              {"cpu_budget", d.cpu_budget > 0 ? json(d.cpu_budget) : json(nullptr)},
              {"cpu_budget_from", d.cpu_budget_from},
              {"profile", profile != nullptr ? json(profile->machine) : json(nullptr)},
              {"predicted", predicted},
              {"alternatives", alternatives}};
}

// plan.json "decode": the first decode node (the one the chains read) and
// what decode_pushdown decided for it; nullopt without a decode.
std::optional<PlanDecodeDoc> DecodeDoc(const Graph& graph) {
  const Node* decode = FindDecode(graph);
  if (decode == nullptr) return std::nullopt;
  PlanDecodeDoc dd;
  dd.op = decode->op->name;
  dd.params = pf::ParamsToJson(decode->params);
  dd.node = static_cast<int>(decode - graph.nodes.data());
  dd.roi = decode->pushdown.roi;
  dd.dct_scaling = decode->pushdown.dct_scaling;
  dd.reason = decode->pushdown.decided ? decode->pushdown.reason
                                       : "the decode_pushdown pass did not run: no pushdown";
  return dd;
}

}  // namespace

PlanDocument BuildPlanDocument(const Graph& graph, const std::string& spec_text,
                               const KernelRecord& kernels, const HardwareProfile* profile) {
  const EffectivePlacement placement = Effective(graph, kernels, profile);
  PlanDocument doc;
  doc.format_version = pf::kFormatVersion;
  doc.compiler_version = SLUICE_VERSION;
  doc.spec_hash = pf::HashBytes(spec_text);
  doc.spec_file = graph.spec_file;
  doc.name = graph.name;

  const Node* source = FindSource(graph);
  doc.source_format = source ? source->op->name : "";
  doc.source_params = source ? pf::ParamsToJson(source->params) : json::object();
  if (source) {
    for (ValueId v : source->outputs) doc.source_outputs.push_back(ValueRef(graph, v));
  }
  doc.sampling = pf::ParamsToJson(graph.sampling);
  const Node* batch = FindBatch(graph);
  doc.batch = batch ? pf::ParamsToJson(batch->params) : json::object();
  doc.output = pf::ParamsToJson(graph.output);
  doc.graph = GraphJson(graph, placement);
  doc.fusion_groups = GroupDocs(graph, kernels, placement);
  doc.reference_chains = ReferenceDocs(graph);
  const BuiltKernels& a = kernels.artifact;
  doc.kernels = PlanKernelsDoc{pf::kKernelsFile, kernels.hash,  kernels.bytes,
                               a.cpu_targets,    a.cuda_target, a.cuda_note};

  doc.placement_device = placement.device;
  doc.placement = PlacementJson(graph, placement, profile);
  doc.decode = DecodeDoc(graph);
  doc.memory = MemoryDoc(graph, placement);
  return doc;
}

json PlanJson(const Graph& graph, const std::string& spec_text, const KernelRecord& kernels,
              const HardwareProfile* profile) {
  return BuildPlanDocument(graph, spec_text, kernels, profile).ToJson();
}

namespace {

// The report's "fusion groups" section: per group, its kernel, input, ops,
// output and decode pushdown.
std::string ReportFusionGroups(const Graph& graph, const KernelRecord& kernels, int count) {
  std::string r = "fusion groups: " + std::to_string(count) + "\n";
  for (int g = 0; g < count; ++g) {
    FusedChain chain = ChainForGroup(graph, g);
    std::vector<const Node*> members;
    for (const Node& node : graph.nodes) {
      if (node.fusion_group == g) members.push_back(&node);
    }
    const Node& first = *members.front();
    const Node& last = *members.back();
    const Value& in = graph.value(first.inputs[0]);
    const Value& out = graph.value(last.outputs[0]);
    r += "  group " + std::to_string(g) + ": kernel " + chain.symbol;
    if (g < static_cast<int>(kernels.artifact.kernels.size()) &&
        !kernels.artifact.kernels[g].cuda_symbol.empty()) {
      r += " (CUDA: " + kernels.artifact.kernels[g].cuda_symbol + ")";
    }
    r += "\n    input:  %" + in.name + ": " + chain.input.ToString();
    if (in.producer >= 0) r += "  (from " + NodeWhere(graph.nodes[in.producer]) + ")";
    r += "\n    ops:    ";
    for (size_t i = 0; i < members.size(); ++i) r += (i ? ", " : "") + NodeWhere(*members[i]);
    r += "\n    output: %" + out.name + ": " + chain.output.ToString();
    std::string field = BatchFieldOf(graph, last.outputs[0]);
    if (!field.empty()) {
      r += ", written straight into batch field `" + field + "`'s slot";
    }
    r += "\n    geometry: the resample ops compose into one resample per axis from the decoded "
         "image to the output grid (antialiased when downscaling); no intermediate image\n";
    r += "    pointwise: colour, normalize, layout and cast run in the same kernel\n";
    const Node* decode = in.producer >= 0 ? &graph.nodes[in.producer] : nullptr;
    if (decode != nullptr && decode->pushdown.decided && !decode->pushdown.roi) {
      r += "    decode pushdown: " + decode->pushdown.reason + "\n";
    } else if (decode != nullptr && decode->pushdown.decided) {
      const bool crops = ChainCrops(chain);
      if (crops || decode->pushdown.dct_scaling) {
        r += "    decode pushdown:";
        if (crops) r += " the composed crop window becomes the decoder's region of interest;";
        if (decode->pushdown.dct_scaling) {
          r += " DCT-scaled decode (1/2, 1/4, 1/8) of large downscales is available but off by "
               "default (`sluice run --dct-scaling`), because it changes pixels beyond the "
               "kernels' tolerance;";
        }
        r += " decided at compile time (plan.json \"decode\"), applied per sample\n";
      }
    }
  }
  return r;
}

// Resample and pointwise ops left out of every group, and the batch fields
// that run on the reference implementations ("" when there are none).
std::string ReportUnfused(const Graph& graph, const std::vector<ReferenceFieldChain>& references) {
  std::string unfused;
  for (const Node& node : graph.nodes) {
    if (!node.op || node.fusion_group >= 0) continue;
    OpClass c = node.op->op_class;
    if (c == OpClass::kResample || c == OpClass::kPointwise) {
      unfused += "  " + NodeWhere(node) + "\n";
    }
  }
  if (unfused.empty() && references.empty()) return "";
  std::string r = "\nunfused ops (run on the reference implementations):\n" + unfused;
  for (const ReferenceFieldChain& ref : references) {
    r += "  batch field `" + ref.field + "` runs per sample on the reference implementations: " +
         NodeWhere(graph.nodes[ref.decode]);
    for (NodeId n : ref.nodes) r += " -> " + NodeWhere(graph.nodes[n]);
    r += ", " + ref.chain.input.ToString() + " -> " + ref.chain.output.ToString() + "; about " +
         Fixed(kReferenceSlowdown, 0) +
         "x slower than a fused kernel, and the whole image is decoded (no region of "
         "interest)\n";
  }
  return r;
}

// Where the stages run; with a GPU split, what each group hands over.
std::string ReportPlacement(const Graph& graph, const EffectivePlacement& placement, int count) {
  if (placement.device == "cpu")
    return "\nplacement: every stage on cpu; " + placement.reason + "\n";
  std::string r = "\nplacement: " + placement.device + "; " + placement.reason + "\n";
  for (int g = 0; g < count; ++g) {
    const int k = placement.gpu_from[g];
    if (k < 0) continue;
    FusedChain chain = ChainForGroup(graph, g);
    std::vector<TensorType> types = ChainStepTypes(chain);
    std::string ops;
    for (size_t i = k; i < chain.steps.size(); ++i)
      ops += (ops.empty() ? "" : ", ") + chain.steps[i].op->name;
    r += "  group " + std::to_string(g) + ": steps " + std::to_string(k) + ".. (" + ops +
         ") run batch-wide on the GPU";
    if (k <= static_cast<int>(types.size())) {
      r += "; the CPU writes " + types[k - 1].ToString() + " (" +
           Fixed(static_cast<double>(types[k - 1].dims[0] * types[k - 1].dims[1] *
                                     types[k - 1].dims[2]),
                 0) +
           " bytes/sample) into pinned staging, which crosses the bus";
    }
    r += "\n";
  }
  return r;
}

// The kernel library: size, hash, CPU targets and CUDA.
std::string ReportKernels(const KernelRecord& kernels) {
  const BuiltKernels& a = kernels.artifact;
  std::string r = "kernels: " + std::string(pf::kKernelsFile) + " (" +
                  std::to_string(kernels.bytes) + " bytes, " + kernels.hash + ")\n  CPU targets:";
  for (const std::string& t : a.cpu_targets) r += " " + t;
  if (a.cpu_targets.empty()) r += " none";
  r += "\n  CUDA: " +
       (a.cuda_target.empty()
            ? "not built" + (a.cuda_note.empty() ? std::string() : " (" + a.cuda_note + ")")
            : a.cuda_target) +
       "\n";
  return r;
}

// The cost model's per-sample prediction and the placements it weighed.
std::string ReportCost(const Graph& graph, const EffectivePlacement& placement,
                       const HardwareProfile* profile,
                       const std::vector<ReferenceFieldChain>& references) {
  if (profile == nullptr) {
    return "cost model: no hardware profile given (compile with --profile hw.yaml, measured by "
           "`sluice profile`); no per-sample cost prediction\n";
  }
  if (!placement.cost) return "cost model: no prediction (no CPU budget)\n";
  const CostPrediction& c = *placement.cost;
  const HardwareProfile& hw = *profile;
  const PlacementDecision& d = graph.placement;
  std::string r = "cost model (docs/cost_model.md), profile: " +
                  (hw.machine.empty() ? std::string("unnamed") : hw.machine) + "\n";
  r +=
      "  image: " + Fixed(c.shape.width, 0) + "x" + Fixed(c.shape.height, 0) + ", " +
      Fixed(c.shape.file_bytes, 0) + " bytes" +
      (c.shape.from_profile ? " (the profile's dataset means)" : " (assumed: ImageNet's typical)") +
      "\n";
  r += "  per sample on one CPU core: read " + Ms(c.read_s) + " + decode " + Ms(c.decode_s);
  if (!references.empty()) {
    r += " (the whole image: a batch field runs on the reference implementations)";
  } else if (!c.decode_regions.empty()) {
    const DecodeRegion& reg = c.decode_regions.front();
    r += " (region of interest: Huffman over " + Fixed(100 * reg.rows_fraction, 0) +
         "% of the rows, IDCT/colour over " + Fixed(100 * reg.area_fraction, 0) +
         "% of the area -> " + Fixed(100 * reg.effective_fraction, 0) + "% of a full decode)";
  }
  r += " + fused kernels " + Ms(c.kernel_cpu_s);
  if (c.reference_cpu_s > 0) r += " + reference chains " + Ms(c.reference_cpu_s);
  r += " = " + Ms(c.cpu_s) + "\n";
  if (hw.gpu || c.gpu_s > 0 || c.h2d_bytes > 0) {
    r += "  GPU " + Ms(c.gpu_s) + " per sample; host-to-device " + Fixed(c.h2d_bytes, 0) +
         " bytes per sample";
    if (c.trainer_h2d_bytes > 0 && hw.gpu) {
      r += " (batches are handed over in host memory; a trainer on the GPU copies " +
           Fixed(c.trainer_h2d_bytes, 0) + " bytes per sample itself)";
    }
    r += "\n";
  } else {
    r += "  no GPU in the profile: nothing on the GPU, nothing over the bus\n";
  }
  r += "  predicted: " + DescribePrediction(c) + "; CPU budget " + std::to_string(d.cpu_budget) +
       " from " + d.cpu_budget_from + "\n";
  if (d.alternatives.empty()) return r;
  r += "  alternatives considered (predicted images/s at " + std::to_string(d.cpu_budget) +
       " CPU core(s)):\n";
  for (size_t i = 0; i < d.alternatives.size(); ++i) {
    const PlacementAlternative& alt = d.alternatives[i];
    r += std::string(static_cast<int>(i) == d.chosen ? "  * " : "    ") + alt.name + ": " +
         (alt.predicted
              ? Fixed(alt.images_per_second, 0) + " images/s (" + alt.limit + "-bound; cpu " +
                    Ms(alt.cpu_s_per_sample) + ", gpu " + Ms(alt.gpu_s_per_sample) + ", bus " +
                    Fixed(alt.h2d_bytes_per_sample, 0) + " B per sample)"
              : std::string("not predicted")) +
         (static_cast<int>(i) == d.chosen ? "  <- chosen" : "") + "\n";
  }
  r += "  why: " + d.reason + "\n";
  return r;
}

}  // namespace

std::string PlanReport(const Graph& graph, const KernelRecord& kernels,
                       const HardwareProfile* profile) {
  std::string r;
  r += "sluice plan report: " + graph.name + "\n";
  r += "spec: " + graph.spec_file + "\n";
  r += "compiler: sluice " + std::string(SLUICE_VERSION) + ", plan format " +
       std::to_string(pf::kFormatVersion) + "\n\n";
  const int count = CountFusionGroups(graph);
  const std::vector<ReferenceFieldChain> references = BuildReferenceChains(graph);
  r += ReportFusionGroups(graph, kernels, count);
  r += ReportUnfused(graph, references);
  if (!graph.notes.empty()) {
    r += "\nnotes:\n";
    for (const std::string& note : graph.notes) r += "  - " + note + "\n";
  }
  const EffectivePlacement placement = Effective(graph, kernels, profile);
  r += ReportPlacement(graph, placement, count);
  r += ReportKernels(kernels);
  r += ReportCost(graph, placement, profile, references);
  return r;
}

Result<std::string> WritePlan(const Graph& graph, const std::string& spec_text,
                              const KernelRecord& kernels, const std::string& out_dir,
                              const HardwareProfile* profile) {
  namespace fs = std::filesystem;
  SLUICE_RETURN_IF_ERROR(BuildPlanDocument(graph, spec_text, kernels, profile).Write(out_dir));
  std::string report = PlanReport(graph, kernels, profile);
  const fs::path path = fs::path(out_dir) / pf::kReportFile;
  SLUICE_RETURN_IF_ERROR(WriteFileAtomically(path.string(), report));
  return report;
}

}  // namespace sluice
