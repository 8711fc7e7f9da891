// Parameter declarations and values for ops and spec sections.
//
// Every op (and every top-level spec section such as `output`) declares its
// parameters as ParamDefs: type, default, allowed range or choices, one-line
// doc. The spec front end validates user values against them, fills defaults so
// that the IR carries every parameter explicitly, and the JSON Schema and the
// docs' reference are generated from the same declarations.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace sluice {

enum class ParamType {
  kBool,
  kInt,
  kFloat,       // accepts integers too
  kString,      // may contain ${VAR} references, kept symbolic until load time
  kEnum,        // one of `choices`
  kIntList,     // list of ints; a scalar is accepted when 1 is in list_lengths
  kFloatList,   // list of numbers; likewise
  kAutoInt,     // the string "auto" or an int (knobs); "auto" is stored as -1
  kStringMap,   // map of name -> string (batch fields)
  kSection,     // nested map validated against `fields`
};

std::string ParamTypeName(ParamType type);

struct ParamDef;
using ParamList = std::map<std::string, struct ParamValue>;

// A validated parameter value. Lists keep their element type; kAutoInt is an
// int64 with -1 meaning "auto"; kEnum is a string; kSection is a nested list.
struct ParamValue {
  std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
               std::map<std::string, std::string>, ParamList>
      value;

  bool AsBool() const { return std::get<bool>(value); }
  int64_t AsInt() const { return std::get<int64_t>(value); }
  double AsFloat() const {
    return std::holds_alternative<int64_t>(value) ? static_cast<double>(std::get<int64_t>(value))
                                                  : std::get<double>(value);
  }
  const std::string& AsString() const { return std::get<std::string>(value); }
  const std::vector<int64_t>& AsIntList() const { return std::get<std::vector<int64_t>>(value); }
  const std::vector<double>& AsFloatList() const { return std::get<std::vector<double>>(value); }
  const std::map<std::string, std::string>& AsStringMap() const {
    return std::get<std::map<std::string, std::string>>(value);
  }
  const ParamList& AsSection() const { return std::get<ParamList>(value); }
  // Stable text form for the IR printer and plan.json: 3, 0.5, true, "rgb",
  // [224,224], {image: "image"}.
  std::string ToString() const;
  bool operator==(const ParamValue&) const = default;
};

struct ParamDef {
  std::string name;
  ParamType type = ParamType::kInt;
  std::string doc;                       // one line, shown in docs and schema
  bool required = false;                 // else `default_value` applies (if set)
  std::optional<ParamValue> default_value;
  std::optional<double> min;             // inclusive; applies to each list element
  std::optional<double> max;             // inclusive
  std::vector<std::string> choices;      // kEnum
  std::vector<int> list_lengths;         // kIntList / kFloatList: allowed lengths
  std::vector<ParamDef> fields;          // kSection
};

// Looks up a parameter of a validated list; the front end fills every default,
// so ops can read any declared parameter that has a default or is required.
const ParamValue* FindParam(const ParamList& params, const std::string& name);

}  // namespace sluice
