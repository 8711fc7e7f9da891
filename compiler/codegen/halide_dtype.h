// Internal to codegen: the element-type helpers both pipelines (per-sample
// chain_pipeline.cc and batch-wide gpu_batch_pipeline.cc) share, so that they
// round and store exactly alike.
#pragma once

#include <Halide.h>

#include "ops/types.h"

namespace sluice::codegen_internal {

// `e` (float) rounded to what `dtype` can hold, still as float: uint8 rounds
// half away from zero and saturates to [0, 255]; float16 / bfloat16 round to
// nearest; float32 is unchanged.
inline Halide::Expr RoundTo(DType dtype, Halide::Expr e) {
  switch (dtype) {
    case DType::kUInt8:
      return Halide::clamp(Halide::round(e), 0.0f, 255.0f);
    case DType::kFloat16:
      return Halide::cast<float>(Halide::cast(Halide::Float(16), e));
    case DType::kBFloat16:
      return Halide::cast<float>(Halide::cast(Halide::BFloat(16), e));
    default:
      return e;
  }
}

// The Halide element type of `dtype` (float32 for anything else).
inline Halide::Type HalideType(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return Halide::UInt(8);
    case DType::kFloat16:
      return Halide::Float(16);
    case DType::kBFloat16:
      return Halide::BFloat(16);
    default:
      return Halide::Float(32);
  }
}

// Bounds and strides of a dense per-sample output of w x h x c in `layout`
// (dims (x, y, c) for CHW, (c, x, y) for HWC, as in ops/fusion/kernel_abi.h).
inline void SetDenseSampleBounds(Halide::OutputImageParam ob, bool chw, int w, int h, int c) {
  if (chw) {
    ob.dim(0).set_bounds(0, w).set_stride(1);
    ob.dim(1).set_bounds(0, h).set_stride(w);
    ob.dim(2).set_bounds(0, c).set_stride(w * h);
  } else {
    ob.dim(0).set_bounds(0, c).set_stride(1);
    ob.dim(1).set_bounds(0, w).set_stride(c);
    ob.dim(2).set_bounds(0, h).set_stride(c * w);
  }
}

}  // namespace sluice::codegen_internal
