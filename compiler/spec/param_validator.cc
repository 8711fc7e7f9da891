// Generic parameter validation for the spec front end (ParamValidator): a
// map of parameters checked against the op registry's ParamDefs (types,
// ranges, choices, list lengths, required, ${VAR} only in strings), defaults
// filled, then the op's `check`; and the example values and "expected ..."
// wording its diagnostics use.
#include "compiler/spec/param_validator.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include "ops/registry.h"

namespace sluice::spec_internal {
namespace {

// An example value for a parameter, for "missing required" hints.
// An `auto`-capable integer whose default is auto (stored as -1) shows `auto`,
// the spelling a spec uses, never the sentinel.
std::string ExampleValue(const ParamDef& def) {
  if (def.type == ParamType::kAutoInt && (!def.default_value || def.default_value->AsInt() == -1)) {
    return "auto";
  }
  if (def.default_value) return def.default_value->ToString();
  const std::string& n = def.name;
  if (n == "path") return "\"${DATA}/train\"";  // quoted: valid in a flow map too
  if (n == "fields") return "{image: image, label: cls}";
  if (n == "mean") return "[0.485, 0.456, 0.406]";
  if (n == "std") return "[0.229, 0.224, 0.225]";
  if (n == "size") {
    if (def.type == ParamType::kIntList) return "[224, 224]";
    return "256";
  }
  auto scalar = [&](bool is_int) -> std::string {
    double v = def.min ? *def.min : (def.max ? std::min(*def.max, 1.0) : 1.0);
    if (def.min && def.max) v = is_int ? *def.min : (*def.min + *def.max) / 2;
    if (is_int) return std::to_string(static_cast<int64_t>(v < 1 && !def.min ? 1 : v));
    return FormatNumber(v);
  };
  switch (def.type) {
    case ParamType::kBool:
      return "true";
    case ParamType::kInt:
    case ParamType::kAutoInt:
      return scalar(true);
    case ParamType::kFloat:
      return scalar(false);
    case ParamType::kString:
      return "value";
    case ParamType::kEnum:
      return def.choices.empty() ? "value" : def.choices.front();
    case ParamType::kIntList:
    case ParamType::kFloatList: {
      int len = 2;
      if (!def.list_lengths.empty()) len = def.list_lengths.back();
      std::string one = scalar(def.type == ParamType::kIntList);
      std::string out = "[";
      for (int i = 0; i < len; ++i) out += (i ? ", " : "") + one;
      return out + "]";
    }
    case ParamType::kStringMap:
      return "{name: value}";
    case ParamType::kSection:
      return "{}";
  }
  return "value";
}

std::string LengthsText(const std::vector<int>& lengths) {
  std::vector<std::string> parts;
  for (int l : lengths) parts.push_back(std::to_string(l));
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += (i + 1 == parts.size()) ? " or " : ", ";
    out += parts[i];
  }
  return out;
}

// "an integer", "a list of 2 numbers", ...
std::string Expected(const ParamDef& def) {
  auto list = [&](const char* one, const char* many) {
    const auto& l = def.list_lengths;
    if (l.empty()) return std::string("a list of ") + many;
    const bool scalar_ok = std::find(l.begin(), l.end(), 1) != l.end();
    std::vector<int> others;
    for (int x : l)
      if (x != 1) others.push_back(x);
    if (scalar_ok && others.empty()) return std::string(one) + " or a list of 1";
    const std::string lens = LengthsText(others);
    const std::string lst = "a list of " + lens + " " + many;
    return scalar_ok ? std::string(one) + " or " + lst : lst;
  };
  switch (def.type) {
    case ParamType::kBool:
      return "`true` or `false`";
    case ParamType::kInt:
      return "an integer";
    case ParamType::kFloat:
      return "a number";
    case ParamType::kString:
      return "a string";
    case ParamType::kEnum:
      return "one of " + TickList(def.choices);
    case ParamType::kIntList:
      return list("an integer", "integers");
    case ParamType::kFloatList:
      return list("a number", "numbers");
    case ParamType::kAutoInt:
      return "`auto` or an integer";
    case ParamType::kStringMap:
      return "a map of names to strings";
    case ParamType::kSection:
      return "a map";
  }
  return "?";
}

std::string RangeText(const ParamDef& def) {
  if (def.min && def.max) {
    return "between " + FormatNumber(*def.min) + " and " + FormatNumber(*def.max);
  }
  if (def.min) return "at least " + FormatNumber(*def.min);
  if (def.max) return "at most " + FormatNumber(*def.max);
  return "";
}

bool InRange(const ParamDef& def, double v) {
  return (!def.min || v >= *def.min) && (!def.max || v <= *def.max);
}

}  // namespace

