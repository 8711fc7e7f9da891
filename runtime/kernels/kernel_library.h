// Loading and running fused kernels from a plan's kernels.so (run side).
//
// The runtime does not link Halide or LLVM: it dlopens kernels.so (whose
// kernels carry their own Halide runtime), looks up each chain's symbol and
// calls it through the C ABI of ops/fusion/kernel_abi.h, building the
// halide_buffer_t descriptors on the stack: no heap allocation per call by
// this code. (Chains with color_jitter let the kernel allocate one scratch
// image for the contrast mean.)
//
// Halide run-time failures (a violated buffer constraint, a failed allocation,
// a CUDA error) never abort the process: Open installs an error handler in the
// library's Halide runtime that keeps the message in a per-thread buffer, so
// the failing call returns its error code and Kernel::Run an error with the
// message (LastHalideError() for functions called through Symbol()).
//
// Thread safety: a KernelLibrary is immutable after Open; Kernel::Run may be
// called concurrently from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/fusion/fused_chain.h"
#include "ops/fusion/kernel_abi.h"
#include "ops/fusion/sample_args.h"
#include "sluice/result.h"

namespace sluice::runtime {

// A uint8 HWC image in host memory: row r starts at data + r * row_stride.
struct ImageView {
  const uint8_t* data = nullptr;
  int64_t height = 0, width = 0, channels = 0;
  int64_t row_stride = 0;  // bytes; >= width * channels
};

// The most bytes a kernel's input image may span ((height - 1) * row_stride +
// width * channels): Halide's limit for one buffer.
inline constexpr int64_t kMaxKernelInputBytes = 2147483647;

// One kernel, bound to its chain's output type. Cheap to copy.
class Kernel {
 public:
  Kernel() = default;
  // Runs the kernel on one sample: `out` receives output.num_elements() elements
  // of the chain's output dtype in its layout (dense). `in.channels` must equal the
  // chain's input channels. Errors: kInvalidArgument (shape mismatch),
  // kCorruptData (the image spans more than kMaxKernelInputBytes: the sample's
  // fault, a bad sample for the loader), kInternal
  // (the kernel returned a Halide error code; the message has the code and
  // Halide's messages, e.g. "Constraint violated: in.extent.0 (4) == 3 (3)").
  Status Run(const ImageView& in, const SampleArgs& args, void* out) const;
  const TensorType& output() const { return output_; }
  bool cuda() const { return cuda_; }

 private:
  friend class KernelLibrary;
  FusedKernelFn fn_ = nullptr;
  std::shared_ptr<const void> library_;                     // keeps kernels.so loaded
  int (*copy_to_host_)(void*, halide_buffer_t*) = nullptr;  // CUDA only
  int (*device_free_)(void*, halide_buffer_t*) = nullptr;
  TensorType output_;
  int64_t in_channels_ = 3;
  bool cuda_ = false;
};

// The halide_type_t of a kernel buffer element of `dtype` (float32 for
// anything else).
halide_type_t HalideElementType(DType dtype);
// The dense dims of one sample of `output` in the kernel ABI's order:
// (x, y, c) for CHW, (c, x, y) for HWC (ops/fusion/kernel_abi.h). `dims`
// receives three entries; an outer batch dim, when there is one, has stride
// c * w * h.
void SampleOutputDims(const TensorType& output, halide_dimension_t dims[3]);

// The Halide error messages raised on this thread (by any kernels.so opened by
// KernelLibrary::Open) since the last ClearHalideError(), "; "-separated and
// truncated at 1 KiB; empty when none. For callers of a function obtained
// through KernelLibrary::Symbol (Kernel::Run clears and reports them itself):
// clear before the call, read after it returns nonzero. No allocation.
void ClearHalideError();
std::string_view LastHalideError();
// "WHAT failed with Halide error code RC", plus ": " and LastHalideError()
// when there is one.
std::string HalideFailure(const std::string& what, int rc);

// Whether this CPU can run at least one of `targets` (Halide target strings, as
// recorded in plan.json / KernelArtifact::cpu_targets). The multitarget
// dispatcher in kernels.so falls back to its last (baseline) target without a
// check, so the plan loader must call this first. Error: kUnsupported naming the
// targets.
Status CheckCpuSupports(const std::vector<std::string>& targets);

class KernelLibrary {
 public:
  // dlopens `path`. Errors: kNotFound (no such file), kCorruptData (not a
  // loadable shared library; the message has dlerror()).
  static Result<KernelLibrary> Open(const std::string& path);

  // The CPU kernel for `chain` (symbol chain.symbol). Errors: kNotFound (symbol
  // missing: the library does not match the plan), kUnsupported (no CPU target
  // in the library runs on this CPU: it was built without the SSE4.1 baseline
  // and this CPU lacks the features).
  Result<Kernel> CpuKernel(const FusedChain& chain) const;
  // The CUDA kernel (symbol + kCudaSuffix), called with host buffers: the Halide
  // CUDA runtime copies in and the output back. kNotFound when not built.
  Result<Kernel> CudaKernel(const FusedChain& chain) const;

  // The Halide runtime keeps device allocations freed by a CUDA kernel's run
  // in a cache for reuse (its default; at most 32, flushed when cuMemAlloc
  // fails). This returns the unused ones to the driver; reuse stays on. The
  // library also does it when it is unloaded. No-op for a CPU-only library.
  Status ReleaseCachedDeviceMemory() const;

  const std::string& path() const { return path_; }
  // dlsym of `name` in the library (nullptr when absent); the pointer stays
  // valid while this library or a copy of it (or a Kernel from it) lives.
  void* Symbol(const std::string& name) const;
  // Keeps `owner` alive until the library is unloaded, and releases it only
  // after dlclose. The Halide CUDA runtime inside kernels.so caches its modules
  // per context and unloads them from its destructor: a GPU stage passes its
  // device here so that the primary context outlives that cache (else the
  // unload hits a destroyed context, or a context re-created at the same
  // address finds stale modules). Thread-safe; keeping the same owner twice
  // keeps it once.
  void KeepUntilUnloaded(std::shared_ptr<const void> owner) const;

 private:
  struct Handle;
  std::shared_ptr<Handle> handle_;
  std::string path_;
};

}  // namespace sluice::runtime
