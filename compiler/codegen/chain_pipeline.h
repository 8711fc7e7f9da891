// Internal to codegen: builds the Halide pipeline of one fused chain.
//
// The pipeline's arguments are exactly the kernel ABI of ops/fusion/kernel_abi.h
// (input buffer, 20 int32 + 4 float scalars, output buffer). `gpu` selects the
// CUDA schedule (blocks of 16x16 output pixels) instead of the CPU one.
// `target` is the target the pipeline is about to be compiled for (one of the
// CPU targets of a multitarget build, or the CUDA target), so the schedule may
// use what that target has (vector width, F16C, AVX-512).
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
Result<ChainPipeline> BuildChainPipeline(const FusedChain& chain, bool gpu,
                                         const Halide::Target& target);

}  // namespace sluice::codegen_internal