// was reported. `owner` is where "missing required" errors point.
bool ParamValidator::Validate(
    const std::vector<Entry>& entries, const std::vector<ParamDef>& defs, const Scope& scope,
    const SourceMark& owner, const std::vector<std::string>& extra_keys, ParamList& out,
    std::map<std::string, SourceMark>& marks,
    const std::function<std::vector<ParamIssue>(const ParamList&)>& check) {
  bool ok = true;
  std::set<std::string> given;
  for (const Entry& e : entries) {
    const ParamDef* def = nullptr;
    for (const ParamDef& d : defs)
      if (d.name == e.key) def = &d;
    if (!def) {
      std::vector<std::string> names;
      for (const ParamDef& d : defs) names.push_back(d.name);
      for (const std::string& k : extra_keys) names.push_back(k);
      std::string hint;
      if (std::string near = DidYouMean(e.key, names); !near.empty()) {
        hint = "did you mean " + Tick(near) + "?";
      } else if (names.empty()) {
        hint = Tick(scope.qual) + " takes no " + scope.noun + "s";
      } else {
        hint = "valid " + scope.noun + "s: " + TickList(names);
      }
      r_.Error(e.key_mark, "unknown " + scope.noun + " " + Tick(e.key) + " in " + Tick(scope.qual),
               hint);
      ok = false;
      continue;
    }
    given.insert(def->name);
    marks[def->name] = e.value_mark;
    std::optional<ParamValue> v = Convert(*def, e, scope, marks);
    if (v) {
      out[def->name] = std::move(*v);
    } else {
      ok = false;
    }
  }
  for (const ParamDef& d : defs) {
    if (!d.required || given.contains(d.name)) continue;
    const std::string example = d.name + ": " + ExampleValue(d);
    r_.Error(owner,
             "missing required " + scope.noun + " " + Tick(d.name) + " in " + Tick(scope.qual),
             "add it, e.g. " + Tick(scope.op_style ? scope.qual + ": {" + example + "}" : example));
    ok = false;
  }
  if (!ok) {
    // Keep the list usable by later stages: invalid values fall back to
    // their defaults.
    out = WithDefaults(defs, std::move(out));
    return false;
  }
  out = WithDefaults(defs, std::move(out));
  if (check) {
    for (const ParamIssue& issue : check(out)) {
      auto m = marks.find(issue.param);
      r_.Error(m != marks.end() ? m->second : owner, issue.message, issue.hint);
      ok = false;
    }
  }
  return ok;
}

std::string ParamValidator::Qual(const Scope& scope, const std::string& name) const {
  return Tick(scope.qual + "." + name);
}

void ParamValidator::TypeError(const ParamDef& def, const Scope& scope, const SourceMark& mark,
                               const YAML::Node& got, bool element) {
  const std::string who =
      element ? "each element of " + Qual(scope, def.name) : Qual(scope, def.name);
  r_.Error(mark,
           who + " must be " + (element ? ElementExpected(def) : Expected(def)) + ", got " +
               Describe(got),
           "e.g. " + Tick(def.name + ": " + ExampleValue(def)));
}

std::string ParamValidator::ElementExpected(const ParamDef& def) {
  return def.type == ParamType::kIntList ? "an integer" : "a number";
}

