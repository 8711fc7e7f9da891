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
// The pass called `name`, or null.
const Pass* FindPass(const std::string& name);
// "type_inference, ..." in pipeline order, for messages.
std::string PassNames();

// Runs the pipeline up to and including `stop_after` (all passes when empty),
// verifying the graph before the first pass and after each pass. Stops early
// when a pass adds errors (the caller sees them in `diags`; the returned status
// is still ok). An unknown `stop_after` (kInvalidArgument, hint naming the
// valid passes) or a verifier failure (kInternal, naming the pass) is an error.
Status RunPasses(Graph& graph, Diagnostics& diags, const std::string& stop_after = {});

// The individual passes (one file each).
void InferTypes(Graph& graph, Diagnostics& diags);  // type_inference.cc
void ComposeGeometry(Graph& graph, Diagnostics& diags);  // geometry_composition.cc
void FusePointwise(Graph& graph, Diagnostics& diags);    // pointwise_fusion.cc
void PlaceStages(Graph& graph, Diagnostics& diags);      // placement.cc

}  // namespace sluice
