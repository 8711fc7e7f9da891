// Tensor-name resolution for the spec front end (SpecParser, spec_parser.h):
// the definitions of every name (the source's outputs, then each step's `out`,
// duplicates reported), SSA renaming (`image`, `image.1`, ...), each input
// resolved to the definition it reads (forward references, unknown names with
// a "did you mean"), a topological order with cycles reported, broken steps
// and their readers dropped from the Spec's graph, and the batch's fields
// resolved against the final definition of each name.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/spec/spec_parser.h"
#include "ops/registry.h"

namespace sluice::spec_internal {

void SpecParser::Resolve() {
  const int n = static_cast<int>(steps_.size());
  const std::vector<int> step_def = DefineNames();
  AssignSsaNames();
  ResolveInputs();
  std::vector<std::vector<int>> preds(n), succs(n);
  const std::vector<int> order = TopologicalOrder(preds, succs);
  std::vector<bool> dropped(n, false);
  if (static_cast<int>(order.size()) < n) {
    ReportCycles(order, preds, succs, dropped);
  }
  EmitGraph(order, step_def, dropped);
  ResolveBatch(dropped);
  CheckDecodesAgree();
}

std::vector<int> SpecParser::DefineNames() {
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
                     "; choose a new name, or read it with `in: " + s.out_name + "` to replace it");
        s.broken = true;
        // Still define it so readers resolve; it gets its own SSA name.
      }
    }
    step_def[i] = static_cast<int>(defs_.size());
    defs_.push_back(Def{s.out_name, i, s.out_mark, ""});
  }
  return step_def;
}

void SpecParser::AssignSsaNames() {
  // SSA names: the first definition of a name keeps it, later ones get .1, .2, ...
  std::map<std::string, int> count;
  for (Def& d : defs_) {
    int k = count[d.name]++;
    d.ssa = k == 0 ? d.name : d.name + "." + std::to_string(k);
  }
}

void SpecParser::ResolveInputs() {
  const int n = static_cast<int>(steps_.size());
  for (int i = 0; i < n; ++i) {
    RawStep& s = steps_[i];
    s.in_defs.assign(s.in_names.size(), -1);
    if (s.op_name.empty()) continue;
    for (size_t k = 0; k < s.in_names.size(); ++k) ResolveInput(i, k);
  }
  RejectSelfFedForwardReferences();
}

void SpecParser::ResolveInput(int i, size_t k) {
  RawStep& s = steps_[i];
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
    ReportUnknownInput(i, k);
  } else {
    s.broken = true;  // the source is broken; its names are unknown
  }
}

void SpecParser::ReportUnknownInput(int i, size_t k) {
  RawStep& s = steps_[i];
  const std::string& name = s.in_names[k];
  std::vector<std::string> others;  // names defined by other steps or the source
  for (const Def& d : defs_) {
    if (d.step != i && d.name != name &&
        std::find(others.begin(), others.end(), d.name) == others.end()) {
      others.push_back(d.name);
    }
  }
  std::string near = DidYouMean(name, others);
  r_.Error(
      s.in_marks[k], "unknown tensor " + Tick(name) + " read by " + Tick(s.op_name),
      near.empty() ? "defined tensors: " + TickList(others) : "did you mean " + Tick(near) + "?");
  s.in_defs[k] = -1;
  s.broken = true;
}

// A forward reference to a later step's *default* `out` (its input's name,
// passed on) that leads back to this step is a typo, not a loop: in
// `- resize: {in: imgae}` then `- normalize: {...}`, `imgae` exists later only
// because resize's own (unknown) input flowed on. Such a reference is an
// unknown tensor. A later explicit `out:` is a real forward reference, and a
// loop through one is reported as a cycle.
void SpecParser::RejectSelfFedForwardReferences() {
  const int n = static_cast<int>(steps_.size());
  auto reaches = [&](int from, int target) {  // does `from` read (transitively) from `target`?
    std::vector<bool> seen(n, false);
    std::vector<int> stack = {from};
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      if (x == target) return true;
      if (seen[x]) continue;
      seen[x] = true;
      for (int d : steps_[x].in_defs) {
        if (d >= 0 && defs_[d].step >= 0) stack.push_back(defs_[d].step);
      }
    }
    return false;
  };
  for (int i = 0; i < n; ++i) {
    RawStep& s = steps_[i];
    for (size_t k = 0; k < s.in_defs.size(); ++k) {
      const int d = s.in_defs[k];
      if (d < 0 || defs_[d].step <= i || steps_[defs_[d].step].explicit_out) continue;
      if (reaches(defs_[d].step, i)) ReportUnknownInput(i, k);
    }
  }
}

