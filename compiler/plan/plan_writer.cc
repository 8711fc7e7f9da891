// The plan artifact writer (see plan_writer.h; layout in docs/plan.md).
#include "compiler/plan/plan_writer.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "compiler/plan/fused_chains.h"
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
  return device && std::holds_alternative<std::string>(device->value) ? device->AsString()
                                                                       : "auto";
}

// Placement is the cost model's job (issue 6); until it exists every stage
// runs on the CPU, and the reason says so.
std::string PlacementReason(const std::string& requested) {
  if (requested == "cpu") return "output.device is cpu";
  if (requested == "auto") {
    return "output.device is auto and the cost model that places stages is not built yet "
           "(issue 6): everything runs on the CPU";
  }
  return "output.device is " + requested +
         ", but GPU placement is not built yet (issue 6): stages run on the CPU and batches "
         "are handed over from host memory";
}

json ValueRef(const Graph& graph, ValueId id) {
  const Value& v = graph.value(id);
  return json{{"name", v.name}, {"type", v.type ? pf::TypeToJson(*v.type) : json(nullptr)}};
}

// The batch field fed by value `id`, or "".
std::string BatchFieldOf(const Graph& graph, ValueId id) {
  const Node* batch = FindBatch(graph);
  if (!batch) return "";
  for (size_t i = 0; i < batch->inputs.size() && i < batch->outputs.size(); ++i) {
    if (batch->inputs[i] != id) continue;
    std::string name = graph.value(batch->outputs[i]).name;
    if (name.starts_with(kBatchValuePrefix)) name = name.substr(std::strlen(kBatchValuePrefix));
    return name;
  }
  return "";
}

std::string NodeWhere(const Node& node) {
  std::string out = node.op ? node.op->name : "?";
  if (node.mark.valid()) out += " (line " + std::to_string(node.mark.line) + ")";
  return out;
}

bool HasOp(const FusedChain& chain, std::initializer_list<std::string_view> names) {
  for (const ChainStep& step : chain.steps) {
    for (std::string_view n : names) {
      if (step.op && step.op->name == n) return true;
    }
  }
  return false;
}

}  // namespace

json PlanJson(const Graph& graph, const std::string& spec_text, const KernelRecord& kernels) {
  json plan;
  plan["format_version"] = pf::kFormatVersion;
  plan["compiler_version"] = SLUICE_VERSION;
  plan["spec_hash"] = pf::HashBytes(spec_text);
  plan["spec_file"] = graph.spec_file;
  plan["name"] = graph.name;

  const Node* source = FindSource(graph);
  json src{{"format", source ? source->op->name : ""},
           {"params", source ? pf::ParamsToJson(source->params) : json::object()},
           {"outputs", json::array()}};
  if (source) {
    for (ValueId v : source->outputs) src["outputs"].push_back(ValueRef(graph, v));
  }
  plan["source"] = src;
  plan["sampling"] = pf::ParamsToJson(graph.sampling);
  const Node* batch = FindBatch(graph);
  plan["batch"] = batch ? pf::ParamsToJson(batch->params) : json::object();
  plan["output"] = pf::ParamsToJson(graph.output);

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
            {"device", node.device == Device::kGpu ? "gpu" : "cpu"}};
    if (node.mark.valid()) jn["line"] = node.mark.line;
    for (ValueId v : node.inputs) jn["inputs"].push_back(ValueRef(graph, v));
    for (ValueId v : node.outputs) jn["outputs"].push_back(ValueRef(graph, v));
    nodes.push_back(std::move(jn));
  }
  plan["graph"] = json{{"nodes", nodes}, {"notes", graph.notes}};

  const json args = kernels.artifact.arg_names;
  json groups = json::array();
  const int count = CountFusionGroups(graph);
  for (int g = 0; g < count; ++g) {
    FusedChain chain = ChainForGroup(graph, g);
    json steps = json::array(), node_ids = json::array();
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      if (graph.nodes[n].fusion_group == g) node_ids.push_back(n);
    }
    for (const ChainStep& step : chain.steps) {
      steps.push_back(json{{"op", step.op->name},
                           {"op_id", step.op_id},
                           {"params", pf::ParamsToJson(step.params)}});
    }
    std::string cuda_symbol;
    if (g < static_cast<int>(kernels.artifact.kernels.size())) {
      cuda_symbol = kernels.artifact.kernels[g].cuda_symbol;
    }
    const Node& last = graph.nodes[node_ids.back().get<size_t>()];
    const Node& first = graph.nodes[node_ids.front().get<size_t>()];
    groups.push_back(json{
        {"id", g},
        {"symbol", chain.symbol},
        {"cuda_symbol", cuda_symbol.empty() ? json(nullptr) : json(cuda_symbol)},
        {"nodes", node_ids},
        {"input", graph.value(first.inputs[0]).name},
        {"input_type", pf::TypeToJson(chain.input)},
        {"output", graph.value(last.outputs[0]).name},
        {"output_type", pf::TypeToJson(chain.output)},
        {"batch_field", BatchFieldOf(graph, last.outputs[0])},
        {"steps", steps},
        {"abi",
         json{{"signature", "int SYMBOL(halide_buffer_t* in, SCALAR ARGS..., halide_buffer_t* out)"},
              {"reference", "ops/fusion/kernel_abi.h"},
              {"args", args}}}});
  }
  plan["fusion_groups"] = groups;

  const KernelArtifact& a = kernels.artifact;
  plan["kernels"] = json{{"file", pf::kKernelsFile},
                         {"hash", kernels.hash},
                         {"bytes", kernels.bytes},
                         {"cpu_targets", a.cpu_targets},
                         {"cuda_target", a.cuda_target.empty() ? json(nullptr) : json(a.cuda_target)},
                         {"cuda_note", a.cuda_note}};

  const std::string requested = OutputDevice(graph);
  json placed = json::array();
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    placed.push_back(graph.nodes[n].device == Device::kGpu ? "gpu" : "cpu");
  }
  plan["placement"] = json{{"requested", requested},
                           {"device", "cpu"},
                           {"reason", PlacementReason(requested)},
                           {"nodes", placed}};
  return plan;
}

