// Reading YAML with source marks for the spec front end: the text helpers
// (backticked names, number formatting, identifiers), a map's entries with
// their marks (duplicate and non-scalar keys reported), value descriptions for
// "got ..." messages, and scalar text to integer / number / boolean.
#include "compiler/spec/yaml_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <map>
#include <regex>

namespace sluice::spec_internal {

// ---- small text helpers -----------------------------------------------------

std::string Tick(const std::string& s) { return "`" + s + "`"; }

std::string TickList(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += Tick(names[i]);
  }
  return out;
}

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

}  // namespace sluice::spec_internal
