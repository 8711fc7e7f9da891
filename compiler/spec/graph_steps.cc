// `graph:` for the spec front end (SpecParser, spec_parser.h): the list of
// steps, and for each step its op (known, and a graph op rather than a source
// format or `batch`), its `in` and `out` tensor names (with their defaults:
// the previous step's output, then the first input) and its parameters.
// Names are only collected here; name_resolution.cc resolves them.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "compiler/spec/spec_parser.h"
#include "ops/registry.h"

namespace sluice::spec_internal {

void SpecParser::Graph(const Entry& e) {
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

RawStep SpecParser::Step(const YAML::Node& item, const std::vector<std::string>& graph_ops) {
  RawStep s;
  s.mark = r_.MarkOf(item);
  s.broken = true;
  if (!item.IsMap() || item.size() != 1) {
    StepShapeError(item, s.mark);
    // Pass the previous name through so the next step's default `in` works.
    s.out_name = DefaultInput();
    return s;
  }
  const std::vector<Entry> only = MapEntries(r_, item);
  if (only.empty()) {  // a non-scalar key, reported by MapEntries
    s.out_name = DefaultInput();
    return s;
  }
  const Entry& step = only.front();
  s.op_name = step.key;
  s.mark = step.key_mark;
  const OpDef* op = FindOp(step.key);
  const bool op_ok = CheckStepOp(step, op, graph_ops);
  if (op_ok) s.op = op;

  std::vector<Entry> params;
  bool names_ok = true;
  const bool shape_ok = StepParams(step, params);  // the parameters are a map (or empty)
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
  StepInputs(in, s, names_ok);
  StepOutput(out, s, names_ok);
  if (!op_ok || !shape_ok) return s;
  bool params_ok = pv_.Validate(rest, op->params, Scope{op->name, "parameter", true}, s.mark,
                                {"in", "out"}, s.params, s.param_marks, op->check);
  const bool count_ok = CheckInputCount(*op, in, s, names_ok);
  s.broken = !(params_ok && names_ok && count_ok);
  return s;
}

std::string SpecParser::DefaultInput() const {
  const RawStep* prev = steps_.empty() ? nullptr : &steps_.back();
  if (prev) return prev->out_name;
  return spec_.source.outputs.empty() ? "" : spec_.source.outputs.front();
}

void SpecParser::StepShapeError(const YAML::Node& item, const SourceMark& mark) {
  if (item.IsMap()) {
    std::vector<std::string> keys;
    for (const Entry& k : MapEntries(r_, item)) keys.push_back(k.key);
    r_.Error(
        mark,
        "a graph step must have exactly one key, the op name; this one has " +
            std::to_string(keys.size()) + ": " + TickList(keys),
        keys.size() > 1
            ? "indent the parameters under the op, e.g. `- " + keys[0] + ": {" + keys[1] + ": " +
                  (item[keys[1]].IsScalar() ? item[keys[1]].Scalar() : std::string("...")) + "}`"
            : "write `- op: {param: value}`");
  } else {
    r_.Error(
        mark, "a graph step must be a map with one key, the op name, got " + Describe(item),
        item.IsScalar() ? "write `- " + item.Scalar() + ": {}`" : "write `- op: {param: value}`");
  }
}

bool SpecParser::CheckStepOp(const Entry& step, const OpDef* op,
                             const std::vector<std::string>& graph_ops) {
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
  return op_ok;
}

bool SpecParser::StepParams(const Entry& step, std::vector<Entry>& params) {
  bool shape_ok = true;
  if (step.value.IsMap()) {
    params = MapEntries(r_, step.value);
  } else if (!step.value.IsNull()) {
    r_.Error(
        step.value_mark,
        "the parameters of " + Tick(step.key) + " must be a map, got " + Describe(step.value),
        "e.g. `- " + step.key + ": {param: value}`, or `- " + step.key + ": {}` for the defaults");
    shape_ok = false;
  }
  return shape_ok;
}

void SpecParser::StepInputs(const Entry* in, RawStep& s, bool& names_ok) {
  if (in) {
    auto take = [&](const YAML::Node& n, const SourceMark& m) {
      if (!n.IsScalar() || n.Scalar().empty()) {
        r_.Error(m, "`in` of " + Tick(s.op_name) + " must name a tensor, got " + Describe(n));
        names_ok = false;
        return;
      }
      if (!IsIdentifier(n.Scalar())) {
        r_.Error(
            m, "`in` of " + Tick(s.op_name) + ": tensor name " + Tick(n.Scalar()) + " is not valid",
            "name a tensor: letters, digits and `_`, starting with a letter or `_`, e.g. "
            "`in: image`");
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
  } else if (std::string d = DefaultInput(); !d.empty()) {
    s.in_names.push_back(d);
    s.in_marks.push_back(s.mark);
  }
}

void SpecParser::StepOutput(const Entry* out, RawStep& s, bool& names_ok) {
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
}

bool SpecParser::CheckInputCount(const OpDef& op, const Entry* in, const RawStep& s,
                                 bool names_ok) {
  bool count_ok = true;
  if (!in && s.in_names.empty()) {
    count_ok = false;  // no default input: the source or the previous item is broken
  } else if (op.num_inputs >= 0 && names_ok &&
             static_cast<int>(s.in_names.size()) != op.num_inputs) {
    r_.Error(in ? in->value_mark : s.mark,
             Tick(op.name) + " takes " + std::to_string(op.num_inputs) +
                 (op.num_inputs == 1 ? " input" : " inputs") + ", got " +
                 std::to_string(s.in_names.size()) +
                 (s.in_names.empty() ? "" : " (" + TickList(s.in_names) + ")"),
             op.num_inputs == 1 ? "name one tensor, e.g. `in: image`" : "");
    count_ok = false;
  }
  return count_ok;
}

}  // namespace sluice::spec_internal