std::string PlanReport(const Graph& graph, const KernelRecord& kernels) {
  std::string r;
  r += "sluice plan report: " + graph.name + "\n";
  r += "spec: " + graph.spec_file + "\n";
  r += "compiler: sluice " + std::string(SLUICE_VERSION) + ", plan format " +
       std::to_string(pf::kFormatVersion) + "\n\n";

  const int count = CountFusionGroups(graph);
  r += "fusion groups: " + std::to_string(count) + "\n";
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
    const bool crops = HasOp(chain, {"crop", "center_crop", "random_resized_crop"});
    const bool rescales = HasOp(chain, {"resize", "random_resized_crop"});
    if (crops || rescales) {
      r += "    decode pushdown:";
      if (crops) r += " the composed crop window becomes the decoder's region of interest;";
      if (rescales) {
        r += " DCT-scaled decode (1/2, 1/4, 1/8) of large downscales is available but off by default"
             " (`sluice run --dct-scaling`), because it changes pixels beyond the kernels' tolerance;";
      }
      r += " the runtime does this per sample\n";
    }
  }

  std::string unfused;
  for (const Node& node : graph.nodes) {
    if (!node.op || node.fusion_group >= 0) continue;
    OpClass c = node.op->op_class;
    if (c == OpClass::kResample || c == OpClass::kPointwise) {
      unfused += "  " + NodeWhere(node) + "\n";
    }
  }
  if (!unfused.empty()) r += "\nunfused ops (run on the reference implementations):\n" + unfused;
  if (!graph.notes.empty()) {
    r += "\nnotes:\n";
    for (const std::string& note : graph.notes) r += "  - " + note + "\n";
  }

  const std::string requested = OutputDevice(graph);
  r += "\nplacement: every stage on cpu; " + PlacementReason(requested) + "\n";
  const KernelArtifact& a = kernels.artifact;
  r += "kernels: " + std::string(pf::kKernelsFile) + " (" + std::to_string(kernels.bytes) +
       " bytes, " + kernels.hash + ")\n  CPU targets:";
  for (const std::string& t : a.cpu_targets) r += " " + t;
  if (a.cpu_targets.empty()) r += " none";
  r += "\n  CUDA: " + (a.cuda_target.empty() ? "not built" + (a.cuda_note.empty() ? std::string()
                                                                               : " (" + a.cuda_note + ")")
                                             : a.cuda_target) +
       "\n";
  r += "cost model: not built yet (issue 6); no per-sample cost prediction\n";
  return r;
}

Status WritePlan(const Graph& graph, const std::string& spec_text, const KernelRecord& kernels,
                 const std::string& out_dir) {
  namespace fs = std::filesystem;
  auto write = [&](const std::string& name, const std::string& text) -> Status {
    fs::path path = fs::path(out_dir) / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return MakeError(ErrorCode::kIo, "cannot write `" + path.string() + "`");
    return Ok();
  };
  SLUICE_RETURN_IF_ERROR(write(pf::kPlanFile, PlanJson(graph, spec_text, kernels).dump(2) + "\n"));
  SLUICE_RETURN_IF_ERROR(write(pf::kReportFile, PlanReport(graph, kernels)));
  return Ok();
}

Status CompilePlan(const Graph& graph, const std::string& spec_text, const std::string& out_dir,
                   const CodegenOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "`" + out_dir + "` exists and is not a directory",
                     "a plan is a directory; pick another name for -o");
  }
  fs::create_directories(out_dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kIo, "cannot create `" + out_dir + "`: " + ec.message());
  }
  std::vector<FusedChain> chains = BuildFusedChains(graph);
  auto artifact = CompileKernels(chains, out_dir, options);
  if (!artifact) return std::unexpected(artifact.error());
  KernelRecord record{*artifact, "", 0};
  const std::string so = (fs::path(out_dir) / pf::kKernelsFile).string();
  auto hash = pf::HashFile(so);
  if (!hash) {
    return MakeError(ErrorCode::kInternal,
                     "the code generator did not leave " + std::string(pf::kKernelsFile) +
                         " in `" + out_dir + "`: " + hash.error().message);
  }
  record.hash = *hash;
  record.bytes = static_cast<int64_t>(fs::file_size(so, ec));
  return WritePlan(graph, spec_text, record, out_dir);
}

}  // namespace sluice
