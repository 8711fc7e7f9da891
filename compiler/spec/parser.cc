// The spec front end: YAML text -> validated Spec.
//
// Stages, each reporting into the shared Diagnostics and carrying on:
//   1. yaml-cpp parse (a syntax error is one diagnostic and ends the parse);
//   2. top-level keys and their shapes (`sluice`, `name`, `source`, `sampling`,
//      `graph`, `batch`, `output`);
//   3. generic parameter validation of every section and step against the op
//      registry's ParamDefs (types, ranges, choices, list lengths, required,
//      ${VAR} only in strings), defaults filled, then the op's `check`;
//   4. tensor-name resolution over the graph (defaults for `in`/`out`, forward
//      references, duplicates, dangling names, cycles), a topological order and
//      SSA renaming (see spec.h);
//   5. batch fields resolved against the final definition of each name.
// No exception escapes: yaml-cpp exceptions are caught and become diagnostics.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"
#include "compiler/spec/spec_limits.h"
#include "ops/registry.h"

namespace sluice {
namespace {

// ---- small text helpers -----------------------------------------------------

std::string Tick(const std::string& s) { return "`" + s + "`"; }

// "`a`, `b`, `c`"
std::string TickList(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += Tick(names[i]);
  }
  return out;
}

// "`a`", "`a` or `b`", "`a`, `b` or `c`"
std::string TickAlternatives(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += (i + 1 == names.size()) ? " or " : ", ";
    out += Tick(names[i]);
  }
  return out;
}

std::string FormatNumber(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v > -1e15 && v < 1e15) {
    return std::to_string(static_cast<int64_t>(v));
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return "?";
  return std::string(buf, end);
}

bool IsIdentifier(const std::string& s) {
  if (s.empty()) return false;
  auto head = [](char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!head(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return head(c) || (c >= '0' && c <= '9'); });
}

// ---- YAML node helpers ------------------------------------------------------

class Reader {
 public:
  Reader(std::string file, Diagnostics& diags) : file_(std::move(file)), diags_(diags) {}

  SourceMark MarkOf(const YAML::Node& node, const SourceMark& fallback = {}) const {
    const YAML::Mark m = node.Mark();
    if (m.line < 0 || m.column < 0) return fallback.valid() ? fallback : SourceMark{file_, 1, 1};
    return SourceMark{file_, m.line + 1, m.column + 1};
  }
  SourceMark MarkAt(const YAML::Mark& m) const {
    if (m.line < 0 || m.column < 0) return SourceMark{file_, 1, 1};
    return SourceMark{file_, m.line + 1, m.column + 1};
  }
  const std::string& file() const { return file_; }
  Diagnostics& diags() { return diags_; }
  void Error(const SourceMark& mark, std::string message, std::string hint = {}) {
    diags_.Add(mark, std::move(message), std::move(hint));
  }

 private:
  std::string file_;
  Diagnostics& diags_;
};

// One key: value pair of a YAML map, with marks.
struct Entry {
  std::string key;
  YAML::Node key_node;
  YAML::Node value;
  SourceMark key_mark;
  SourceMark value_mark;  // the key's mark when the value is empty
};

// The entries of a map in document order. Non-scalar keys and repeated keys are
// reported (the repeat is dropped).
std::vector<Entry> MapEntries(Reader& r, const YAML::Node& map) {
  std::vector<Entry> out;
  std::map<std::string, SourceMark> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    SourceMark key_mark = r.MarkOf(key, r.MarkOf(map));
    if (!key.IsScalar()) {
      r.Error(key_mark, "a key must be a plain name", "write `name: value`");
      continue;
    }
    const std::string name = key.Scalar();
    if (auto s = seen.find(name); s != seen.end()) {
      r.Error(key_mark, "duplicate key " + Tick(name),
              "it was already given at line " + std::to_string(s->second.line) + "; keep only one");
      continue;
    }
    seen.emplace(name, key_mark);
    SourceMark value_mark = value.IsNull() ? key_mark : r.MarkOf(value, key_mark);
    out.push_back(Entry{name, key, value, key_mark, value_mark});
  }
  return out;
}

// How a YAML value reads in "got ..." messages.
std::string Describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "an empty value";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  return Tick(node.Scalar());
}

bool IsQuoted(const YAML::Node& node) {
  const std::string& tag = node.Tag();
  return tag == "!" || tag == "tag:yaml.org,2002:str";
}

bool HasVariable(const std::string& s) { return s.find("${") != std::string::npos; }

