// `--emit=spec`: the validated spec written back as YAML, defaults explicit.
//
// Every section is a flow map on one line (graph steps one per line), params in
// name order, so the text is stable and diffable. Strings that could be read
// back as something else (numbers, booleans, null in any case such as NULL or
// True, text with YAML punctuation such as `${DATA}`) are double-quoted, map
// keys (batch field names) as well as values, so the output always parses
// back to the same spec.
#include <cctype>
#include <string>

#include "cli/cli.h"
#include "compiler/spec/spec.h"
#include "ops/registry.h"

namespace sluice::cli {
namespace {

// Plain scalars YAML (1.1 or 1.2, as yaml-cpp reads them) would take for a
// null, a bool or a number, in any case: NULL, Null, True, YES, .inf, ...
bool YamlWord(const std::string& s) {
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const char* const kWords[] = {"null", "true", "false", "yes", "no",  "on",      "off",
                                       "y",    "n",    "~",     "inf", "nan", "infinity"};
  for (const char* w : kWords) {
    if (lower == w) return true;
  }
  return false;
}

bool PlainSafe(const std::string& s) {
  if (s.empty() || YamlWord(s)) return false;
  if (!std::isalpha(static_cast<unsigned char>(s[0])) && s[0] != '_') return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-' &&
        c != '/') {
      return false;
    }
  }
  return true;
}

std::string Str(const std::string& s) { return PlainSafe(s) ? s : ParamValue{s}.ToString(); }

const ParamDef* Find(const std::vector<ParamDef>* defs, const std::string& name) {
  if (defs == nullptr) return nullptr;
  for (const ParamDef& d : *defs) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::string Yaml(const ParamDef* def, const ParamValue& value);

std::string YamlMap(const std::vector<ParamDef>* defs, const ParamList& params) {
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += ", ";
    out += name + ": " + Yaml(Find(defs, name), value);
  }
  return out;
}

std::string Yaml(const ParamDef* def, const ParamValue& value) {
  if (def != nullptr && def->type == ParamType::kAutoInt &&
      std::holds_alternative<int64_t>(value.value) && value.AsInt() == -1) {
    return "auto";
  }
  if (const auto* s = std::get_if<std::string>(&value.value)) return Str(*s);
  if (const auto* m = std::get_if<std::map<std::string, std::string>>(&value.value)) {
    std::string out;
    for (const auto& [k, v] : *m) out += (out.empty() ? "" : ", ") + Str(k) + ": " + Str(v);
    return "{" + out + "}";
  }
  if (const auto* section = std::get_if<ParamList>(&value.value)) {
    return "{" + YamlMap(def ? &def->fields : nullptr, *section) + "}";
  }
  return value.ToString();  // bools, numbers and lists print as valid YAML already
}

// The name the user wrote: the front end renames the k-th rewrite of `image`
// to `image.k`, and user names cannot contain a dot, so the suffix is dropped.
// Steps are emitted in topological order, where a plain name reads the latest
// write, so the emitted text resolves to the same graph.
std::string UserName(const std::string& name) { return name.substr(0, name.find('.')); }

std::string Names(const std::vector<std::string>& names) {
  if (names.size() == 1) return Str(UserName(names[0]));
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + Str(UserName(n));
  return "[" + out + "]";
}

}  // namespace

std::string EmitSpecYaml(const Spec& spec) {
  std::string out = "sluice: " + std::to_string(spec.version) + "\n";
  out += "name: " + Str(spec.name) + "\n";
  if (spec.source.op != nullptr) {
    std::string params = YamlMap(&spec.source.op->params, spec.source.params);
    out +=
        "source: {format: " + spec.source.op->name + (params.empty() ? "" : ", ") + params + "}\n";
  }
  if (!spec.sampling.empty())
    out += "sampling: {" + YamlMap(&SamplingParams(), spec.sampling) + "}\n";
  out += "graph:\n";
  for (const SpecStep& step : spec.graph) {
    if (step.op == nullptr) continue;
    std::string body = "in: " + Names(step.inputs) + ", out: " + Names(step.outputs);
    std::string params = YamlMap(&step.op->params, step.params);
    if (!params.empty()) body += ", " + params;
    out += "  - " + step.op->name + ": {" + body + "}\n";
  }
  if (spec.batch.op != nullptr) {
    out += "batch: {" + YamlMap(&spec.batch.op->params, spec.batch.params) + "}\n";
  }
  if (!spec.output.empty()) out += "output: {" + YamlMap(&OutputParams(), spec.output) + "}\n";
  return out;
}

}  // namespace sluice::cli