bool ParamValidator::VariableError(const ParamDef& def, const Scope& scope, const SourceMark& mark,
                                   const YAML::Node& node) {
  if (!node.IsScalar() || !HasVariable(node.Scalar())) return false;
  r_.Error(mark,
           Qual(scope, def.name) + " uses " + Tick(node.Scalar()) +
               ", but variables are only allowed in string fields",
           "write " + Expected(def) +
               " here; variables bind when the plan is loaded, after "
               "compilation");
  return true;
}

bool ParamValidator::RangeCheck(const ParamDef& def, const Scope& scope, const SourceMark& mark,
                                double v, const std::string& text, bool element) {
  if (InRange(def, v)) return true;
  const std::string who =
      element ? "each element of " + Qual(scope, def.name) : Qual(scope, def.name);
  r_.Error(mark, who + " must be " + RangeText(def) + ", got " + Tick(text),
           "e.g. " + Tick(def.name + ": " + ExampleValue(def)));
  return false;
}

std::optional<ParamValue> ParamValidator::Convert(const ParamDef& def, const Entry& e,
                                                  const Scope& scope,
                                                  std::map<std::string, SourceMark>& marks) {
  const YAML::Node& n = e.value;
  const SourceMark& mark = e.value_mark;
  const bool scalar = n.IsScalar();
  const std::string text = scalar ? n.Scalar() : std::string();
  switch (def.type) {
    case ParamType::kString: {
      if (!scalar) break;
      if (auto err = VariableSyntaxError(text); !err.empty()) {
        r_.Error(mark, "bad variable reference in " + Qual(scope, def.name) + ": " + err,
                 "write `${NAME}` with NAME made of letters, digits and `_`");
        return std::nullopt;
      }
      return ParamValue{text};
    }
    case ParamType::kBool: {
      if (VariableError(def, scope, mark, n)) return std::nullopt;
      if (!scalar || IsQuoted(n)) break;
      if (auto b = ParseBoolText(text)) return ParamValue{*b};
      break;
    }
    case ParamType::kInt:
    case ParamType::kAutoInt: {
      if (VariableError(def, scope, mark, n)) return std::nullopt;
      if (!scalar) break;
      if (def.type == ParamType::kAutoInt && text == "auto") return ParamValue{int64_t{-1}};
      if (IsQuoted(n)) break;
      auto v = ParseIntText(text);
      if (!v) break;
      if (!RangeCheck(def, scope, mark, static_cast<double>(*v), text, false)) {
        return std::nullopt;
      }
      return ParamValue{*v};
    }
    case ParamType::kFloat: {
      if (VariableError(def, scope, mark, n)) return std::nullopt;
      if (!scalar || IsQuoted(n)) break;
      auto v = ParseFloatText(text);
      if (!v) break;
      if (!RangeCheck(def, scope, mark, *v, text, false)) return std::nullopt;
      return ParamValue{*v};
    }
    case ParamType::kEnum: {
      if (VariableError(def, scope, mark, n)) return std::nullopt;
      if (!scalar) break;
      if (std::find(def.choices.begin(), def.choices.end(), text) != def.choices.end()) {
        return ParamValue{text};
      }
      std::string near = DidYouMean(text, def.choices);
      r_.Error(mark, Qual(scope, def.name) + " must be " + Expected(def) + ", got " + Tick(text),
               near.empty() ? "" : "did you mean " + Tick(near) + "?");
      return std::nullopt;
    }
    case ParamType::kIntList:
    case ParamType::kFloatList:
      return ConvertList(def, e, scope);
    case ParamType::kStringMap: {
      if (!n.IsMap()) break;
      std::map<std::string, std::string> m;
      bool ok = true;
      for (const Entry& f : MapEntries(r_, n)) {
        if (!f.value.IsScalar()) {
          r_.Error(f.value_mark,
                   Tick(scope.qual + "." + def.name + "." + f.key) + " must be a string, got " +
                       Describe(f.value),
                   "e.g. " + Tick(def.name + ": " + ExampleValue(def)));
          ok = false;
          continue;
        }
        m[f.key] = f.value.Scalar();
        marks[def.name + "." + f.key] = f.value_mark;
      }
      if (!ok) return std::nullopt;
      return ParamValue{m};
    }
    case ParamType::kSection: {
      if (!n.IsMap()) break;
      ParamList nested;
      std::map<std::string, SourceMark> nested_marks;
      Scope inner{scope.qual + "." + def.name, "key", false};
      bool ok = Validate(MapEntries(r_, n), def.fields, inner, e.key_mark, {}, nested, nested_marks,
                         nullptr);
      for (auto& [k, m] : nested_marks) marks[def.name + "." + k] = m;
      if (!ok) return std::nullopt;
      return ParamValue{nested};
    }
  }
  TypeError(def, scope, mark, n);
  return std::nullopt;
}

