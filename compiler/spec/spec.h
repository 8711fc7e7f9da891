// The validated spec: what the front end hands to the IR builder.
//
// Every value has been checked against the op registry's declarations and has
// its defaults filled in; every node keeps the source mark it came from so that
// later stages (type inference, placement) can still point at the user's text.
// Strings may still contain ${VAR} references: they bind at load time.
//
// Tensor names. In the spec a step's `in` defaults to the previous step's
// output (the first step: the source's first output, `jpg`) and its `out` to
// its first input, so rebinding one name (`image` -> `image`) is the common
// case. An input refers to the latest definition of its name before the step
// in list order (source outputs come before every step); if there is none, to
// the one later step that defines it (a forward reference). In the Spec every
// name is a unique value name (SSA): the first definition of a name keeps it,
// later definitions of the same name are renamed `image.1`, `image.2`, ... in
// list order, and every input is rewritten to the value it refers to. `graph`
// is in a topological order (list order where the spec was already in order),
// so BuildGraph can map names to values in one pass. User-written tensor names
// are identifiers ([A-Za-z_][A-Za-z0-9_]*), so they never collide with `x.N`.
//
// With errors, the Spec keeps only consistent parts: a step that is broken
// (unknown op, bad parameter, bad names, in a cycle) is left out of `graph`,
// and so is every step that reads from a left-out step; batch fields whose
// tensor was left out are left out of `batch` too. Every name used in `graph`
// and `batch.inputs` is still defined by the source or an earlier step.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ops/param.h"
#include "sluice/result.h"

namespace sluice {

struct OpDef;

// One entry of `graph:` (or the source, or the batch).
struct SpecStep {
  const OpDef* op = nullptr;
  SourceMark mark;                      // the op's key (e.g. `decode_jpeg:`)
  std::vector<std::string> inputs;      // tensor names read, in order
  std::vector<SourceMark> input_marks;  // where each input was named (or the op mark)
  std::vector<std::string> outputs;     // tensor names written, in order
  std::vector<SourceMark> output_marks;
  bool explicit_out = false;  // the user wrote `out:`
  ParamList params;           // validated, defaults filled
  // Where each user-given param's value was (its key when the value is empty).
  // Fields of a kSection or kStringMap param are recorded too, as
  // "section.field" (e.g. "on_error.policy", "fields.label").
  std::map<std::string, SourceMark> param_marks;
};

struct Spec {
  std::string file;  // path as given to the compiler, used in marks
  int version = 1;   // `sluice:`
  std::string name;
  SpecStep source;     // a source-class op; outputs e.g. {jpg, cls}; mark = the `format`
                       // value; op == nullptr when `source` is missing or broken
  ParamList sampling;  // validated against SamplingParams()
  std::map<std::string, SourceMark> sampling_marks;
  std::vector<SpecStep> graph;
  // The `batch` op: outputs are the field names in the order of params["fields"]
  // (a map, so sorted by field name); inputs are the field tensors' value names,
  // each the final definition of the name the user wrote. params["fields"]
  // keeps the names as written.
  SpecStep batch;
  ParamList output;  // validated against OutputParams()
  std::map<std::string, SourceMark> output_marks;
};

class Diagnostics;

// Reads and validates a spec, adding every problem found to `diags` and
// carrying on, so that one run reports all of a spec's mistakes. The returned
// Spec is complete only when no error was added; with errors it holds what
// could be recovered (a step whose op is unknown has op == nullptr and is left
// out of `graph`), so later stages may still check the rest. A spec over the
// limits of compiler/spec/spec_limits.h (size, nesting, alias expansion) is
// one diagnostic, found before anything else is read.
Spec ParseSpecText(const std::string& text, const std::string& file, Diagnostics& diags);
// Same, reading `path` (an unreadable file is one diagnostic).
Spec ParseSpecFile(const std::string& path, Diagnostics& diags);
// The text of the spec file `path`, read with a bound: at most kMaxSpecBytes
// + 1 bytes (so /dev/zero or a FIFO is never read forever). nullopt, with one
// diagnostic, when `path` cannot be opened, is a directory, a block device or
// a socket, or holds more than kMaxSpecBytes. A pipe or character device
// (`<(...)`, /dev/stdin) is read like a file, up to the same bound.
std::optional<std::string> ReadSpecFile(const std::string& path, Diagnostics& diags);

}  // namespace sluice
