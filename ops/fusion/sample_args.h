// Per-sample kernel arguments of a fused chain, and the reference chain.
//
// A fused kernel computes, for output pixel (y, x, c), exactly what the chain's
// reference implementations compute step by step. Its geometry (every crop,
// center_crop, constant pad, flip and the one resize / random_resized_crop) is
// composed per axis into the AxisArgs below; its random parameters (crop box,
// flips, colour-jitter factors) are drawn here, on the host, with the same
// SampleRng keys and draw order as the reference implementations, so the
// kernel stays deterministic and placement-independent.
//
// Per axis (y uses AxisArgs y, x uses x), for output index o in [0, out):
//   o' = flip ? out - 1 - o : o
//   if o' not in [valid_lo, valid_hi): the value is `fill`
//   r  = o' + offset                       (index on the resampled grid, in [0, resized))
//   window pixel j (0 <= j < window) is source pixel s = window_start + j when
//   s is in [src_lo, src_hi) (a sub-range of the image), else `fill`;
//   the value at r resamples the window (extent `window`) to `resized` pixels
//   exactly as ref::ResampleTaps(window, resized, filter, antialias) does: taps
//   restricted to the window and renormalised there (the reference crops before
//   resizing). A chain without a rescaling op has resized == window and is an
//   integer copy: value = window pixel r.
// `taps` bounds the number of taps of any output index on this axis (the
// kernel's reduction extent); 1 for a copy.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "ops/fusion/fused_chain.h"
#include "ops/fusion/kernel_abi.h"
#include "ops/reference/ref_tensor.h"
#include "sluice/result.h"

namespace sluice {

struct AxisArgs {
  int32_t flip = 0;
  int32_t offset = 0;
  int32_t valid_lo = 0, valid_hi = 0;
  int32_t resized = 0;
  int32_t window_start = 0, window = 0;
  int32_t src_lo = 0, src_hi = 0;
  int32_t taps = 1;
  bool operator==(const AxisArgs&) const = default;
};

// Draw slots: the random pointwise steps of a chain (OpDef::draw_slots > 0),
// in step order, take consecutive slots of SampleArgs::draws, draw_slots each
// (DrawSlotOffset); so two steps of the same op have their own draws. Unused
// slots are 0.
struct SampleArgs {
  AxisArgs y, x;
  float fill = 0.0f;  // value (already rounded to uint8) of pad / out-of-image pixels
  float draws[kMaxDrawSlots] = {};
  bool operator==(const SampleArgs&) const = default;
};

// The first draw slot of step `step` of `chain` (the draw_slots of the
// pointwise steps before it, summed).
int DrawSlotOffset(const FusedChain& chain, size_t step);
// The draw slots the whole chain uses.
int DrawSlotCount(const FusedChain& chain);

// Whether a chain is in the fusable normal form this codegen handles (see
// fused_chain.h); the error (kUnsupported) names the op and the reason.
// Not fusable: an op whose entry has FusionRole::kNone, a geometry op after a
// pointwise op, two rescaling ops, a step its GeometryFusion::unfusable
// rejects (pad with mode edge/reflect), constant fills that differ between
// ops (pad fill vs the zeros of crop/center_crop), more than kMaxDrawSlots
// draw slots, a channel count other than 1 or 3, or a non-static output.
Status CheckFusable(const FusedChain& chain);

// The kernel arguments of one sample: input image in_h x in_w, random draws
// keyed by SampleRng(seed, epoch, sample, step.op_id). Walks the steps: a
// geometry step's GeometryFusion::compose updates the composition, a random
// pointwise step's OpDef::draw fills its draw slots. Errors (kInvalidArgument):
// empty input, or a size that does not produce the chain's static output
// (for example a resize to the shorter side whose result a crop does not fix).
// No heap allocation.
Result<SampleArgs> ComputeSampleArgs(const FusedChain& chain, int64_t in_h, int64_t in_w,
                                     uint64_t seed, uint64_t epoch, uint64_t sample);

// Runs the chain's reference implementations step by step (ctx.rng =
// SampleRng(seed, epoch, sample, op_id)); the oracle for fused kernels.
// `image` is a uint8 HWC image.
Result<RefTensor> ReferenceChain(const FusedChain& chain, const RefTensor& image, uint64_t seed,
                                 uint64_t epoch, uint64_t sample);

}  // namespace sluice
