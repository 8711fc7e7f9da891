// Internal to the spec front end (compiler/spec/): SpecParser, the one-use
// object behind ParseSpecText (spec.h). Not part of the public API.
//
// Its members are defined in three files, one per stage:
//   parser.cc          YAML load, the top-level keys, `sluice`, `name`,
//                      `source`, `sampling`, `batch`, `output`;
//   graph_steps.cc     `graph`: each step's op, `in`, `out` and parameters;
//   name_resolution.cc tensor names: definitions, SSA renaming, inputs,
//                      cycles, topological order, the batch's fields.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/spec/diagnostics.h"
#include "compiler/spec/param_validator.h"
#include "compiler/spec/spec.h"
#include "compiler/spec/yaml_reader.h"
#include "ops/param.h"
#include "ops/registry.h"
#include "sluice/result.h"

namespace sluice::spec_internal {

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

  Spec Run(const std::string& text);

 private:
  // ---- sections (parser.cc) ----

  void Top(const YAML::Node& root);
  void Version(const Entry& e);
  // `sampling:` / `output:`; absent means all defaults.
  void Section(const Entry* e, const std::string& name, const std::vector<ParamDef>& defs,
               std::vector<ParamIssue> (*check)(const ParamList&), ParamList& out,
               std::map<std::string, SourceMark>& marks);
  void Source(const Entry& e);
  void Batch(const Entry& e);

  // ---- graph steps (graph_steps.cc) ----

  void Graph(const Entry& e);
  RawStep Step(const YAML::Node& item, const std::vector<std::string>& graph_ops);
  // The default `in` of the next step: the previous step's output, else the
  // source's first output ("" when there is none). Broken steps keep default
  // names too, so that neighbours still resolve when a step is bad.
  std::string DefaultInput() const;
  // Reports a graph item that is not a map with exactly one key.
  void StepShapeError(const YAML::Node& item, const SourceMark& mark);
  // False (reported) when `op` (FindOp(step.key)) is not a graph op.
  bool CheckStepOp(const Entry& step, const OpDef* op, const std::vector<std::string>& graph_ops);
  // The step's parameter entries into `params`; false (reported) when they are
  // neither a map nor empty.
  bool StepParams(const Entry& step, std::vector<Entry>& params);
  // `in` (or the default input) into s.in_names / s.in_marks.
  void StepInputs(const Entry* in, RawStep& s, bool& names_ok);
  // `out` (or the first input) into s.out_name / s.out_mark.
  void StepOutput(const Entry* out, RawStep& s, bool& names_ok);
  // False when the number of inputs does not fit `op` (reported when the
  // names themselves were fine).
  bool CheckInputCount(const OpDef& op, const Entry* in, const RawStep& s, bool names_ok);

  // ---- names (name_resolution.cc) ----

  void Resolve();
  // Every definition, in list order, into defs_; returns each step's
  // definition index (-1 for a malformed item).
  std::vector<int> DefineNames();
  void AssignSsaNames();
  void ResolveInputs();
  void ResolveInput(int i, size_t k);
  // The unknown-tensor error for steps_[i].in_names[k] (did-you-mean among
  // the other defined names); marks the step broken.
  void ReportUnknownInput(int i, size_t k);
  // Forward references to a later default `out` that feeds back into the
  // reading step become unknown-tensor errors (typos), not cycles.
  void RejectSelfFedForwardReferences();
  // Every decode step the same op with the same parameters (a plan decodes
  // each sample once); an error at the first differing parameter.
  void CheckDecodesAgree();
  // Kahn's algorithm, ready steps taken in list order; fills the dependency
  // edges. Steps in a cycle are left out of the order.
  std::vector<int> TopologicalOrder(std::vector<std::vector<int>>& preds,
                                    std::vector<std::vector<int>>& succs) const;
  // Appends every step of `order` that is usable to spec_.graph; marks the
  // others (and their readers) in `dropped`.
  void EmitGraph(const std::vector<int>& order, const std::vector<int>& step_def,
                 std::vector<bool>& dropped);
  static std::string JoinPlain(const std::vector<std::string>& parts);
  const Def* FirstDef(const std::string& name) const;
  std::string DefWhere(const Def& d) const;
  void ReportCycles(const std::vector<int>& order, const std::vector<std::vector<int>>& preds,
                    const std::vector<std::vector<int>>& succs, std::vector<bool>& dropped);
  void ResolveBatch(const std::vector<bool>& dropped);

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

}  // namespace sluice::spec_internal
