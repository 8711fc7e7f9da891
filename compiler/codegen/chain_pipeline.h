// Internal to codegen: builds the Halide pipeline of one fused chain.
//
// The pipeline's arguments are exactly the kernel ABI of ops/fusion/kernel_abi.h
// (input buffer, 20 int32 + 4 float scalars, output buffer). `gpu` selects the
// CUDA schedule (blocks of 16x16 output pixels) instead of the CPU one.
#pragma once

#include <Halide.h>

#include <vector>

#include "ops/fusion/fused_chain.h"
#include "sluice/result.h"

namespace sluice::codegen_internal {

struct ChainPipeline {
  Halide::Pipeline pipeline;
  std::vector<Halide::Argument> args;
};

// The chain must pass CheckFusable.
Result<ChainPipeline> BuildChainPipeline(const FusedChain& chain, bool gpu);

}  // namespace sluice::codegen_internal
