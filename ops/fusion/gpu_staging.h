// The staging image of a GPU-split fusion group (docs/gpu.md): what the
// group's CPU part writes per sample into the pinned batch buffer, and what
// its batch-wide CUDA tail reads after the host-to-device copy.
//
// Contract: uint8, static, planar CHW (channel planes of H x W bytes), with the
// values of the whole chain at the cut. Planar because the CPU part's
// interleaved (HWC) uint8 stores cost more than the whole chain's CHW float16
// output on an AVX-512 Xeon (bench/RESULTS.md, "GPU path on an NVIDIA H200"),
// and so that neighbouring CUDA threads read neighbouring bytes. Plans written
// before recorded HWC staging; the runtime refuses those with a hint to
// recompile.
#pragma once

#include "sluice/types.h"

namespace sluice {

// The staging type for the chain's value at the cut (a static uint8 image in
// any layout): the same extents, planar CHW.
inline TensorType GpuStagingType(const TensorType& at_cut) {
  return Image(DType::kUInt8, Layout::kCHW, at_cut.dims[at_cut.height_axis()],
               at_cut.dims[at_cut.width_axis()], at_cut.dims[at_cut.channel_axis()]);
}

}  // namespace sluice
