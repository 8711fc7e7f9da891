// The ordered pass list and the driver that runs it (see pass.h).
#include <string>

#include "compiler/passes/pass.h"

namespace sluice {

const std::vector<Pass>& PassPipeline() {
  static const std::vector<Pass> passes = {
      {"type_inference", "derive every tensor's dtype, rank, layout and extents", &InferTypes},
      {"geometry_composition",
       "mark each decode's crop/flip/pad/resize run as one composed resample (fusion group)",
       &ComposeGeometry},
      {"pointwise_fusion",
       "extend each fusion group with the colour/normalize/layout/cast ops up to the batch",
       &FusePointwise},
      {"placement",
       "move each group's deterministic pointwise tail to the GPU when the cost model predicts "
       "more images/s (needs a hardware profile)",
       &PlaceStages},
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
    pass.run(graph, diags);
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
