// Compiler passes and the one ordered list they run from.
//
// Each pass lives in its own file (compiler/passes/<name>.cc) whose top comment
// says what it rewrites and why. A pass reports user-facing problems (a type
// mismatch in the spec) to Diagnostics with the node's source mark and keeps
// going; it returns an error only for internal failures.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/ir.h"
#include "compiler/spec/diagnostics.h"

namespace sluice {

struct Pass {
  std::string name;  // as used by --emit=ir-after=NAME
  std::string doc;   // one line
  void (*run)(Graph& graph, Diagnostics& diags);
};

// The passes in the order the compiler runs them.
const std::vector<Pass>& PassPipeline();

// Runs the pipeline up to and including `stop_after` (all passes when empty),
// verifying the graph after each pass. Stops early when a pass adds errors.
// An unknown `stop_after` is an error naming the valid pass names.
Status RunPasses(Graph& graph, Diagnostics& diags, const std::string& stop_after = {});

// The individual passes (one file each).
void InferTypes(Graph& graph, Diagnostics& diags);  // type_inference.cc

}  // namespace sluice
