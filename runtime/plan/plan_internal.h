// The inside of a loaded sluice::Plan (include/sluice/plan.h) for Sluice's own
// users (the runtime loader, the Python module, tests): the complete types of
// Plan's internal accessors (FusedChain, ParamList, GpuStage, the plan
// document, the kernels) and Plan::Impl.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/fusion/fused_chain.h"
#include "ops/param.h"
#include "ops/types.h"
#include "plan/plan_document.h"
#include "runtime/kernels/kernel_library.h"
#include "sluice/plan.h"

namespace sluice {

// A fusion group whose tail runs batch-wide on the GPU (FusedChain::gpu_from).
// Present only when placement split the group and CUDA kernels were built.
struct GpuStage {
  int gpu_from = -1;             // steps [gpu_from, end) run on the GPU
  std::string cpu_part_symbol;   // CPU kernel of steps [0, gpu_from): writes `staging`
  std::string gpu_batch_symbol;  // batch-wide CUDA kernel of the rest
  TensorType staging;            // static uint8 HWC: what crosses the bus per sample
};

struct Plan::Impl {
  std::string path;
  PlanDocument doc;
  ParamList source_params, sampling, batch, output;
  std::vector<FusedChain> chains;
  std::vector<std::string> chain_fields;
  std::vector<FusedChain> reference_chains;
  std::vector<std::string> reference_fields, reference_reasons;
  std::vector<std::optional<GpuStage>> gpu_stages;
  std::string decode_op;
  ParamList decode_params;
  TunedKnobs tuned;
  std::shared_ptr<const runtime::KernelLibrary> kernels;
  std::vector<std::shared_ptr<const runtime::Kernel>> cpu_kernels;
  std::vector<std::shared_ptr<const runtime::Kernel>> cpu_part_kernels;  // null: none
};

}  // namespace sluice