std::optional<ParamValue> ParamValidator::ConvertList(const ParamDef& def, const Entry& e,
                                                      const Scope& scope) {
  const YAML::Node& n = e.value;
  const bool is_int = def.type == ParamType::kIntList;
  const auto& lengths = def.list_lengths;
  const bool scalar_ok =
      lengths.empty() || std::find(lengths.begin(), lengths.end(), 1) != lengths.end();
  std::vector<std::pair<YAML::Node, SourceMark>> elems;
  if (n.IsSequence()) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      elems.emplace_back(*it, r_.MarkOf(*it, e.value_mark));
    }
    if (!lengths.empty() && std::find(lengths.begin(), lengths.end(),
                                      static_cast<int>(elems.size())) == lengths.end()) {
      r_.Error(e.value_mark,
               Qual(scope, def.name) + " must be " + Expected(def) + ", got " +
                   std::to_string(elems.size()) + (elems.size() == 1 ? " element" : " elements"),
               "e.g. " + Tick(def.name + ": " + ExampleValue(def)));
      return std::nullopt;
    }
  } else if (n.IsScalar()) {
    if (VariableError(def, scope, e.value_mark, n)) return std::nullopt;
    if (!scalar_ok) {
      TypeError(def, scope, e.value_mark, n);
      return std::nullopt;
    }
    elems.emplace_back(n, e.value_mark);
  } else {
    TypeError(def, scope, e.value_mark, n);
    return std::nullopt;
  }
  std::vector<int64_t> ints;
  std::vector<double> floats;
  bool ok = true;
  for (const auto& [el, mark] : elems) {
    if (VariableError(def, scope, mark, el)) {
      ok = false;
      continue;
    }
    if (!el.IsScalar() || IsQuoted(el)) {
      TypeError(def, scope, mark, el, /*element=*/true);
      ok = false;
      continue;
    }
    const std::string& text = el.Scalar();
    if (is_int) {
      auto v = ParseIntText(text);
      if (!v) {
        TypeError(def, scope, mark, el, true);
        ok = false;
        continue;
      }
      if (!RangeCheck(def, scope, mark, static_cast<double>(*v), text, true)) {
        ok = false;
        continue;
      }
      ints.push_back(*v);
    } else {
      auto v = ParseFloatText(text);
      if (!v) {
        TypeError(def, scope, mark, el, true);
        ok = false;
        continue;
      }
      if (!RangeCheck(def, scope, mark, *v, text, true)) {
        ok = false;
        continue;
      }
      floats.push_back(*v);
    }
  }
  if (!ok) return std::nullopt;
  if (is_int) return ParamValue{ints};
  return ParamValue{floats};
}

std::string ParamValidator::VariableSyntaxError(const std::string& s) {
  size_t pos = 0;
  while ((pos = s.find("${", pos)) != std::string::npos) {
    const size_t close = s.find('}', pos + 2);
    if (close == std::string::npos) return "`${` without a closing `}`";
    const std::string name = s.substr(pos + 2, close - pos - 2);
    if (!IsIdentifier(name)) return Tick("${" + name + "}") + " is not a valid variable name";
    pos = close + 1;
  }
  return "";
}

}  // namespace sluice::spec_internal
