// Compiler passes and the one ordered list they run from.
//
// Each pass lives in its own file (compiler/passes/<name>.cc) whose top comment
// says what it rewrites and why. A pass reads the graph and its PassContext
// (never the driver's inputs: files, options, profiles on disk), reports
// user-facing problems (a type mismatch in the spec) to the context's
// Diagnostics with the node's source mark and keeps going.
#pragma once

#include <string>
#include <vector>

#include "common/hardware_profile.h"
#include "compiler/ir/ir.h"
#include "compiler/spec/diagnostics.h"

namespace sluice {

// What the driver hands every pass besides the graph.
struct PassContext {
  Diagnostics& diags;
  // The hardware profile (`--profile`; null: no prediction, everything stays
  // on the CPU under output.device auto). Outlives the pass run.
  const HardwareProfile* profile = nullptr;
  // A CPU budget in cores that overrides output.cpu_budget (`--cpu-budget`;
  // -1: none).
  int cpu_budget_override = -1;
};

struct Pass {
  std::string name;  // as used by --emit=ir-after=NAME
  std::string doc;   // one line
  void (*run)(Graph& graph, PassContext& context);
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
Status RunPasses(Graph& graph, PassContext& context, const std::string& stop_after = {});
// The same with a context of `diags` only (no profile, no budget override).
Status RunPasses(Graph& graph, Diagnostics& diags, const std::string& stop_after = {});

// The individual passes (one file each).
void InferTypes(Graph& graph, Diagnostics& diags);       // type_inference.cc
void ComposeGeometry(Graph& graph, Diagnostics& diags);  // geometry_composition.cc
void FusePointwise(Graph& graph, Diagnostics& diags);    // pointwise_fusion.cc
void DecidePushdown(Graph& graph, PassContext& context);  // decode_pushdown.cc
void PlaceStages(Graph& graph, PassContext& context);     // placement.cc
void PlanMemory(Graph& graph, PassContext& context);      // memory_planning.cc

// The batch buffer layout of `fields` (bytes_per_sample and
// staging_bytes_per_sample set; offsets are filled in) for `batch_size`
// samples: blocks in the given order, each 64-byte aligned; a buffer is at
// least 64 bytes. Shared by memory_planning and the plan writer (which drops
// the staging of GPU tails the code generator did not build).
MemoryPlan LayOutBatch(std::vector<FieldMemory> fields, int64_t batch_size);

}  // namespace sluice
