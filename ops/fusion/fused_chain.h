// FusedChain: one fusion group as the code generator and the runtime see it.
//
// The compiler's fusion passes cut the per-sample graph into groups; each
// group that reads a decoded image and writes a fixed-size tensor is described
// by a FusedChain: the ops it fuses (in spec order, with their explicit
// parameters and the op ids that key their random draws), the input type (a
// decoded uint8 HWC image of run-time size) and the static output type that is
// written straight into a batch slot. plan.json stores exactly this (op names,
// params, op ids, symbol), so the runtime rebuilds the FusedChain from the
// registry without the compiler.
//
// Normal form a chain must have to be fused (checked by the geometry
// composition pass): resample-class ops (crop, center_crop, pad, random_flip,
// resize, random_resized_crop) first, with at most one that rescales (resize or
// random_resized_crop), then pointwise-class ops (color_jitter, grayscale,
// normalize, layout, cast). The entries' FusionRole says which is which, and
// GeometryFusion::rescales which geometry ops rescale. Other orders are not fused; report.txt says
// why, and the runtime runs such a batch field's chain (a FusedChain with symbol
// "reference:<field>", plan.json "reference_chains") per sample on the
// reference implementations instead (ReferenceChain, ops/fusion/sample_args.h):
// same values, much slower.
#pragma once

#include <string>
#include <vector>

#include "ops/param.h"
#include "ops/registry.h"
#include "ops/types.h"

namespace sluice {

struct ChainStep {
  const OpDef* op = nullptr;
  ParamList params;  // every declared parameter, defaults explicit
  int op_id = 0;     // keys this op's random draws: SampleRng(seed, epoch, sample, op_id)
};

struct FusedChain {
  std::string symbol;            // the kernel's function name in kernels.so
  TensorType input;              // uint8[?,?,C] HWC: the decoded image
  TensorType output;             // static: e.g. float16[3,224,224] CHW
  std::vector<ChainStep> steps;  // resample ops, then pointwise ops, in spec order
  // GPU split chosen by placement (compiler/passes/placement.cc): steps
  // [0, gpu_from) run per sample on the CPU and write a static uint8 HWC image
  // (the "staging" tensor) into a pinned batch buffer; steps [gpu_from, end) —
  // deterministic pointwise ops only (grayscale, normalize, layout, cast; never
  // an op with random draws) — run batch-wide on the GPU in one launch.
  // -1: the whole chain runs per sample on the CPU (symbol). A chain with a
  // split still has its whole-chain CPU kernel, the fallback without a GPU.
  int gpu_from = -1;
};

// Whether some geometry step of `chain` takes a sub-window of its input
// (GeometryFusion::crops: crop, center_crop, random_resized_crop), or changes
// the scale (GeometryFusion::rescales: resize, random_resized_crop).
inline bool ChainCrops(const FusedChain& chain) {
  for (const ChainStep& s : chain.steps) {
    if (s.op != nullptr && s.op->fusion == FusionRole::kGeometry && s.op->geometry.crops) {
      return true;
    }
  }
  return false;
}
inline bool ChainRescales(const FusedChain& chain) {
  for (const ChainStep& s : chain.steps) {
    if (s.op != nullptr && s.op->fusion == FusionRole::kGeometry && s.op->geometry.rescales) {
      return true;
    }
  }
  return false;
}

}  // namespace sluice
