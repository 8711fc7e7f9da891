// Compiler passes and the one ordered list they run from.
//
// Each pass lives in its own file (compiler/passes/<name>.cc) whose top comment
// says what it rewrites and why. A pass reads the graph and its PassContext
// (never the driver's inputs: files, options, profiles on disk), reports
// user-facing problems (a type mismatch in the spec) to the context's
// Diagnostics with the node's source mark and keeps going.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/hardware_profile.h"
#include "compiler/ir/ir.h"
#include "compiler/spec/diagnostics.h"

namespace sluice {

// The predicted loader throughput of one placement (PlacementAlternative's
// numbers).
struct PlacementPrediction {
  double images_per_second = 0;
  double cpu_s_per_sample = 0;  // CPU seconds per sample (one core)
  double gpu_s_per_sample = 0;
  double h2d_bytes_per_sample = 0;
  std::string limit;  // "cpu", "gpu" or "bus"
};
// Predicts `graph` (typed, fused) with fusion group g split at gpu_from[g]
// (-1: all on the CPU) for a CPU budget of `cpu_budget` cores (>= 1).
using PlacementPredictor = std::function<PlacementPrediction(
    const Graph& graph, const std::vector<int>& gpu_from, int cpu_budget)>;

// What the driver hands every pass besides the graph.
struct PassContext {
  Diagnostics& diags;
  // The hardware profile (`--profile`) the predictor below was made from.
  // Outlives the pass run. Placement reads it (cores, GPU, machine name) only
  // together with `predict`: a profile without a predictor counts as none.
  const HardwareProfile* profile = nullptr;
  // A CPU budget in cores that overrides output.cpu_budget (`--cpu-budget`;
  // -1: none).
  int cpu_budget_override = -1;
  // The throughput predictor for `profile` (the driver sets the cost model's,
  // compiler/cost/cost_model.h CostModelPredictor; passes never include the
  // cost model). Empty: no prediction, and under output.device auto
  // everything stays on the CPU.
  PlacementPredictor predict;
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
void InferTypes(Graph& graph, Diagnostics& diags);        // type_inference.cc
void ComposeGeometry(Graph& graph, Diagnostics& diags);   // geometry_composition.cc
void FusePointwise(Graph& graph, Diagnostics& diags);     // pointwise_fusion.cc
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
