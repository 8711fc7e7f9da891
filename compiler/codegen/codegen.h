// Halide code generation for fused chains (compile side; links Halide).
//
// CompileKernels turns each FusedChain into one Halide pipeline (see
// docs/kernels.md: separable two-pass antialiased resampling over the composed
// crop window, pointwise tail, output written in the chain's layout and dtype),
// AOT-compiles it for the CPU targets (one multitarget library: the runtime
// dispatches to the best the CPU supports) and, when enabled and available,
// for CUDA, and links everything into out_dir/kernels.so with the system C++
// compiler. The kernels' C ABI is ops/fusion/kernel_abi.h; their per-sample
// arguments come from ComputeSampleArgs (ops/fusion/sample_args.h).
//
// Files: intermediate files go to a fresh directory of this call's own,
// out_dir/kernels.build.XXXXXX, removed (with everything in it) when the call
// returns, whether it succeeded or not; kernels.so is linked there, fsynced and
// renamed over out_dir/kernels.so, so out_dir/kernels.so is always a whole
// library. Calls into one out_dir from several processes therefore never share
// a file (the last rename wins); to keep kernels.so and plan.json in step, the
// compile driver builds a whole plan in a directory of its own and swaps it in
// (compiler/driver/plan_output.h).
//
// Thread safety: CompileKernels may be called from one thread at a time (Halide's
// compiler has global state). Nothing is cached between calls.
#pragma once

#include <string>
#include <vector>

#include "ops/fusion/fused_chain.h"
#include "sluice/result.h"

namespace sluice {

struct CodegenOptions {
  // Halide target strings; the first is the baseline every x86-64 CPU must meet.
  std::vector<std::string> cpu_targets = {
      "x86-64-linux-sse41",
      "x86-64-linux-avx-avx2-f16c-fma-sse41",
      "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41",
  };
  bool cuda = true;  // also build CUDA kernels (symbol + "_cuda")
  std::string cuda_target = "x86-64-linux-cuda-cuda_capability_80";
  std::string cxx = "c++";  // used to link kernels.so
};

struct KernelArtifact {
  std::string library;                   // absolute path of kernels.so
  std::vector<std::string> cpu_targets;  // as built
  std::string cuda_target;               // empty when CUDA kernels were not built
  std::string cuda_note;                 // why not, when cuda was requested but not built
  struct Kernel {
    std::string symbol;       // CPU multitarget entry
    std::string cuda_symbol;  // empty without CUDA
    // Only for a chain with gpu_from >= 0 and CUDA built (see FusedChain):
    // the CPU kernel of steps [0, gpu_from) (same ABI, writes the uint8 HWC
    // staging image) and the batch-wide CUDA kernel of steps [gpu_from, end)
    // (ABI: ops/fusion/kernel_abi.h, GpuBatchKernelFn). Empty otherwise.
    std::string cpu_part_symbol;
    std::string gpu_batch_symbol;
    TensorType staging;  // uint8 HWC staging image; meaningful only with gpu_batch_symbol
  };
  std::vector<Kernel> kernels;         // one per chain, same order
  std::vector<std::string> arg_names;  // the scalar argument layout (kernel_abi.h)
};

// With CUDA built, kernels.so also contains a small shim (sluice_cuda_set_context,
// kernel_abi.h) that overrides the Halide runtime's CUDA context and stream
// hooks. A chain with gpu_from >= 0 is checked by CheckGpuSplit
// (gpu_batch_pipeline.h): kUnsupported when the split is not a pointwise tail.
// Without CUDA the split is ignored (the whole-chain kernels still serve).

// Whether this Halide build can generate CUDA (PTX) code.
bool HalideHasCuda();

// Errors: kUnsupported (a chain not in fusable form, see CheckFusable),
// kInvalidArgument (bad/duplicate symbol), kIo (out_dir not writable; nothing
// in it is changed then, nor on any other error), kInternal
// (Halide or the linker failed; the message has their output).
Result<KernelArtifact> CompileKernels(const std::vector<FusedChain>& chains,
                                      const std::string& out_dir, const CodegenOptions& options);

}  // namespace sluice
