#include "compiler/schema/op_reference.h"

#include <cctype>
#include <vector>

#include "compiler/ir/ir.h"
#include "ops/registry.h"

namespace sluice {
namespace {

// Markdown table cells must not contain `|` or newlines.
std::string Cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string Num(double d) {
  ParamValue v{d};
  return v.ToString();
}

std::string Allowed(const ParamDef& def) {
  std::string out;
  if (!def.choices.empty()) {
    for (size_t i = 0; i < def.choices.size(); ++i) {
      out += (i ? ", `" : "`") + def.choices[i] + "`";
    }
  }
  if (def.min || def.max) {
    if (!out.empty()) out += "; ";
    if (def.min && def.max) {
      out += Num(*def.min) + " ≤ x ≤ " + Num(*def.max);
    } else if (def.min) {
      out += "x ≥ " + Num(*def.min);
    } else {
      out += "x ≤ " + Num(*def.max);
    }
    if (def.type == ParamType::kIntList || def.type == ParamType::kFloatList) out += " (each)";
  }
  if (!def.list_lengths.empty()) {
    if (!out.empty()) out += "; ";
    out += "length ";
    for (size_t i = 0; i < def.list_lengths.size(); ++i) {
      out += (i ? " or " : "") + std::to_string(def.list_lengths[i]);
    }
  }
  return out;
}

// A default as a user would write it: strings bare (`rgb`), the rest as printed
// in the IR (`[0.08,1]`, `auto`, `{max_fraction: 0.001, policy: "skip"}`).
std::string DefaultText(const ParamDef& def) {
  if (const auto* s = std::get_if<std::string>(&def.default_value->value)) return *s;
  return FormatParam(&def, *def.default_value);
}

void ParamTable(std::string& out, const std::vector<ParamDef>& defs, const std::string& prefix) {
  if (defs.empty()) {
    if (prefix.empty()) out += "No parameters.\n\n";
    return;
  }
  if (prefix.empty()) {
    out += "| Parameter | Type | Default | Allowed | Description |\n";
    out += "|---|---|---|---|---|\n";
  }
  for (const ParamDef& def : defs) {
    std::string dflt = def.required        ? "required"
                       : def.default_value ? "`" + DefaultText(def) + "`"
                                           : "—";
    out += "| `" + prefix + def.name + "` | " + ParamTypeName(def.type) + " | " + Cell(dflt) +
           " | " + Cell(Allowed(def)) + " | " + Cell(def.doc) + " |\n";
    if (def.type == ParamType::kSection) ParamTable(out, def.fields, prefix + def.name + ".");
  }
  if (prefix.empty()) out += "\n";
}

void OpEntry(std::string& out, const OpDef& op) {
  out += "#### `" + op.name + "`\n\n";
  out += op.doc + "\n\n";
  std::string facts = "Class: " + std::string(OpClassName(op.op_class));
  if (op.op_class == OpClass::kSource) {
    facts += ". Outputs: ";
    for (size_t i = 0; i < op.output_names.size(); ++i) {
      facts += (i ? ", `" : "`") + op.output_names[i] + "`";
    }
  } else if (op.num_inputs < 0) {
    facts += ". Inputs: one per field";
  }
  if (op.random) facts += ". Random: draws per sample, keyed by (seed, epoch, sample, op id)";
  out += facts + ".\n\n";
  ParamTable(out, op.params, "");
}

}  // namespace

std::string OpReferenceMarkdown() {
  std::string out;
  out += "<!-- Generated from the op registry by `sluice ops --markdown`; do not edit. -->\n\n";
  out += "## Op reference\n\n";
  out +=
      "Graph ops (`graph:`): each step is `- OP: {in: TENSOR, out: TENSOR, ...params}`; `in` "
      "defaults to the "
      "previous step's output and `out` to the input's name.\n\n";

  out += "### Sources (`source:`)\n\n";
  out +=
      "`source: {format: NAME, ...}` picks one of these; its parameters sit beside "
      "`format`.\n\n";
  for (const OpDef* op : OpsOfClass(OpClass::kSource)) OpEntry(out, *op);

  for (OpClass c : {OpClass::kDecode, OpClass::kResample, OpClass::kPointwise, OpClass::kDevice}) {
    std::vector<const OpDef*> ops = OpsOfClass(c);
    if (ops.empty()) continue;
    std::string title(OpClassName(c));
    if (!title.empty()) title[0] = static_cast<char>(std::toupper(title[0]));
    out += "### " + title + " ops (`graph:`)\n\n";
    for (const OpDef* op : ops) OpEntry(out, *op);
  }

  out += "### Batch (`batch:`)\n\n";
  for (const OpDef* op : OpsOfClass(OpClass::kBatch)) OpEntry(out, *op);

  out += "### Sampling (`sampling:`)\n\n";
  ParamTable(out, SamplingParams(), "");
  out += "### Output (`output:`)\n\n";
  ParamTable(out, OutputParams(), "");
  while (out.size() >= 2 && out.ends_with("\n\n")) out.pop_back();
  return out;
}

Result<std::string> ExtractGenerated(const std::string& document) {
  size_t begin = document.find(kGeneratedBegin);
  if (begin == std::string::npos) {
    return MakeError(ErrorCode::kNotFound, std::string("no marker line `") + kGeneratedBegin + "`");
  }
  size_t body = document.find('\n', begin);
  body = body == std::string::npos ? document.size() : body + 1;
  size_t end = document.find(kGeneratedEnd, body);
  if (end == std::string::npos) {
    return MakeError(ErrorCode::kNotFound,
                     std::string("no marker line `") + kGeneratedEnd + "` after the begin marker");
  }
  return document.substr(body, end - body);
}

Result<std::string> SpliceGenerated(const std::string& document, const std::string& generated) {
  Result<std::string> old = ExtractGenerated(document);
  if (!old) return std::unexpected(old.error());
  size_t begin = document.find(kGeneratedBegin);
  size_t body = document.find('\n', begin);
  body = body == std::string::npos ? document.size() : body + 1;
  std::string text = generated;
  if (!text.empty() && !text.ends_with("\n")) text += "\n";
  std::string out = document.substr(0, body);
  if (body == document.size() && !out.ends_with("\n")) out += "\n";
  return out + text + document.substr(body + old->size());
}

}  // namespace sluice
