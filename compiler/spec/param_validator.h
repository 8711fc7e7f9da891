// Internal to the spec front end (compiler/spec/): generic validation of a
// map of parameters against the op registry's ParamDefs. Not part of the
// public API.
//
// Each value is checked for its type, range, choices and list length; ${VAR}
// references are allowed only in string fields (and must be well formed);
// nested sections are validated field by field; missing required parameters
// are reported with an example; defaults are filled; and the op's own `check`
// runs when every value was valid.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/spec/yaml_reader.h"
#include "ops/param.h"
#include "ops/registry.h"
#include "sluice/result.h"

namespace sluice::spec_internal {

// Where a set of parameters lives, for messages: `qual` prefixes parameter names
// ("random_resized_crop" -> `random_resized_crop.size`), `noun` is what a key
// is called there ("parameter" for ops and the source, "key" for sections),
// `example_prefix` wraps an example in the "missing required" hint.
struct Scope {
  std::string qual;
  std::string noun;
  bool op_style = false;  // example hint as `op: {name: value}` rather than `name: value`
};

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
                const std::function<std::vector<ParamIssue>(const ParamList&)>& check);

 private:
  std::string Qual(const Scope& scope, const std::string& name) const;

  void TypeError(const ParamDef& def, const Scope& scope, const SourceMark& mark,
                 const YAML::Node& got, bool element = false);

  static std::string ElementExpected(const ParamDef& def);

  // A ${VAR} in a non-string field: an error, true when reported.
  bool VariableError(const ParamDef& def, const Scope& scope, const SourceMark& mark,
                     const YAML::Node& node);

  bool RangeCheck(const ParamDef& def, const Scope& scope, const SourceMark& mark, double v,
                  const std::string& text, bool element);

  std::optional<ParamValue> Convert(const ParamDef& def, const Entry& e, const Scope& scope,
                                    std::map<std::string, SourceMark>& marks);

  std::optional<ParamValue> ConvertList(const ParamDef& def, const Entry& e, const Scope& scope);

  // "" when every ${...} in `s` is well formed, else what is wrong.
  static std::string VariableSyntaxError(const std::string& s);

  Reader& r_;
};

}  // namespace sluice::spec_internal