std::vector<int> SpecParser::TopologicalOrder(std::vector<std::vector<int>>& preds,
                                              std::vector<std::vector<int>>& succs) const {
  const int n = static_cast<int>(steps_.size());
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
  return order;
}

void SpecParser::EmitGraph(const std::vector<int>& order, const std::vector<int>& step_def,
                           std::vector<bool>& dropped) {
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
}

std::string SpecParser::JoinPlain(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

const Def* SpecParser::FirstDef(const std::string& name) const {
  for (const Def& d : defs_)
    if (d.name == name) return &d;
  return nullptr;
}

std::string SpecParser::DefWhere(const Def& d) const {
  if (d.step < 0) {
    return "by the source (" + Tick(spec_.source.op ? spec_.source.op->name : "source") +
           ", line " + std::to_string(d.mark.line) + ")";
  }
  return "by " + Tick(steps_[d.step].op_name) + " at line " + std::to_string(d.mark.line);
}

void SpecParser::ReportCycles(const std::vector<int>& order,
                              const std::vector<std::vector<int>>& preds,
                              const std::vector<std::vector<int>>& succs,
                              std::vector<bool>& dropped) {
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
    auto line = [&](int step) { return " (line " + std::to_string(steps_[step].mark.line) + ")"; };
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

void SpecParser::ResolveBatch(const std::vector<bool>& dropped) {
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
    if (!IsIdentifier(key)) {  // a field name is a key of every batch, in Python too
      r_.Error(km, "batch field name " + Tick(key) + " is not valid",
               "use letters, digits and `_`, starting with a letter or `_`, e.g. `image`");
      continue;
    }
    fields.emplace(key, std::pair{it->second.Scalar(), r_.MarkOf(it->second, km)});
    key_marks.emplace(key, km);
  }
  std::map<int, std::string> field_of_def;  // a step's output -> the first field naming it
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
    // A plan runs one kernel per step output and writes its result to one
    // field; the source's outputs (the label) may fill several.
    if (defs_[last].step >= 0) {
      auto [first, inserted] = field_of_def.emplace(last, field);
      if (!inserted) {
        r_.Error(mark,
                 "batch fields " + Tick(first->second) + " and " + Tick(field) +
                     " both name tensor " + Tick(name) +
                     "; a tensor from the graph fills one field",
                 "keep one of the two fields (copy the batch tensor in your training code if "
                 "you need it twice)");
        continue;
      }
    }
    spec_.batch.inputs.push_back(defs_[last].ssa);
    spec_.batch.input_marks.push_back(mark);
    spec_.batch.outputs.push_back(field);
    spec_.batch.output_marks.push_back(key_marks[field]);
  }
}

// Every sample is decoded once and that image feeds every chain, so all
// decode steps must be the same op with the same parameters (say, one rgb and
// one gray decode compiled, and the plan then failed to load).
void SpecParser::CheckDecodesAgree() {
  const SpecStep* first = nullptr;
  for (const SpecStep& step : spec_.graph) {
    if (step.op == nullptr || step.op->op_class != OpClass::kDecode) continue;
    if (first == nullptr) {
      first = &step;
      continue;
    }
    const std::string where = " at line " + std::to_string(first->mark.line);
    if (step.op != first->op) {
      r_.Error(step.mark,
               "a second decode, " + Tick(step.op->name) + ", differs from " +
                   Tick(first->op->name) + where + "; each sample is decoded once",
               "decode once and read that tensor in every branch");
      continue;
    }
    for (const auto& [name, value] : step.params) {
      auto other = first->params.find(name);
      if (other != first->params.end() && other->second == value) continue;
      auto mark = step.param_marks.find(name);
      const std::string theirs =
          other == first->params.end() ? "unset" : name + ": " + other->second.ToString();
      r_.Error(mark != step.param_marks.end() ? mark->second : step.mark,
               "this " + Tick(step.op->name) + " has " + name + ": " + value.ToString() +
                   " but the one" + where + " has " + theirs +
                   "; each sample is decoded once, so every decode must match",
               name == "color" ? "decode once with color: rgb and convert the gray branch, e.g. "
                                 "`- grayscale: {in: image, out: gray}`"
                               : "give every decode the same " + Tick(name) +
                                     ", or decode once and read that tensor in every branch");
      break;
    }
  }
}

}  // namespace sluice::spec_internal
