// Internal to the spec front end (compiler/spec/): reading YAML with source
// marks, and the small text helpers every diagnostic uses. Not part of the
// public API.
//
// Reader turns yaml-cpp marks into 1-based SourceMarks in the spec's file and
// adds errors to the shared Diagnostics; MapEntries lists a map's key/value
// pairs in document order with their marks; the Parse*Text functions read a
// scalar's text as an integer, number or boolean.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/spec/diagnostics.h"
#include "sluice/result.h"

namespace sluice::spec_internal {

// ---- small text helpers -----------------------------------------------------

// "`s`"
std::string Tick(const std::string& s);
// "`a`, `b`, `c`"
std::string TickList(const std::vector<std::string>& names);
// "`a`", "`a` or `b`", "`a`, `b` or `c`"
std::string TickAlternatives(const std::vector<std::string>& names);
// An integral value without a fraction ("3"), else the shortest round-trip form.
std::string FormatNumber(double v);
// [A-Za-z_][A-Za-z0-9_]*
bool IsIdentifier(const std::string& s);

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
std::vector<Entry> MapEntries(Reader& r, const YAML::Node& map);

// How a YAML value reads in "got ..." messages.
std::string Describe(const YAML::Node& node);

// The scalar was quoted (or tagged as a string).
bool IsQuoted(const YAML::Node& node);

// `s` contains a `${`.
bool HasVariable(const std::string& s);

// Whole-string integer (decimal, optional sign).
std::optional<int64_t> ParseIntText(const std::string& s);
// Whole-string decimal number; nullopt when out of range.
std::optional<double> ParseFloatText(const std::string& s);
// true/True/TRUE, false/False/FALSE.
std::optional<bool> ParseBoolText(const std::string& s);

}  // namespace sluice::spec_internal
