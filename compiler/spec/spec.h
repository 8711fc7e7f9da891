// The validated spec: what the front end hands to the IR builder.
//
// Every value has been checked against the op registry's declarations and has
// its defaults filled in; every node keeps the source mark it came from so that
// later stages (type inference, placement) can still point at the user's text.
// Strings may still contain ${VAR} references: they bind at load time.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ops/param.h"
#include "sluice/result.h"

namespace sluice {

struct OpDef;

// One entry of `graph:` (or the source, or the batch).
struct SpecStep {
  const OpDef* op = nullptr;
  SourceMark mark;                         // the op's key (e.g. `decode_jpeg:`)
  std::vector<std::string> inputs;         // tensor names read, in order
  std::vector<SourceMark> input_marks;     // where each input was named (or the op mark)
  std::vector<std::string> outputs;        // tensor names written, in order
  std::vector<SourceMark> output_marks;
  bool explicit_out = false;               // the user wrote `out:`
  ParamList params;                        // validated, defaults filled
  std::map<std::string, SourceMark> param_marks;  // where each user-given param was
};

struct Spec {
  std::string file;     // path as given to the compiler, used in marks
  int version = 1;      // `sluice:`
  std::string name;
  SpecStep source;      // a source-class op; outputs e.g. {jpg, cls}
  ParamList sampling;   // validated against SamplingParams()
  std::map<std::string, SourceMark> sampling_marks;
  std::vector<SpecStep> graph;
  SpecStep batch;       // the `batch` op; inputs are the field tensors, outputs the field names
  ParamList output;     // validated against OutputParams()
  std::map<std::string, SourceMark> output_marks;
};

class Diagnostics;

// Reads and validates a spec, adding every problem found to `diags` and
// carrying on, so that one run reports all of a spec's mistakes. The returned
// Spec is complete only when no error was added; with errors it holds what
// could be recovered (a step whose op is unknown has op == nullptr and is left
// out of `graph`), so later stages may still check the rest.
Spec ParseSpecText(const std::string& text, const std::string& file, Diagnostics& diags);
// Same, reading `path` (an unreadable file is one diagnostic).
Spec ParseSpecFile(const std::string& path, Diagnostics& diags);

}  // namespace sluice
