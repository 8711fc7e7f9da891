// The IR printer: a stable text form for golden tests and `--emit=ir`.
// The format is documented at PrintGraph in compiler/ir/ir.h.
#include <string>

#include "compiler/ir/ir.h"

namespace sluice {
namespace {

const ParamDef* FindDef(const std::vector<ParamDef>& defs, const std::string& name) {
  for (const ParamDef& def : defs) {
    if (def.name == name) return &def;
  }
  return nullptr;
}

// "a=1, b="x"" over a ParamList in name order (std::map order).
std::string FormatParams(const std::vector<ParamDef>* defs, const ParamList& params) {
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += ", ";
    out += name + "=" + FormatParam(defs ? FindDef(*defs, name) : nullptr, value);
  }
  return out;
}

std::string TypeText(const Value& value) {
  return value.type ? value.type->ToString() : std::string("?type");
}

}  // namespace

std::string FormatParam(const ParamDef* def, const ParamValue& value) {
  if (def != nullptr && def->type == ParamType::kAutoInt &&
      std::holds_alternative<int64_t>(value.value) && value.AsInt() == -1) {
    return "auto";
  }
  if (def != nullptr && def->type == ParamType::kSection &&
      std::holds_alternative<ParamList>(value.value)) {
    std::string out = "{";
    bool first = true;
    for (const auto& [name, field] : value.AsSection()) {
      if (!first) out += ", ";
      first = false;
      out += name + ": " + FormatParam(FindDef(def->fields, name), field);
    }
    return out + "}";
  }
  return value.ToString();
}

std::string PrintGraph(const Graph& graph) {
  std::string out = "sluice.ir \"" + graph.name + "\"";
  if (!graph.spec_file.empty()) out += "  (spec: " + graph.spec_file + ")";
  out += "\n";
  if (!graph.sampling.empty()) {
    out += "sampling: " + FormatParams(&SamplingParams(), graph.sampling) + "\n";
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    std::string line;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (i) line += ", ";
      ValueId v = node.outputs[i];
      if (v >= 0 && v < static_cast<ValueId>(graph.values.size())) {
        line += "%" + graph.values[v].name + ": " + TypeText(graph.values[v]);
      } else {
        line += "%<bad id " + std::to_string(v) + ">";
      }
    }
    line += " = ";
    line += node.op ? node.op->name : std::string("<null op>");
    line += "(";
    std::string args;
    for (ValueId v : node.inputs) {
      if (!args.empty()) args += ", ";
      args += v >= 0 && v < static_cast<ValueId>(graph.values.size())
                  ? "%" + graph.values[v].name
                  : "%<bad id " + std::to_string(v) + ">";
    }
    std::string params = FormatParams(node.op ? &node.op->params : nullptr, node.params);
    if (!args.empty() && !params.empty()) args += ", ";
    line += args + params + ")";

    std::string notes;
    auto note = [&](const std::string& s) { notes += (notes.empty() ? "" : ", ") + s; };
    if (node.op_id != static_cast<int>(n)) note("op_id=" + std::to_string(node.op_id));
    if (node.fusion_group >= 0) note("fusion=" + std::to_string(node.fusion_group));
    if (node.device == Device::kGpu) note("device=gpu");
    if (node.pushdown.decided) {
      note(std::string("roi=") + (node.pushdown.roi ? "yes" : "no"));
      note(std::string("dct_scaling=") + (node.pushdown.dct_scaling ? "opt-in" : "no"));
    }
    if (!notes.empty()) line += "  [" + notes + "]";
    out += line + "\n";
  }
  if (!graph.output.empty()) {
    out += "output: " + FormatParams(&OutputParams(), graph.output) + "\n";
  }
  if (graph.placement.device != "cpu") {
    out += "placement: device=\"" + graph.placement.device + "\"\n";
  }
  for (const Node& node : graph.nodes) {
    if (!node.pushdown.decided || node.outputs.empty()) continue;
    out += "pushdown: %" + graph.value(node.outputs[0]).name + ": " + node.pushdown.reason + "\n";
  }
  if (graph.memory.planned) {
    for (const FieldMemory& f : graph.memory.fields) {
      out += "memory: " + f.field + ": " + std::string(DTypeName(f.dtype)) + "[" +
             std::to_string(graph.memory.batch_size);
      for (int64_t d : f.sample_shape) out += "," + std::to_string(d);
      out += "] " + std::to_string(f.bytes_per_sample) + " B/sample at offset " +
             std::to_string(f.offset);
      if (f.staging_bytes_per_sample > 0) {
        out += "; staged for the GPU: " + std::to_string(f.staging_bytes_per_sample) +
               " B/sample at offset " + std::to_string(f.staged_offset);
      }
      out += "\n";
    }
    out += "memory: batch buffer " + std::to_string(graph.memory.batch_bytes) + " B";
    if (graph.memory.staged_batch_bytes != graph.memory.batch_bytes) {
      out += " (" + std::to_string(graph.memory.staged_batch_bytes) + " B with GPU staging)";
    }
    out += "\n";
  }
  for (const std::string& note : graph.notes) out += "note: " + note + "\n";
  return out;
}

}  // namespace sluice
