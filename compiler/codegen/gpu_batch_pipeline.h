// Code generation for a fusion group split between CPU and GPU
// (FusedChain::gpu_from >= 0; see ops/fusion/fused_chain.h and kernel_abi.h).
//
// CpuPartChain gives the chain of steps [0, gpu_from) as a FusedChain of its
// own (symbol + kCpuPartSuffix, output the static uint8 HWC staging image),
// which the ordinary per-sample pipeline (chain_pipeline.h) compiles for the
// CPU targets. BuildGpuBatchPipeline builds the batch-wide CUDA pipeline of
// steps [gpu_from, end) over n staging images: one launch per batch, one GPU
// thread per output pixel (16x16 tiles, batch index on the grid's z axis),
// with the same arithmetic as the pointwise tail of the per-sample pipelines
// (and so of the reference implementations in ops/reference).
#pragma once

#include <Halide.h>

#include <vector>

#include "ops/fusion/fused_chain.h"
#include "sluice/result.h"

namespace sluice {

// Checks the split: 0 < gpu_from < steps.size(), every step from gpu_from on
// an op whose entry has OpDef::gpu_batch (the one GPU-eligibility predicate,
// also used by placement through GpuSplitPoints), steps before it producing
// uint8 HWC (by the ops' type rules). Errors: kUnsupported naming the
// offending step.
Status CheckGpuSplit(const FusedChain& chain);

// The static uint8 HWC staging type of a split chain: the output height and
// width, the channels after steps [0, gpu_from). The chain must pass
// CheckGpuSplit.
Result<TensorType> StagingType(const FusedChain& chain);

// Steps [0, gpu_from) as a chain: symbol + kCpuPartSuffix, the same input and
// op ids (so ComputeSampleArgs of the whole chain applies to it), output
// StagingType(chain), gpu_from = -1.
Result<FusedChain> CpuPartChain(const FusedChain& chain);

namespace codegen_internal {

struct GpuBatchPipeline {
  Halide::Pipeline pipeline;
  std::vector<Halide::Argument> args;  // in (uint8, 4-D), out implied
};

// The batch kernel of steps [gpu_from, end), Func named symbol +
// kGpuBatchSuffix, scheduled for `target` (a CUDA target). ABI: GpuBatchKernelFn.
Result<GpuBatchPipeline> BuildGpuBatchPipeline(const FusedChain& chain,
                                               const Halide::Target& target);

}  // namespace codegen_internal
}  // namespace sluice
