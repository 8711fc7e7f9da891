#include "runtime/kernels/kernel_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string_view>

namespace sluice::runtime {
namespace {

// The Halide runtime's error messages on this thread since the last
// ClearHalideError(): filled by OnHalideError (installed in every kernels.so
// by KernelLibrary::Open in place of halide_default_error, which prints and
// calls abort()). A fixed array: the handler allocates nothing, and a failure
// on one thread never shows in another's error. The kernels run their loops
// on the calling thread (no Halide thread pool), so a kernel's messages land
// in its caller's buffer.
constexpr size_t kHalideErrorCapacity = 1024;
thread_local char t_halide_error[kHalideErrorCapacity];
thread_local size_t t_halide_error_len = 0;

// halide_error_handler_t: appends `msg` (a failure may report more than one;
// "; " between them, trailing newlines dropped, truncated at the capacity)
// and returns, so the failing Halide call returns its error code.
void OnHalideError(void* /*user_context*/, const char* msg) {
  if (msg == nullptr) return;
  size_t n = std::strlen(msg);
  while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) --n;
  size_t& len = t_halide_error_len;
  const size_t room = kHalideErrorCapacity - 1;
  if (len > 0 && len + 2 <= room) {
    std::memcpy(t_halide_error + len, "; ", 2);
    len += 2;
  }
  const size_t take = std::min(n, room - std::min(len, room));
  std::memcpy(t_halide_error + len, msg, take);
  len += take;
  t_halide_error[len] = '\0';
}

using HalideErrorHandler = void (*)(void*, const char*);
using SetHalideErrorHandlerFn = HalideErrorHandler (*)(HalideErrorHandler);

}  // namespace

void ClearHalideError() {
  t_halide_error_len = 0;
  t_halide_error[0] = '\0';
}

std::string_view LastHalideError() { return {t_halide_error, t_halide_error_len}; }

std::string HalideFailure(const std::string& what, int rc) {
  std::string text = what + " failed with Halide error code " + std::to_string(rc);
  if (t_halide_error_len > 0) {
    text += ": ";
    text.append(t_halide_error, t_halide_error_len);
  }
  return text;
}

struct KernelLibrary::Handle {
  void* dl = nullptr;
  int (*copy_to_host)(void*, halide_buffer_t*) = nullptr;
  int (*device_free)(void*, halide_buffer_t*) = nullptr;
  int (*reuse_device_allocations)(void*, bool) = nullptr;
  std::mutex kept_mutex;
  std::vector<std::shared_ptr<const void>> kept;  // released after dlclose
  // Returns the runtime's cached device allocations to the driver (reuse
  // stays on); 0, or the Halide error code. 0 without a Halide runtime.
  int ReleaseCachedDeviceMemory() {
    if (!dl || !device_free || !reuse_device_allocations) return 0;
    const int rc = reuse_device_allocations(nullptr, false);
    reuse_device_allocations(nullptr, true);
    return rc;
  }
  ~Handle() {
    // dlclose runs the Halide runtime's destructors (its CUDA module cache is
    // unloaded in the contexts `kept` still holds); `kept` is destroyed after.
    // The device allocations cached by the runtime go back first, while the
    // contexts they belong to still live.
    ReleaseCachedDeviceMemory();
    if (dl) dlclose(dl);
  }
};

halide_type_t HalideElementType(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return halide_type_t(halide_type_uint, 8);
    case DType::kFloat16:
      return halide_type_t(halide_type_float, 16);
    case DType::kBFloat16:
      return halide_type_t(halide_type_bfloat, 16);
    default:
      return halide_type_t(halide_type_float, 32);
  }
}

void SampleOutputDims(const TensorType& output, halide_dimension_t dims[3]) {
  const int32_t h = static_cast<int32_t>(output.dims[output.height_axis()]);
  const int32_t w = static_cast<int32_t>(output.dims[output.width_axis()]);
  const int32_t c = static_cast<int32_t>(output.dims[output.channel_axis()]);
  if (output.layout == Layout::kCHW) {
    dims[0] = {0, w, 1, 0};
    dims[1] = {0, h, w, 0};
    dims[2] = {0, c, w * h, 0};
  } else {
    dims[0] = {0, c, 1, 0};
    dims[1] = {0, w, c, 0};
    dims[2] = {0, h, c * w, 0};
  }
}

