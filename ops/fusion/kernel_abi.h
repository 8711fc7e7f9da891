// The C ABI of a generated fused kernel (shared by codegen and the runtime).
//
// Every kernel in kernels.so, CPU or CUDA, has exactly this signature, whatever
// its chain (arguments a chain does not use are ignored):
//
//   int SYMBOL(halide_buffer_t* in,                       // uint8, dims (c, x, y): HWC
//              int32 y.flip, y.offset, y.valid_lo, y.valid_hi, y.resized,
//                    y.window_start, y.window, y.src_lo, y.src_hi, y.taps,
//              int32 x.<same ten fields>,
//              float fill, brightness, contrast, saturation,
//              halide_buffer_t* out);                     // the chain's output
//
// The output buffer's dims are (c, x, y) for an HWC output and (x, y, c) for
// CHW, each dense (innermost stride 1), element type the chain's output dtype.
// The CPU symbol is FusedChain::symbol (a Halide multitarget dispatcher that
// picks SSE4.1 / AVX2 / AVX-512 by the running CPU); the CUDA one is
// symbol + kCudaSuffix. Return value 0 = success, else a Halide error code.
#pragma once

#include <HalideRuntime.h>

#include <cstdint>

namespace sluice {

inline constexpr const char* kCudaSuffix = "_cuda";
inline constexpr int kKernelIntArgs = 20;   // 10 per axis, y then x
inline constexpr int kKernelFloatArgs = 4;  // fill, brightness, contrast, saturation

using FusedKernelFn = int (*)(halide_buffer_t*,                                  //
                              int32_t, int32_t, int32_t, int32_t, int32_t,       // y
                              int32_t, int32_t, int32_t, int32_t, int32_t,       //
                              int32_t, int32_t, int32_t, int32_t, int32_t,       // x
                              int32_t, int32_t, int32_t, int32_t, int32_t,       //
                              float, float, float, float, halide_buffer_t*);

// Names of the scalar arguments in order, for plan.json's argument layout.
inline constexpr const char* kKernelArgNames[] = {
    "y.flip", "y.offset", "y.valid_lo", "y.valid_hi", "y.resized", "y.window_start",
    "y.window", "y.src_lo", "y.src_hi", "y.taps", "x.flip", "x.offset", "x.valid_lo",
    "x.valid_hi", "x.resized", "x.window_start", "x.window", "x.src_lo", "x.src_hi", "x.taps",
    "fill", "brightness", "contrast", "saturation"};

}  // namespace sluice