// Whole-string integer (decimal, optional sign).
std::optional<int64_t> ParseIntText(const std::string& s) {
  static const std::regex re("[-+]?[0-9]+");
  if (!std::regex_match(s, re)) return std::nullopt;
  const char* first = s.data() + (s[0] == '+' ? 1 : 0);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(first, s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> ParseFloatText(const std::string& s) {
  static const std::regex re(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (!std::regex_match(s, re)) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE) return std::nullopt;
  return v;
}

std::optional<bool> ParseBoolText(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

// ---- parameter validation ---------------------------------------------------

// Where a set of parameters lives, for messages: `qual` prefixes parameter names
// ("random_resized_crop" -> `random_resized_crop.size`), `noun` is what a key
// is called there ("parameter" for ops and the source, "key" for sections),
// `example_prefix` wraps an example in the "missing required" hint.
struct Scope {
  std::string qual;
  std::string noun;
  bool op_style = false;  // example hint as `op: {name: value}` rather than `name: value`
};

// An example value for a parameter, for "missing required" hints.
std::string ExampleValue(const ParamDef& def) {
  if (def.default_value) return def.default_value->ToString();
  const std::string& n = def.name;
  if (n == "path") return "${DATA}/train";
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

class ParamValidator {
 public:
  explicit ParamValidator(Reader& r) : r_(r) {}

  // Validates `entries` (reserved keys already removed) against `defs`, fills
  // defaults, records value marks (nested sections as "section.field") and
  // runs `check` when every value was valid. Returns false when any error
  // was reported. `owner` is where "missing required" errors point.
  bool Validate(const std::vector<Entry>& entries, const std::vector<ParamDef>& defs,
                const Scope& scope, const SourceMark& owner,
                const std::vector<std::string>& extra_keys, ParamList& out,
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
        r_.Error(e.key_mark,
                 "unknown " + scope.noun + " " + Tick(e.key) + " in " + Tick(scope.qual), hint);
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
      r_.Error(
          owner, "missing required " + scope.noun + " " + Tick(d.name) + " in " + Tick(scope.qual),
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

 private:
  std::string Qual(const Scope& scope, const std::string& name) const {
    return Tick(scope.qual + "." + name);
  }

  void TypeError(const ParamDef& def, const Scope& scope, const SourceMark& mark,
                 const YAML::Node& got, bool element = false) {
    const std::string who =
        element ? "each element of " + Qual(scope, def.name) : Qual(scope, def.name);
    r_.Error(mark,
             who + " must be " + (element ? ElementExpected(def) : Expected(def)) + ", got " +
                 Describe(got),
             "e.g. " + Tick(def.name + ": " + ExampleValue(def)));
  }

  static std::string ElementExpected(const ParamDef& def) {
    return def.type == ParamType::kIntList ? "an integer" : "a number";
  }

  // A ${VAR} in a non-string field: an error, true when reported.
  bool VariableError(const ParamDef& def, const Scope& scope, const SourceMark& mark,
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

  bool RangeCheck(const ParamDef& def, const Scope& scope, const SourceMark& mark, double v,
                  const std::string& text, bool element) {
    if (InRange(def, v)) return true;
    const std::string who =
        element ? "each element of " + Qual(scope, def.name) : Qual(scope, def.name);
    r_.Error(mark, who + " must be " + RangeText(def) + ", got " + Tick(text),
             "e.g. " + Tick(def.name + ": " + ExampleValue(def)));
    return false;
  }

  std::optional<ParamValue> Convert(const ParamDef& def, const Entry& e, const Scope& scope,
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
        bool ok = Validate(MapEntries(r_, n), def.fields, inner, e.key_mark, {}, nested,
                           nested_marks, nullptr);
        for (auto& [k, m] : nested_marks) marks[def.name + "." + k] = m;
        if (!ok) return std::nullopt;
        return ParamValue{nested};
      }
    }
    TypeError(def, scope, mark, n);
    return std::nullopt;
  }

  std::optional<ParamValue> ConvertList(const ParamDef& def, const Entry& e, const Scope& scope) {
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

  // "" when every ${...} in `s` is well formed, else what is wrong.
  static std::string VariableSyntaxError(const std::string& s) {
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

  Reader& r_;
};

// ---- the spec ---------------------------------------------------------------

const std::vector<std::string>& TopLevelKeys() {
  static const std::vector<std::string> keys = {"sluice", "name",  "source", "sampling",
                                                "graph",  "batch", "output"};
  return keys;
}

// A graph step as written, before resolution.
struct RawStep {
  const OpDef* op = nullptr;
  std::string op_name;
  SourceMark mark;
  bool broken = false;  // an error makes this step unusable downstream
  std::vector<std::string> in_names;
  std::vector<SourceMark> in_marks;
  std::string out_name;  // "" when no name could be determined
  SourceMark out_mark;
  bool explicit_out = false;
  ParamList params;
  std::map<std::string, SourceMark> param_marks;
  // Resolution: the definition each input refers to (-1 = unresolved).
  std::vector<int> in_defs;
};

// A definition of a tensor name: by the source (step -1) or a graph step.
struct Def {
  std::string name;
  int step = -1;
  SourceMark mark;
  std::string ssa;
};

class SpecParser {
 public:
  SpecParser(const std::string& file, Diagnostics& diags) : r_(file, diags), pv_(r_) {
    spec_.file = file;
  }

  Spec Run(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      r_.Error(r_.MarkAt(e.mark), "invalid YAML: " + e.msg,
               "check the brackets, colons and indentation on this line and the one before");
      return std::move(spec_);
    } catch (const YAML::Exception& e) {
      r_.Error(r_.MarkAt(e.mark), "invalid YAML: " + e.msg);
      return std::move(spec_);
    }
    try {
      if (!SpecTreeWithinLimits(root, r_.file(), r_.diags())) return std::move(spec_);
      Top(root);
    } catch (const YAML::Exception& e) {
      r_.Error(r_.MarkAt(e.mark), "internal error reading the spec: " + e.msg);
    }
    return std::move(spec_);
  }

 private:
  void Top(const YAML::Node& root) {
    const SourceMark start{r_.file(), 1, 1};
    if (!root.IsDefined() || root.IsNull()) {
      r_.Error(start, "the spec is empty", "start with `sluice: 1` and a `name:`");
      return;
    }
    if (!root.IsMap()) {
      r_.Error(r_.MarkOf(root, start), "the spec must be a map of sections, got " + Describe(root),
               "start with `sluice: 1` and a `name:`");
      return;
    }
    const SourceMark root_mark = r_.MarkOf(root, start);
    std::map<std::string, Entry> sections;
    for (Entry& e : MapEntries(r_, root)) {
      if (std::find(TopLevelKeys().begin(), TopLevelKeys().end(), e.key) == TopLevelKeys().end()) {
        std::string near = DidYouMean(e.key, TopLevelKeys());
        r_.Error(e.key_mark, "unknown top-level key " + Tick(e.key),
                 near.empty() ? "valid keys: " + TickList(TopLevelKeys())
                              : "did you mean " + Tick(near) + "?");
        continue;
      }
      sections.emplace(e.key, std::move(e));
    }
    auto missing = [&](const std::string& key, const std::string& hint) {
      r_.Error(root_mark, "missing required key " + Tick(key), hint);
    };
    auto find = [&](const std::string& key) -> const Entry* {
      auto it = sections.find(key);
      return it == sections.end() ? nullptr : &it->second;
    };

    if (const Entry* e = find("sluice")) {
      Version(*e);
    } else {
      missing("sluice", "add `sluice: 1` at the top of the file");
    }
    if (const Entry* e = find("name")) {
      if (e->value.IsScalar() && !e->value.Scalar().empty()) {
        spec_.name = e->value.Scalar();
      } else {
        r_.Error(e->value_mark, "`name` must be a string, got " + Describe(e->value),
                 "e.g. `name: imagenet_train`");
      }
    } else {
      missing("name", "add a name for the pipeline, e.g. `name: imagenet_train`");
    }
    if (const Entry* e = find("source")) {
      Source(*e);
    } else {
      missing("source", "add e.g. `source: {format: image_folder, path: ${DATA}/train}`");
    }
    {
      const Entry* e = find("sampling");
      Section(e, "sampling", SamplingParams(), CheckSamplingParams, spec_.sampling,
              spec_.sampling_marks);
    }
    const Entry* graph = find("graph");
    if (graph) {
      Graph(*graph);
    } else {
      missing("graph", "add a list of steps, e.g. `graph: [{decode_jpeg: {in: jpg, out: image}}]`");
    }
    if (const Entry* e = find("batch")) {
      Batch(*e);
    } else {
      missing("batch", "add e.g. `batch: {size: 256, fields: {image: image, label: cls}}`");
    }
    {
      const Entry* e = find("output");
      Section(e, "output", OutputParams(), CheckOutputParams, spec_.output, spec_.output_marks);
    }
    Resolve();
  }

  void Version(const Entry& e) {
    const auto v =
        e.value.IsScalar() && !IsQuoted(e.value) ? ParseIntText(e.value.Scalar()) : std::nullopt;
    if (!v) {
      r_.Error(e.value_mark, "`sluice` must be the spec version number, got " + Describe(e.value),
               "write `sluice: 1`");
      return;
    }
    if (*v != 1) {
      r_.Error(e.value_mark, "unsupported spec version " + Tick(e.value.Scalar()),
               "this compiler reads version 1; write `sluice: 1`");
      return;
    }
    spec_.version = 1;
  }

  // `sampling:` / `output:`; absent means all defaults.
  void Section(const Entry* e, const std::string& name, const std::vector<ParamDef>& defs,
               std::vector<ParamIssue> (*check)(const ParamList&), ParamList& out,
               std::map<std::string, SourceMark>& marks) {
    if (!e || e->value.IsNull()) {
      out = WithDefaults(defs, {});
      return;
    }
    if (!e->value.IsMap()) {
      r_.Error(e->value_mark, Tick(name) + " must be a map, got " + Describe(e->value));
      out = WithDefaults(defs, {});
      return;
    }
    pv_.Validate(MapEntries(r_, e->value), defs, Scope{name, "key", false}, e->key_mark, {}, out,
                 marks, check);
  }

  void Source(const Entry& e) {
    spec_.source.mark = e.key_mark;
    if (!e.value.IsMap()) {
      r_.Error(e.value_mark, "`source` must be a map, got " + Describe(e.value),
               "e.g. `source: {format: image_folder, path: ${DATA}/train}`");
      return;
    }
    std::vector<Entry> entries = MapEntries(r_, e.value);
    std::vector<std::string> formats;
    for (const OpDef* op : OpsOfClass(OpClass::kSource)) formats.push_back(op->name);
    auto fmt = std::find_if(entries.begin(), entries.end(),
                            [](const Entry& x) { return x.key == "format"; });
    if (fmt == entries.end()) {
      r_.Error(e.key_mark, "missing required key `format` in `source`",
               "name the kind of source: " + TickAlternatives(formats));
      return;
    }
    const SourceMark fmt_mark = fmt->value_mark;
    const std::string name = fmt->value.IsScalar() ? fmt->value.Scalar() : "";
    const OpDef* op = FindOp(name);
    if (!op || op->op_class != OpClass::kSource) {
      if (!fmt->value.IsScalar()) {
        r_.Error(fmt_mark, "`source.format` must be " + TickAlternatives(formats) + ", got " +
                               Describe(fmt->value));
      } else {
        std::string near = DidYouMean(name, formats);
        r_.Error(fmt_mark, "unknown source format " + Tick(name),
                 near.empty() ? "valid formats: " + TickList(formats)
                              : "did you mean " + Tick(near) + "?");
      }
      return;
    }
    // The parameters: every entry but `format`, copied (not erased in place:
    // assigning a YAML::Node rebinds the node it refers to, so shifting
    // entries down would overwrite each value with the next one's).
    std::vector<Entry> params;
    for (const Entry& x : entries) {
      if (x.key != "format") params.push_back(x);
    }
    spec_.source.op = op;
    spec_.source.mark = fmt_mark;
    bool ok = pv_.Validate(params, op->params, Scope{"source", "parameter", false}, fmt_mark,
                           {"format"}, spec_.source.params, spec_.source.param_marks, op->check);
    (void)ok;  // source parameters do not affect the graph's names
    for (const std::string& out : op->output_names) {
      spec_.source.outputs.push_back(out);
      spec_.source.output_marks.push_back(fmt_mark);
    }
    source_ok_ = true;
  }

  void Graph(const Entry& e) {
    if (!e.value.IsSequence() || e.value.size() == 0) {
      r_.Error(e.value.IsNull() ? e.key_mark : e.value_mark,
               e.value.IsSequence() || e.value.IsNull()
                   ? "`graph` must list at least one step"
                   : "`graph` must be a list of steps, got " + Describe(e.value),
               "write one op per line, e.g. `- decode_jpeg: {in: jpg, out: image}`");
      return;
    }
    std::vector<std::string> graph_ops;
    for (const OpDef* op : AllOps()) {
      if (op->op_class != OpClass::kSource && op->op_class != OpClass::kBatch) {
        graph_ops.push_back(op->name);
      }
    }
    graph_ok_ = true;
    for (auto it = e.value.begin(); it != e.value.end(); ++it) {
      steps_.push_back(Step(*it, graph_ops));
    }
  }

  RawStep Step(const YAML::Node& item, const std::vector<std::string>& graph_ops) {
    RawStep s;
    s.mark = r_.MarkOf(item);
    s.broken = true;
    // Default names, so that neighbours still resolve when this step is bad.
    const RawStep* prev = steps_.empty() ? nullptr : &steps_.back();
    auto default_in = [&]() -> std::string {
      if (prev) return prev->out_name;
      return spec_.source.outputs.empty() ? "" : spec_.source.outputs.front();
    };
    if (!item.IsMap() || item.size() != 1) {
      if (item.IsMap()) {
        std::vector<std::string> keys;
        for (const Entry& k : MapEntries(r_, item)) keys.push_back(k.key);
        r_.Error(s.mark,
                 "a graph step must have exactly one key, the op name; this one has " +
                     std::to_string(keys.size()) + ": " + TickList(keys),
                 keys.size() > 1 ? "indent the parameters under the op, e.g. `- " + keys[0] +
                                       ": {" + keys[1] + ": " +
                                       (item[keys[1]].IsScalar() ? item[keys[1]].Scalar()
                                                                 : std::string("...")) +
                                       "}`"
                                 : "write `- op: {param: value}`");
      } else {
        r_.Error(s.mark,
                 "a graph step must be a map with one key, the op name, got " + Describe(item),
                 item.IsScalar() ? "write `- " + item.Scalar() + ": {}`"
                                 : "write `- op: {param: value}`");
      }
      // Pass the previous name through so the next step's default `in` works.
      s.out_name = default_in();
      return s;
    }
    const std::vector<Entry> only = MapEntries(r_, item);
    if (only.empty()) {  // a non-scalar key, reported by MapEntries
      s.out_name = default_in();
      return s;
    }
    const Entry& step = only.front();
    s.op_name = step.key;
    s.mark = step.key_mark;
    const OpDef* op = FindOp(step.key);
    bool op_ok = true;
    if (!op) {
      std::string near = DidYouMean(step.key, graph_ops);
      r_.Error(
          step.key_mark, "unknown op " + Tick(step.key),
          near.empty() ? "valid ops: " + TickList(graph_ops) : "did you mean " + Tick(near) + "?");
      op_ok = false;
    } else if (op->op_class == OpClass::kSource) {
      r_.Error(step.key_mark, Tick(step.key) + " is a source format, not a graph op",
               "put it under `source:`, e.g. `source: {format: " + step.key + ", ...}`");
      op_ok = false;
    } else if (op->op_class == OpClass::kBatch) {
      r_.Error(step.key_mark, "`batch` is a top-level section, not a graph op",
               "move it out of `graph:`, e.g. `batch: {size: 256, fields: {image: image}}`");
      op_ok = false;
    }
    if (op_ok) s.op = op;

    std::vector<Entry> params;
    bool names_ok = true;
    bool shape_ok = true;  // the parameters are a map (or empty)
    if (step.value.IsMap()) {
      params = MapEntries(r_, step.value);
    } else if (!step.value.IsNull()) {
      r_.Error(
          step.value_mark,
          "the parameters of " + Tick(step.key) + " must be a map, got " + Describe(step.value),
          "e.g. `- " + step.key + ": {param: value}`, or `- " + step.key +
              ": {}` for the defaults");
      shape_ok = false;
    }
    const Entry* in = nullptr;
    const Entry* out = nullptr;
    std::vector<Entry> rest;
    for (const Entry& p : params) {
      if (p.key == "in") {
        in = &p;
      } else if (p.key == "out") {
        out = &p;
      } else {
        rest.push_back(p);
      }
    }
    // in
    if (in) {
      auto take = [&](const YAML::Node& n, const SourceMark& m) {
        if (!n.IsScalar() || n.Scalar().empty()) {
          r_.Error(m, "`in` of " + Tick(s.op_name) + " must name a tensor, got " + Describe(n));
          names_ok = false;
          return;
        }
        s.in_names.push_back(n.Scalar());
        s.in_marks.push_back(m);
      };
      if (in->value.IsSequence()) {
        for (auto it = in->value.begin(); it != in->value.end(); ++it) {
          take(*it, r_.MarkOf(*it, in->value_mark));
        }
        if (in->value.size() == 0) {
          r_.Error(in->value_mark, "`in` of " + Tick(s.op_name) + " is an empty list",
                   "name the tensor to read, e.g. `in: image`");
          names_ok = false;
        }
      } else {
        take(in->value, in->value_mark);
      }
    } else if (std::string d = default_in(); !d.empty()) {
      s.in_names.push_back(d);
      s.in_marks.push_back(s.mark);
    }
    // out
    if (out) {
      s.explicit_out = true;
      s.out_mark = out->value_mark;
      if (out->value.IsScalar() && IsIdentifier(out->value.Scalar())) {
        s.out_name = out->value.Scalar();
      } else if (out->value.IsScalar()) {
        r_.Error(out->value_mark, "tensor name " + Tick(out->value.Scalar()) + " is not valid",
                 "use letters, digits and `_`, starting with a letter or `_`");
        names_ok = false;
      } else {
        r_.Error(out->value_mark,
                 "`out` of " + Tick(s.op_name) + " must name a tensor, got " + Describe(out->value),
                 "e.g. `out: image`");
        names_ok = false;
      }
    } else {
      s.out_mark = s.mark;
      if (!s.in_names.empty()) s.out_name = s.in_names.front();
    }
    if (!op_ok || !shape_ok) return s;
    bool params_ok = pv_.Validate(rest, op->params, Scope{op->name, "parameter", true}, s.mark,
                                  {"in", "out"}, s.params, s.param_marks, op->check);
    bool count_ok = true;
    if (!in && s.in_names.empty()) {
      count_ok = false;  // no default input: the source or the previous item is broken
    } else if (op->num_inputs >= 0 && names_ok &&
               static_cast<int>(s.in_names.size()) != op->num_inputs) {
      r_.Error(in ? in->value_mark : s.mark,
               Tick(op->name) + " takes " + std::to_string(op->num_inputs) +
                   (op->num_inputs == 1 ? " input" : " inputs") + ", got " +
                   std::to_string(s.in_names.size()) +
                   (s.in_names.empty() ? "" : " (" + TickList(s.in_names) + ")"),
               op->num_inputs == 1 ? "name one tensor, e.g. `in: image`" : "");
      count_ok = false;
    }
    s.broken = !(params_ok && names_ok && count_ok);
    return s;
  }

  void Batch(const Entry& e) {
    batch_mark_ = e.key_mark;
    spec_.batch.mark = e.key_mark;
    const OpDef* op = FindOp("batch");
    if (!op) {
      r_.Error(e.key_mark, "internal error: the op registry has no `batch` op");
      return;
    }
    spec_.batch.op = op;
    if (!e.value.IsMap()) {
      r_.Error(e.value_mark, "`batch` must be a map, got " + Describe(e.value),
               "e.g. `batch: {size: 256, fields: {image: image, label: cls}}`");
      return;
    }
    std::vector<Entry> entries = MapEntries(r_, e.value);
    for (const Entry& x : entries) {
      if (x.key == "fields") fields_entry_ = x;
    }
    batch_ok_ = pv_.Validate(entries, op->params, Scope{"batch", "key", false}, e.key_mark, {},
                             spec_.batch.params, spec_.batch.param_marks, op->check);
  }

  // ---- names ----

  void Resolve() {
    const int n = static_cast<int>(steps_.size());
    // Definitions in list order: the source's first, then each step's.
    if (source_ok_) {
      for (const std::string& o : spec_.source.outputs) {
        defs_.push_back(Def{o, -1, spec_.source.mark, ""});
      }
    }
    std::vector<int> step_def(n, -1);
    for (int i = 0; i < n; ++i) {
      RawStep& s = steps_[i];
      if (s.op_name.empty() || s.out_name.empty()) continue;  // malformed item
      // A step that names an existing tensor without reading it is a duplicate.
      if (s.explicit_out &&
          std::find(s.in_names.begin(), s.in_names.end(), s.out_name) == s.in_names.end()) {
        if (const Def* first = FirstDef(s.out_name)) {
          r_.Error(s.out_mark, "tensor " + Tick(s.out_name) + " is already defined",
                   "it is first defined " + DefWhere(*first) +
                       "; choose a new name, or read it with `in: " + s.out_name +
                       "` to replace it");
          s.broken = true;
          // Still define it so readers resolve; it gets its own SSA name.
        }
      }
      step_def[i] = static_cast<int>(defs_.size());
      defs_.push_back(Def{s.out_name, i, s.out_mark, ""});
    }
    // SSA names: the first definition of a name keeps it, later ones get .1, .2, ...
    std::map<std::string, int> count;
    for (Def& d : defs_) {
      int k = count[d.name]++;
      d.ssa = k == 0 ? d.name : d.name + "." + std::to_string(k);
    }
    // Resolve every input.
    for (int i = 0; i < n; ++i) {
      RawStep& s = steps_[i];
      s.in_defs.assign(s.in_names.size(), -1);
      if (s.op_name.empty()) continue;
      for (size_t k = 0; k < s.in_names.size(); ++k) {
        const std::string& name = s.in_names[k];
        int before = -1;
        std::vector<int> after;
        for (int d = 0; d < static_cast<int>(defs_.size()); ++d) {
          if (defs_[d].name != name) continue;
          if (defs_[d].step < i) before = d;  // latest wins (defs are in list order)
          if (defs_[d].step > i) after.push_back(d);
        }
        if (before >= 0) {
          s.in_defs[k] = before;
        } else if (after.size() == 1) {
          s.in_defs[k] = after.front();
        } else if (after.size() > 1) {
          std::vector<std::string> lines;
          for (int d : after) lines.push_back(std::to_string(defs_[d].mark.line));
          r_.Error(s.in_marks[k],
                   Tick(s.op_name) + " reads " + Tick(name) +
                       " before any step defines it, and several later steps define it (lines " +
                       JoinPlain(lines) + ")",
                   "give the tensor it should read a unique `out:` name");
          s.broken = true;
        } else if (source_ok_) {
          std::vector<std::string> others;  // names defined by other steps or the source
          for (const Def& d : defs_) {
            if (d.step != i && std::find(others.begin(), others.end(), d.name) == others.end()) {
              others.push_back(d.name);
            }
          }
          std::string near = DidYouMean(name, others);
          r_.Error(s.in_marks[k], "unknown tensor " + Tick(name) + " read by " + Tick(s.op_name),
                   near.empty() ? "defined tensors: " + TickList(others)
                                : "did you mean " + Tick(near) + "?");
          s.broken = true;
        } else {
          s.broken = true;  // the source is broken; its names are unknown
        }
      }
    }
    // Topological order: Kahn's algorithm, ready steps taken in list order.
    std::vector<std::vector<int>> preds(n), succs(n);
    for (int i = 0; i < n; ++i) {
      for (int d : steps_[i].in_defs) {
        if (d < 0 || defs_[d].step < 0) continue;
        const int p = defs_[d].step;
        preds[i].push_back(p);
        succs[p].push_back(i);
      }
    }
    std::vector<int> indeg(n);
    for (int i = 0; i < n; ++i) indeg[i] = static_cast<int>(preds[i].size());
    std::set<int> ready;
    for (int i = 0; i < n; ++i)
      if (indeg[i] == 0) ready.insert(i);
    std::vector<int> order;
    while (!ready.empty()) {
      const int i = *ready.begin();
      ready.erase(ready.begin());
      order.push_back(i);
      for (int j : succs[i])
        if (--indeg[j] == 0) ready.insert(j);
    }
    std::vector<bool> dropped(n, false);
    if (static_cast<int>(order.size()) < n) {
      ReportCycles(order, preds, succs, dropped);
    }
    // Drop broken steps and everything that reads from them.
    for (int i : order) {
      RawStep& s = steps_[i];
      bool bad = s.broken || s.op == nullptr;
      for (int d : s.in_defs) {
        if (d < 0 || (defs_[d].step >= 0 && dropped[defs_[d].step])) bad = true;
      }
      if (bad) {
        dropped[i] = true;
        continue;
      }
      SpecStep out;
      out.op = s.op;
      out.mark = s.mark;
      for (size_t k = 0; k < s.in_names.size(); ++k) {
        out.inputs.push_back(defs_[s.in_defs[k]].ssa);
        out.input_marks.push_back(s.in_marks[k]);
      }
      out.outputs.push_back(defs_[step_def[i]].ssa);
      out.output_marks.push_back(s.out_mark);
      out.explicit_out = s.explicit_out;
      out.params = std::move(s.params);
      out.param_marks = std::move(s.param_marks);
      spec_.graph.push_back(std::move(out));
    }
    ResolveBatch(dropped);
  }

  static std::string JoinPlain(const std::vector<std::string>& parts) {
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
    return out;
  }

  const Def* FirstDef(const std::string& name) const {
    for (const Def& d : defs_)
      if (d.name == name) return &d;
    return nullptr;
  }

  std::string DefWhere(const Def& d) const {
    if (d.step < 0) {
      return "by the source (" + Tick(spec_.source.op ? spec_.source.op->name : "source") +
             ", line " + std::to_string(d.mark.line) + ")";
    }
    return "by " + Tick(steps_[d.step].op_name) + " at line " + std::to_string(d.mark.line);
  }

  void ReportCycles(const std::vector<int>& order, const std::vector<std::vector<int>>& preds,
                    const std::vector<std::vector<int>>& succs, std::vector<bool>& dropped) {
    const int n = static_cast<int>(steps_.size());
    std::vector<bool> remaining(n, true);
    for (int i : order) remaining[i] = false;
    for (int start = 0; start < n; ++start) {
      if (!remaining[start]) continue;
      // Walk predecessors inside the remaining set until a step repeats.
      std::vector<int> walk;
      std::vector<int> pos(n, -1);
      int v = start;
      while (pos[v] < 0) {
        pos[v] = static_cast<int>(walk.size());
        walk.push_back(v);
        int next = -1;
        for (int p : preds[v])
          if (remaining[p]) next = p;
        if (next < 0) break;  // cannot happen: every remaining step has a remaining pred
        v = next;
      }
      std::vector<int> cycle(walk.begin() + pos[v], walk.end());
      std::reverse(cycle.begin(), cycle.end());  // data-flow order
      const auto first = std::min_element(cycle.begin(), cycle.end());
      std::rotate(cycle.begin(), first, cycle.end());
      std::vector<std::string> names;
      for (int c : cycle) names.push_back(Tick(steps_[c].op_name));
      names.push_back(Tick(steps_[cycle.front()].op_name));
      std::string msg = "the graph has a cycle: ";
      for (size_t i = 0; i < names.size(); ++i) msg += (i ? " -> " : "") + names[i];
      // The hint walks the loop backwards: who reads what from whom.
      std::vector<int> back = {cycle.front()};
      for (size_t i = cycle.size(); i-- > 1;) back.push_back(cycle[i]);
      back.push_back(cycle.front());
      auto line = [&](int step) {
        return " (line " + std::to_string(steps_[step].mark.line) + ")";
      };
      std::string hint = Tick(steps_[back[0]].op_name) + line(back[0]);
      for (size_t i = 0; i + 1 < back.size(); ++i) {
        const RawStep& from = steps_[back[i + 1]];
        hint += std::string(i ? ", which" : "") + " reads " + Tick(from.out_name) + " from " +
                Tick(from.op_name) + (i + 2 < back.size() ? line(back[i + 1]) : "");
      }
      hint += "; rename an `in:` or `out:` to break the loop";
      r_.Error(steps_[cycle.front()].mark, msg, hint);
      // Drop the cycle and everything downstream of it.
      std::vector<int> stack(cycle.begin(), cycle.end());
      while (!stack.empty()) {
        int x = stack.back();
        stack.pop_back();
        if (!remaining[x]) continue;
        remaining[x] = false;
        dropped[x] = true;
        for (int s : succs[x]) stack.push_back(s);
      }
    }
  }

  void ResolveBatch(const std::vector<bool>& dropped) {
    if (!spec_.batch.op || !fields_entry_ || !fields_entry_->value.IsMap()) return;
    std::vector<std::string> all_names;
    for (const Def& d : defs_) {
      if (std::find(all_names.begin(), all_names.end(), d.name) == all_names.end()) {
        all_names.push_back(d.name);
      }
    }
    // Field order follows the `fields` map (sorted by field name), matching the
    // batch op's input order.
    std::map<std::string, std::pair<std::string, SourceMark>> fields;
    std::map<std::string, SourceMark> key_marks;
    for (auto it = fields_entry_->value.begin(); it != fields_entry_->value.end(); ++it) {
      if (!it->first.IsScalar() || !it->second.IsScalar()) continue;  // reported already
      const std::string key = it->first.Scalar();
      if (fields.contains(key)) continue;
      const SourceMark km = r_.MarkOf(it->first, fields_entry_->value_mark);
      fields.emplace(key, std::pair{it->second.Scalar(), r_.MarkOf(it->second, km)});
      key_marks.emplace(key, km);
    }
    for (const auto& [field, tensor] : fields) {
      const auto& [name, mark] = tensor;
      int last = -1;
      for (int d = 0; d < static_cast<int>(defs_.size()); ++d) {
        if (defs_[d].name == name) last = d;
      }
      if (last < 0) {
        if (source_ok_ && graph_ok_) {
          std::string near = DidYouMean(name, all_names);
          r_.Error(mark, "batch field " + Tick(field) + " names unknown tensor " + Tick(name),
                   near.empty() ? "defined tensors: " + TickList(all_names)
                                : "did you mean " + Tick(near) + "?");
        }
        continue;
      }
      if (defs_[last].step >= 0 && dropped[defs_[last].step]) continue;
      spec_.batch.inputs.push_back(defs_[last].ssa);
      spec_.batch.input_marks.push_back(mark);
      spec_.batch.outputs.push_back(field);
      spec_.batch.output_marks.push_back(key_marks[field]);
    }
  }

  Reader r_;
  ParamValidator pv_;
  Spec spec_;
  bool source_ok_ = false;
  bool graph_ok_ = false;  // `graph` is a non-empty list (its steps may still be bad)
  bool batch_ok_ = false;
  SourceMark batch_mark_;
  std::optional<Entry> fields_entry_;
  std::vector<RawStep> steps_;
  std::vector<Def> defs_;
};

}  // namespace

Spec ParseSpecText(const std::string& text, const std::string& file, Diagnostics& diags) {
  if (!SpecSizeWithinLimits(text.size(), file, diags)) {
    Spec spec;
    spec.file = file;
    return spec;
  }
  try {
    return SpecParser(file, diags).Run(text);
  } catch (const std::exception& e) {
    diags.Add(SourceMark{file, 0, 0}, std::string("internal error reading the spec: ") + e.what());
    Spec spec;
    spec.file = file;
    return spec;
  }
}

Spec ParseSpecFile(const std::string& path, Diagnostics& diags) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diags.Add(SourceMark{path, 0, 0}, "cannot read " + Tick(path) + ": " + std::strerror(errno),
              "check the path");
    Spec spec;
    spec.file = path;
    return spec;
  }
  // At most one byte more than a spec may have (a FIFO or /dev/zero must not
  // be read forever); ParseSpecText reports the size.
  std::string text(kMaxSpecBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return ParseSpecText(text, path, diags);
}

}  // namespace sluice
