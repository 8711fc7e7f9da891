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

}  // namespace sluice::codegen_internal