Status Kernel::Run(const ImageView& in, const SampleArgs& a, void* out) const {
  if (!fn_) return MakeError(ErrorCode::kInternal, "kernel not loaded");
  if (in.channels != in_channels_ || in.height < 1 || in.width < 1 || !in.data ||
      in.row_stride < in.width * in.channels) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "kernel input must be a non-empty " + std::to_string(in_channels_) +
                         "-channel image, got " + std::to_string(in.height) + "x" +
                         std::to_string(in.width) + "x" + std::to_string(in.channels));
  }
  // Halide's per-buffer limit (2^31 - 1 bytes spanned; targets without
  // large_buffers), checked here so that it is the image's error, not the
  // kernel's: only an image over ~715 MP RGB (a raised max_pixels) reaches it.
  if (const int64_t span = (in.height - 1) * in.row_stride + in.width * in.channels;
      span > kMaxKernelInputBytes) {
    return MakeError(ErrorCode::kCorruptData,
                     "a " + std::to_string(in.width) + "x" + std::to_string(in.height) + "x" +
                         std::to_string(in.channels) + " image (" + std::to_string(span) +
                         " bytes) is over the fused kernels' input limit of " +
                         std::to_string(kMaxKernelInputBytes) + " bytes",
                     "lower the decode op's max_pixels, or decode with a crop (decode pushdown)");
  }
  halide_dimension_t in_dims[3] = {
      {0, static_cast<int32_t>(in.channels), 1, 0},
      {0, static_cast<int32_t>(in.width), static_cast<int32_t>(in.channels), 0},
      {0, static_cast<int32_t>(in.height), static_cast<int32_t>(in.row_stride), 0}};
  halide_buffer_t in_buf{};
  in_buf.host = const_cast<uint8_t*>(in.data);
  in_buf.type = halide_type_t(halide_type_uint, 8);
  in_buf.dimensions = 3;
  in_buf.dim = in_dims;
  if (cuda_) in_buf.flags = halide_buffer_flag_host_dirty;

  halide_dimension_t out_dims[3];
  SampleOutputDims(output_, out_dims);
  halide_buffer_t out_buf{};
  out_buf.host = static_cast<uint8_t*>(out);
  out_buf.type = HalideElementType(output_.dtype);
  out_buf.dimensions = 3;
  out_buf.dim = out_dims;

  const AxisArgs& y = a.y;
  const AxisArgs& x = a.x;
  ClearHalideError();
  int rc = fn_(&in_buf, y.flip, y.offset, y.valid_lo, y.valid_hi, y.resized, y.window_start,
               y.window, y.src_lo, y.src_hi, y.taps, x.flip, x.offset, x.valid_lo, x.valid_hi,
               x.resized, x.window_start, x.window, x.src_lo, x.src_hi, x.taps, a.fill, a.draws[0],
               a.draws[1], a.draws[2], a.draws[3], a.draws[4], a.draws[5], a.draws[6], a.draws[7],
               a.draws[8], a.draws[9], a.draws[10], a.draws[11], a.draws[12], a.draws[13],
               a.draws[14], a.draws[15], &out_buf);
  if (cuda_) {
    if (rc == 0 && out_buf.device) rc = copy_to_host_(nullptr, &out_buf);
    if (out_buf.device) device_free_(nullptr, &out_buf);
    if (in_buf.device) device_free_(nullptr, &in_buf);
  }
  if (rc != 0) return MakeError(ErrorCode::kInternal, HalideFailure("fused kernel", rc));
  return Ok();
}

Status CheckCpuSupports(const std::vector<std::string>& targets) {
  if (targets.empty()) return MakeError(ErrorCode::kUnsupported, "the plan has no CPU kernels");
  __builtin_cpu_init();
  for (const std::string& target : targets) {
    bool ok = target.starts_with("x86-64-");
    auto has = [&](const char* f) {
      return ("-" + target + "-").find(std::string("-") + f + "-") != std::string::npos;
    };
    if (has("sse41") && !__builtin_cpu_supports("sse4.1")) ok = false;
    if (has("avx") && !__builtin_cpu_supports("avx")) ok = false;
    if (has("avx2") && !__builtin_cpu_supports("avx2")) ok = false;
    if (has("fma") && !__builtin_cpu_supports("fma")) ok = false;
    if (has("f16c") && !__builtin_cpu_supports("avx")) ok = false;  // f16c ships with AVX CPUs
    if ((has("avx512") || has("avx512_skylake")) &&
        !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
          __builtin_cpu_supports("avx512cd"))) {
      ok = false;
    }
    if (ok) return Ok();
  }
  std::string list;
  for (const std::string& t : targets) list += (list.empty() ? "" : ", ") + t;
  return MakeError(ErrorCode::kUnsupported,
                   "no CPU target in the plan's kernels runs on this CPU (built for: " + list + ")",
                   "recompile the plan with a baseline target this CPU supports, e.g. "
                   "x86-64-linux-sse41");
}

