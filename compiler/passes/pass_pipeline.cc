// The ordered pass list and the driver that runs it (see pass.h).
#include <string>

#include "compiler/passes/pass.h"

namespace sluice {

const std::vector<Pass>& PassPipeline() {
  static const std::vector<Pass> passes = {
      {"type_inference", "derive every tensor's dtype, rank, layout and extents",
       [](Graph& g, PassContext& c) { InferTypes(g, c.diags); }},
      {"geometry_composition",
       "mark each decode's crop/flip/pad/resize run as one composed resample (fusion group)",
       [](Graph& g, PassContext& c) { ComposeGeometry(g, c.diags); }},
      {"pointwise_fusion",
       "extend each fusion group with the colour/normalize/layout/cast ops up to the batch",
       [](Graph& g, PassContext& c) { FusePointwise(g, c.diags); }},
      {"decode_pushdown",
       "decide per decode whether the fused chain's crop window becomes the decoder's region of "
       "interest and whether DCT-scaled decode may be used",
       &DecidePushdown},
      {"placement",
       "move each group's deterministic pointwise tail to the GPU when the cost model predicts "
       "more images/s (needs a hardware profile)",
       &PlaceStages},
      {"memory_planning",
       "lay out the batch buffer: per field dtype, sample shape, bytes and offset; GPU staging",
       &PlanMemory},
  };
  return passes;
}

std::string PassNames() {
  std::string names;
  for (const Pass& pass : PassPipeline()) {
    if (!names.empty()) names += ", ";
    names += pass.name;
  }
  return names;
}

const Pass* FindPass(const std::string& name) {
  for (const Pass& pass : PassPipeline()) {
    if (pass.name == name) return &pass;
  }
  return nullptr;
}

Status RunPasses(Graph& graph, Diagnostics& diags, const std::string& stop_after) {
  PassContext context{diags};
  return RunPasses(graph, context, stop_after);
}

Status RunPasses(Graph& graph, PassContext& context, const std::string& stop_after) {
  Diagnostics& diags = context.diags;
  if (!stop_after.empty() && FindPass(stop_after) == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument, "unknown pass `" + stop_after + "`",
                     "valid passes, in order: " + PassNames());
  }
  if (auto status = VerifyGraph(graph); !status) {
    status.error().message = "before the first pass: " + status.error().message;
    return status;
  }
  for (const Pass& pass : PassPipeline()) {
    size_t errors_before = diags.errors().size();
    pass.run(graph, context);
    if (auto status = VerifyGraph(graph); !status) {
      status.error().message = "after pass " + pass.name + ": " + status.error().message;
      return status;
    }
    if (diags.errors().size() > errors_before) break;
    if (pass.name == stop_after) break;
  }
  return Ok();
}

}  // namespace sluice
