// Internal to codegen: the Halide lowerings of pointwise ops, one function per
// op, registered by OpDef (lowering.cc) beside the op families' files
// (color_lower.cc, pointwise_lower.cc). The per-sample pipeline
// (chain_pipeline.cc, CPU and CUDA) and the batch-wide GPU pipeline
// (gpu_batch_pipeline.cc) both build their pointwise tail by calling LowerStep
// for each step, so an op's arithmetic is written once.
//
// Contract of a lowering: given the previous step's values state.cur at
// (c, x, y[, n]) (float, already rounded to state.dtype, state.channels
// channels), return the step's value there, rounded to the dtype it leaves in
// state.dtype, and update state.channels / pre / affine / whole_image / roots.
// It must compute exactly what the op's reference implementation computes
// (within the tolerances of docs/kernels.md).
//
// A fusable pointwise op (FusionRole::kPointwise) without a lowering is a
// compile error (kInternal naming the op), never an identity.
#pragma once

#include <Halide.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/fusion/fused_chain.h"
#include "sluice/result.h"

namespace sluice::codegen_internal {

// The pointwise tail while it is being built.
struct TailState {
  Halide::Func cur;  // the previous step's values: float, rounded to `dtype`
  DType dtype = DType::kUInt8;
  int channels = 3;
  // cur's value before its last rounding (what a float16 output conversion
  // rounds itself); unused by the batch pipeline.
  Halide::Expr pre;
  // While the tail is a per-channel affine map of the resampled uint8 value u:
  // pre = affine[c].first * u + affine[c].second; nullopt once it is not.
  std::optional<std::vector<std::pair<double, double>>> affine;
  // Set by a step that needs its whole input image before any output pixel
  // (an image-wide reduction): the pipeline then computes the resampled image
  // at root.
  bool whole_image = false;
  std::vector<Halide::Func> roots;  // reductions to compute at root
};

// What a lowering sees of its step.
struct LowerContext {
  const ChainStep* step = nullptr;
  Halide::Var c, x, y;
  std::vector<Halide::Var> batch;   // {n} in the batch-wide pipeline, else empty
  int width = 0, height = 0;        // the image's static extent
  std::vector<Halide::Expr> draws;  // the step's draw slots (OpDef::draw_slots scalars)
  std::string name;                 // unique prefix for the step's Func names

  // f(c, x, y[, n]).
  Halide::Expr At(const Halide::Func& f, Halide::Expr ce, Halide::Expr xe, Halide::Expr ye) const;
  // The pure arguments (c, x, y[, n]).
  std::vector<Halide::Var> Args() const;
  // The batch arguments alone ([n]).
  std::vector<Halide::Expr> BatchArgs() const;
};

// The step's value (see the contract above), or an error (kInternal /
// kUnsupported) naming the op.
using LowerFn = Result<Halide::Expr> (*)(const LowerContext& ctx, TailState& state);

// The lowering registered for `op`, or null.
LowerFn FindLowering(const OpDef* op);

// Appends ctx.step to the tail: calls its lowering and makes a Func of the
// result the new state.cur. Errors: kInternal when the op has no lowering.
Status LowerStep(const LowerContext& ctx, TailState& state);

// Registration: lowering.cc calls each family's function once, on first use.
using LoweringTable = std::vector<std::pair<const OpDef*, LowerFn>>;
void RegisterColorLowerings(LoweringTable& table);      // color_lower.cc
void RegisterPointwiseLowerings(LoweringTable& table);  // pointwise_lower.cc

}  // namespace sluice::codegen_internal
