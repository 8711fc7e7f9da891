// The C ABI of a generated fused kernel (shared by codegen and the runtime).
//
// Every kernel in kernels.so, CPU or CUDA, has exactly this signature, whatever
// its chain (arguments a chain does not use are ignored):
//
//   int SYMBOL(halide_buffer_t* in,                       // uint8, dims (c, x, y): HWC
//              int32 y.flip, y.offset, y.valid_lo, y.valid_hi, y.resized,
//                    y.window_start, y.window, y.src_lo, y.src_hi, y.taps,
//              int32 x.<same ten fields>,
//              float fill, draw0, ..., draw15,            // draw slots: SampleArgs::draws
//              halide_buffer_t* out);                     // the chain's output
//
// The draw slots carry the per-sample random values of the chain's random
// pointwise steps (e.g. a color_jitter step's three factors), each step at its
// own offset (DrawSlotOffset in sample_args.h), so two steps of one op draw
// independently. They are scalars (not a buffer) so that the CUDA kernel needs
// no per-sample host-to-device copy and Halide treats them as loop invariants.
//
// The output buffer's dims are (c, x, y) for an HWC output and (x, y, c) for
// CHW, each dense (innermost stride 1), element type the chain's output dtype.
// The CPU symbol is FusedChain::symbol (a Halide multitarget dispatcher that
// picks SSE4.1 / AVX2 / AVX-512 by the running CPU); the CUDA one is
// symbol + kCudaSuffix. Return value 0 = success, else a Halide error code.
#pragma once

#include <HalideRuntime.h>

#include <cstdint>
#include <iterator>

namespace sluice {

inline constexpr const char* kCudaSuffix = "_cuda";
// A chain split by placement (FusedChain::gpu_from >= 0) also has:
//   SYMBOL + kCpuPartSuffix: the CPU kernel of steps [0, gpu_from), exactly the
//     FusedKernelFn ABI above, writing the static uint8 HWC "staging" image
//     (dims (c, x, y), dense) from the same per-sample arguments as the whole
//     chain (ComputeSampleArgs of the whole chain);
//   SYMBOL + kGpuBatchSuffix: a GpuBatchKernelFn (below).
inline constexpr const char* kCpuPartSuffix = "_cpu_part";
inline constexpr const char* kGpuBatchSuffix = "_gpu_batch";
inline constexpr int kKernelIntArgs = 20;  // 10 per axis, y then x
// Float draw slots per kernel call (the most a fused chain may use).
inline constexpr int kMaxDrawSlots = 16;
inline constexpr int kKernelFloatArgs = 1 + kMaxDrawSlots;  // fill, then the draw slots

using FusedKernelFn = int (*)(halide_buffer_t*,                             //
                              int32_t, int32_t, int32_t, int32_t, int32_t,  // y
                              int32_t, int32_t, int32_t, int32_t, int32_t,  //
                              int32_t, int32_t, int32_t, int32_t, int32_t,  // x
                              int32_t, int32_t, int32_t, int32_t, int32_t,  //
                              float,                                        // fill
                              float, float, float, float, float, float, float, float,  // draws
                              float, float, float, float, float, float, float, float,  //
                              halide_buffer_t*);
static_assert(kMaxDrawSlots == 16, "FusedKernelFn lists 16 draw slots");

// The batch-wide CUDA kernel of steps [gpu_from, end) (deterministic pointwise
// ops only, so no per-sample arguments):
//   int SYMBOL_gpu_batch(halide_buffer_t* in,    // uint8, dims (c, x, y, n): n staging
//                                                //   images, dense, in device memory
//                        halide_buffer_t* out);  // the chain's output dims plus an
//                                                //   outermost n, dense, device memory
// Both buffers normally carry only a device allocation (halide_cuda_wrap_device_ptr
// or buffer.device + halide_cuda_device_interface()); the launch is enqueued on
// the stream the kernel library's shim returns (sluice_cuda_set_context, below)
// and the call returns without waiting for it. 0 = success, else a Halide error.
using GpuBatchKernelFn = int (*)(halide_buffer_t*, halide_buffer_t*);

// Exported by a kernels.so built with CUDA kernels (a shim compiled into it that
// overrides the Halide runtime's weak halide_cuda_acquire_context /
// halide_cuda_release_context / halide_cuda_get_stream): every CUDA kernel of
// the library then runs in `ctx` (a CUcontext, normally the device's primary
// context, shared with PyTorch) on `stream` (a CUstream; nullptr = the legacy
// default stream). Until it is called, the shim retains device 0's primary
// context itself and uses the default stream. Thread-safe (atomics); set it
// before launching, not while kernels of the library are being called.
using SetCudaContextFn = void (*)(void* ctx, void* stream);
inline constexpr const char* kSetCudaContextSymbol = "sluice_cuda_set_context";

// Names of the scalar arguments in order, for plan.json's argument layout.
inline constexpr const char* kKernelArgNames[] = {
    "y.flip", "y.offset", "y.valid_lo", "y.valid_hi", "y.resized", "y.window_start",
    "y.window", "y.src_lo", "y.src_hi", "y.taps", "x.flip", "x.offset", "x.valid_lo",
    "x.valid_hi", "x.resized", "x.window_start", "x.window", "x.src_lo", "x.src_hi", "x.taps",
    "fill", "draw0", "draw1", "draw2", "draw3", "draw4", "draw5", "draw6", "draw7", "draw8",
    "draw9", "draw10", "draw11", "draw12", "draw13", "draw14", "draw15"};
static_assert(std::size(kKernelArgNames) == kKernelIntArgs + kKernelFloatArgs);

}  // namespace sluice