Result<KernelLibrary> KernelLibrary::Open(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return MakeError(ErrorCode::kNotFound, "kernel library " + path + " does not exist",
                     "recompile the plan with `sluice compile`");
  }
  void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* err = dlerror();
    return MakeError(ErrorCode::kCorruptData,
                     "kernel library " + path + " cannot be loaded: " + (err ? err : "?"),
                     "the file is damaged or not for this machine; recompile the plan");
  }
  // Halide failures (a violated buffer constraint, a failed allocation, a CUDA
  // error) become error codes with their messages kept, not abort().
  if (auto set_handler =
          reinterpret_cast<SetHalideErrorHandlerFn>(dlsym(dl, "halide_set_error_handler"))) {
    set_handler(&OnHalideError);
  }
  KernelLibrary lib;
  lib.handle_ = std::make_shared<Handle>();
  lib.handle_->dl = dl;
  lib.handle_->copy_to_host =
      reinterpret_cast<int (*)(void*, halide_buffer_t*)>(dlsym(dl, "halide_copy_to_host"));
  lib.handle_->device_free =
      reinterpret_cast<int (*)(void*, halide_buffer_t*)>(dlsym(dl, "halide_device_free"));
  lib.handle_->reuse_device_allocations =
      reinterpret_cast<int (*)(void*, bool)>(dlsym(dl, "halide_reuse_device_allocations"));
  lib.path_ = path;
  return lib;
}

Status KernelLibrary::ReleaseCachedDeviceMemory() const {
  if (!handle_) return Ok();
  ClearHalideError();
  if (const int rc = handle_->ReleaseCachedDeviceMemory(); rc != 0) {
    return MakeError(ErrorCode::kInternal,
                     HalideFailure("releasing the cached device allocations of " + path_, rc));
  }
  return Ok();
}

void KernelLibrary::KeepUntilUnloaded(std::shared_ptr<const void> owner) const {
  if (!handle_ || !owner) return;
  std::lock_guard lock(handle_->kept_mutex);
  for (const auto& k : handle_->kept) {
    if (k == owner) return;
  }
  handle_->kept.push_back(std::move(owner));
}

void* KernelLibrary::Symbol(const std::string& name) const {
  if (!handle_ || !handle_->dl) return nullptr;
  return dlsym(handle_->dl, name.c_str());
}

Result<Kernel> KernelLibrary::CpuKernel(const FusedChain& chain) const {
  dlerror();
  void* sym = dlsym(handle_->dl, chain.symbol.c_str());
  if (!sym) {
    return MakeError(ErrorCode::kNotFound, "kernel `" + chain.symbol + "` is missing from " + path_,
                     "kernels.so does not match plan.json; recompile the plan");
  }
  Kernel k;
  k.library_ = handle_;
  k.fn_ = reinterpret_cast<FusedKernelFn>(sym);
  k.output_ = chain.output;
  k.in_channels_ = chain.input.dims.size() == 3 ? chain.input.dims[2] : 3;
  return k;
}

Result<Kernel> KernelLibrary::CudaKernel(const FusedChain& chain) const {
  const std::string symbol = chain.symbol + kCudaSuffix;
  dlerror();
  void* sym = dlsym(handle_->dl, symbol.c_str());
  if (!sym) {
    return MakeError(ErrorCode::kNotFound, "CUDA kernel `" + symbol + "` is missing from " + path_,
                     "the plan was compiled without CUDA kernels");
  }
  if (!handle_->copy_to_host || !handle_->device_free) {
    return MakeError(ErrorCode::kCorruptData, path_ + " has CUDA kernels but no Halide runtime");
  }
  Kernel k;
  k.fn_ = reinterpret_cast<FusedKernelFn>(sym);
  k.output_ = chain.output;
  k.in_channels_ = chain.input.dims.size() == 3 ? chain.input.dims[2] : 3;
  k.cuda_ = true;
  k.library_ = handle_;
  k.copy_to_host_ = handle_->copy_to_host;
  k.device_free_ = handle_->device_free;
  return k;
}

}  // namespace sluice::runtime
