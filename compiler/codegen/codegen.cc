#include "compiler/codegen/codegen.h"

#include <Halide.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <utility>

#include "compiler/codegen/chain_pipeline.h"
#include "compiler/codegen/gpu_batch_pipeline.h"
#include "ops/fusion/kernel_abi.h"
#include "ops/fusion/plan_format.h"
#include "ops/fusion/sample_args.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

bool ValidSymbol(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  });
}

// Runs a shell command, returning its combined output and exit status.
std::pair<int, std::string> RunCommand(const std::string& cmd) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int rc = pclose(pipe);
  return {rc, out};
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

template <class F>
Status CatchHalide(const std::string& what, F&& f) {
  try {
    f();
  } catch (const Halide::Error& e) {
    return MakeError(ErrorCode::kInternal, what + ": Halide: " + e.what());
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, what + ": " + e.what());
  }
  return Ok();
}

// Compiled into kernels.so when it has CUDA kernels: strong definitions of the
// Halide runtime's weak CUDA context/stream hooks (they win over the runtime's
// at link time), so every launch runs in the context and on the stream the
// Sluice runtime set through sluice_cuda_set_context (kernel_abi.h). Without
// that call: device 0's primary context (retained once, never released:
// it lives as long as the process) and the default stream.
constexpr const char* kCudaShimSource = R"shim(
#include <dlfcn.h>
#include <atomic>

namespace {
std::atomic<void*> g_ctx{nullptr};
std::atomic<void*> g_stream{nullptr};

void* PrimaryContext() {
  static void* const ctx = []() -> void* {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    using InitFn = int (*)(unsigned);
    using GetFn = int (*)(int*, int);
    using RetainFn = int (*)(void**, int);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
    auto retain = reinterpret_cast<RetainFn>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    int dev = 0;
    void* c = nullptr;
    if (!init || !get || !retain || init(0) != 0 || get(&dev, 0) != 0 || retain(&c, dev) != 0) {
      return nullptr;
    }
    return c;
  }();
  return ctx;
}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) void sluice_cuda_set_context(void* ctx, void* stream) {
  g_stream.store(stream, std::memory_order_release);
  g_ctx.store(ctx, std::memory_order_release);
}

__attribute__((visibility("default"))) int halide_cuda_acquire_context(void* user_context,
                                                                       void** ctx, bool create) {
  void* c = g_ctx.load(std::memory_order_acquire);
  if (c == nullptr && create) {
    c = PrimaryContext();
    if (c == nullptr) return -1;  // CUDA_ERROR_*: no driver or no device
  }
  *ctx = c;
  return 0;
}

__attribute__((visibility("default"))) int halide_cuda_release_context(void* user_context) {
  return 0;
}

__attribute__((visibility("default"))) int halide_cuda_get_stream(void* user_context, void* ctx,
                                                                  void** stream) {
  *stream = g_ctx.load(std::memory_order_acquire) == ctx
                ? g_stream.load(std::memory_order_acquire)
                : nullptr;
  return 0;
}
}  // extern "C"
)shim";

}  // namespace

bool HalideHasCuda() {
  static const bool has = [] {
    try {
      Halide::Func f("sluice_cuda_probe");
      Halide::Var x("x"), xo("xo"), xi("xi");
      f(x) = x * 2;
      f.gpu_tile(x, xo, xi, 16);
      Halide::Target t("x86-64-linux-cuda-cuda_capability_80-no_runtime");
      Halide::Module m = f.compile_to_module({}, "sluice_cuda_probe", t);
      return true;
    } catch (...) {
      return false;
    }
  }();
  return has;
}

namespace {

// Every chain has a unique C symbol and is in fusable form (and a valid GPU
// split when it has one).
Status CheckChains(const std::vector<FusedChain>& chains) {
  std::set<std::string> seen;
  for (const FusedChain& chain : chains) {
    if (!ValidSymbol(chain.symbol) || !seen.insert(chain.symbol).second) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "kernel symbol `" + chain.symbol + "` is not a unique C identifier");
    }
    SLUICE_RETURN_IF_ERROR(CheckFusable(chain));
    if (chain.gpu_from >= 0) SLUICE_RETURN_IF_ERROR(CheckGpuSplit(chain));
  }
  return Ok();
}

// The Halide targets of one build: the CPU targets best-first, and the CUDA
// target when CUDA is asked for and this Halide can generate it (else
// `cuda` is false and art.cuda_note says why).
struct BuildTargets {
  std::vector<Halide::Target> cpu;
  bool cuda = false;
  Halide::Target cuda_target;
};

Result<BuildTargets> ResolveTargets(const CodegenOptions& options, KernelArtifact& art) {
  BuildTargets t;
  // Halide picks the first target (in list order) the CPU supports and treats the
  // last as the baseline, so pass them best-first; options list the baseline first.
  SLUICE_RETURN_IF_ERROR(CatchHalide("parsing CPU targets", [&] {
    for (auto it = options.cpu_targets.rbegin(); it != options.cpu_targets.rend(); ++it) {
      t.cpu.push_back(Halide::Target(*it).with_feature(Halide::Target::NoRuntime));
    }
  }));
  t.cuda = options.cuda;
  if (t.cuda && !HalideHasCuda()) {
    t.cuda = false;
    art.cuda_note =
        "this Halide build cannot generate CUDA (PTX) code (LLVM without the NVPTX target); "
        "CUDA kernels were not built";
  }
  if (t.cuda) {
    SLUICE_RETURN_IF_ERROR(CatchHalide("parsing the CUDA target", [&] {
      t.cuda_target = Halide::Target(options.cuda_target).with_feature(Halide::Target::NoRuntime);
    }));
  }
  return t;
}

// `chain` for every CPU target into PREFIX.a (and .h), exporting `chain.symbol`.
Status CompileCpuMultitarget(const FusedChain& chain, const std::string& prefix,
                             const std::vector<Halide::Target>& targets) {
  return CatchHalide("compiling `" + chain.symbol + "` for the CPU", [&] {
    // compile_multitarget with the symbol given explicitly: the Func's own
    // name is uniquified per process by Halide (a second plan compiled in
    // the same process, e.g. from Python, would export sluice_chain_0_1).
    // The pipeline is built once per target so its schedule can use what
    // that target has.
    Halide::compile_multitarget(chain.symbol,
                                {{Halide::OutputFileType::c_header, prefix + ".h"},
                                 {Halide::OutputFileType::static_library, prefix + ".a"}},
                                targets, {}, [&](const std::string& fn, const Halide::Target& t) {
                                  auto cpu =
                                      codegen_internal::BuildChainPipeline(chain, /*gpu=*/false, t);
                                  if (!cpu) throw std::runtime_error(cpu.error().message);
                                  return cpu->pipeline.compile_to_module(cpu->args, fn, t);
                                });
  });
}

// One chain's archives (appended to `archives`) and its kernel entry: the CPU
// kernel, its CUDA twin, and for a split chain the CPU part and the
// batch-wide CUDA tail.
Result<KernelArtifact::Kernel> CompileChain(const FusedChain& chain, const fs::path& work,
                                            const BuildTargets& t,
                                            std::vector<std::string>& archives) {
  KernelArtifact::Kernel k{chain.symbol, "", "", "", {}};
  // Fail early (with a clear error) before Halide starts compiling.
  if (auto probe = codegen_internal::BuildChainPipeline(chain, /*gpu=*/false, t.cpu.back());
      !probe) {
    return std::unexpected(probe.error());
  }
  const std::string prefix = (work / chain.symbol).string();
  SLUICE_RETURN_IF_ERROR(CompileCpuMultitarget(chain, prefix, t.cpu));
  archives.push_back(prefix + ".a");
  if (!t.cuda) return k;
  auto gpu = codegen_internal::BuildChainPipeline(chain, /*gpu=*/true, t.cuda_target);
  if (!gpu) return std::unexpected(gpu.error());
  k.cuda_symbol = chain.symbol + kCudaSuffix;
  const std::string gprefix = (work / k.cuda_symbol).string();
  SLUICE_RETURN_IF_ERROR(CatchHalide("compiling `" + chain.symbol + "` for CUDA", [&] {
    gpu->pipeline.compile_to_static_library(gprefix, gpu->args, k.cuda_symbol, t.cuda_target);
  }));
  archives.push_back(gprefix + ".a");
  if (chain.gpu_from < 0) return k;
  // Split group: the CPU part (multitarget, like the whole chain) and the
  // batch-wide CUDA tail.
  auto part = CpuPartChain(chain);
  if (!part) return std::unexpected(part.error());
  auto batch = codegen_internal::BuildGpuBatchPipeline(chain, t.cuda_target);
  if (!batch) return std::unexpected(batch.error());
  const std::string pprefix = (work / part->symbol).string();
  SLUICE_RETURN_IF_ERROR(CompileCpuMultitarget(*part, pprefix, t.cpu));
  archives.push_back(pprefix + ".a");
  const std::string bsym = chain.symbol + kGpuBatchSuffix;
  const std::string bprefix = (work / bsym).string();
  SLUICE_RETURN_IF_ERROR(CatchHalide("compiling `" + bsym + "` for CUDA", [&] {
    batch->pipeline.compile_to_static_library(bprefix, batch->args, bsym, t.cuda_target);
  }));
  archives.push_back(bprefix + ".a");
  k.cpu_part_symbol = part->symbol;
  k.gpu_batch_symbol = bsym;
  k.staging = part->output;
  return k;
}

// The CUDA context shim (kCudaShimSource), compiled into WORK; its object.
Result<std::string> CompileCudaShim(const CodegenOptions& options, const fs::path& work) {
  const std::string shim_src = (work / "sluice_cuda_shim.cc").string();
  const std::string shim_obj = (work / "sluice_cuda_shim.o").string();
  FILE* f = std::fopen(shim_src.c_str(), "w");
  if (f == nullptr) return MakeError(ErrorCode::kIo, "cannot write " + shim_src);
  const bool wrote = std::fputs(kCudaShimSource, f) >= 0;
  if (std::fclose(f) != 0 || !wrote) return MakeError(ErrorCode::kIo, "cannot write " + shim_src);
  const std::string cc =
      Quote(options.cxx) + " -std=c++17 -O2 -fPIC -c -o " + Quote(shim_obj) + " " + Quote(shim_src);
  auto [src, sout] = RunCommand(cc);
  if (src != 0) {
    return MakeError(ErrorCode::kInternal, "compiling the CUDA shim failed: " + cc + "\n" + sout);
  }
  return shim_obj;
}

// Flushes the file at `path` to disk; 0 or an errno.
int SyncFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

// Links the archives, the runtime and the shim (if any) into LIB, written
// whole or not at all: linked to WORK/kernels.so (WORK is this build's own
// directory, beside LIB), fsynced, renamed over LIB.
Status LinkKernelLibrary(const CodegenOptions& options, const fs::path& work,
                         const std::string& lib, const std::vector<std::string>& archives,
                         const std::string& runtime_obj, const std::string& shim_obj) {
  const std::string tmp_lib = (work / plan_format::kKernelsFile).string();
  std::string cmd = Quote(options.cxx) + " -shared -o " + Quote(tmp_lib) + " -Wl,--whole-archive";
  for (const std::string& a : archives) cmd += " " + Quote(a);
  cmd += " -Wl,--no-whole-archive " + Quote(runtime_obj);
  if (!shim_obj.empty()) cmd += " " + Quote(shim_obj);
  cmd += " -ldl -lpthread";
  auto [rc, output] = RunCommand(cmd);
  if (rc != 0) {
    return MakeError(ErrorCode::kInternal, "linking kernels.so failed: " + cmd + "\n" + output);
  }
  if (const int err = SyncFile(tmp_lib); err != 0) {
    return MakeError(ErrorCode::kIo, "cannot sync " + tmp_lib + ": " + std::strerror(err));
  }
  if (::rename(tmp_lib.c_str(), lib.c_str()) != 0) {
    return MakeError(ErrorCode::kIo, "cannot write " + lib + ": " + std::strerror(errno));
  }
  return Ok();
}

// This build's own directory for intermediate files, DIR/kernels.build.XXXXXX
// (unique, so concurrent builds into one DIR never share a file), removed
// with everything in it when the build returns, whether it succeeded or not.
class WorkDir {
 public:
  static Result<WorkDir> Create(const fs::path& dir) {
    std::string name = (dir / "kernels.build.XXXXXX").string();
    if (::mkdtemp(name.data()) == nullptr) {
      return MakeError(ErrorCode::kIo, "cannot create a build directory in " + dir.string() + ": " +
                                           std::strerror(errno));
    }
    return WorkDir(name);
  }
  WorkDir(WorkDir&& other) noexcept : path_(std::exchange(other.path_, fs::path())) {}
  WorkDir& operator=(WorkDir&&) = delete;
  ~WorkDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  explicit WorkDir(fs::path path) : path_(std::move(path)) {}
  fs::path path_;
};

}  // namespace

Result<KernelArtifact> CompileKernels(const std::vector<FusedChain>& chains,
                                      const std::string& out_dir, const CodegenOptions& options) {
  if (options.cpu_targets.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "no CPU targets to compile kernels for");
  }
  SLUICE_RETURN_IF_ERROR(CheckChains(chains));
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  const fs::path dir = fs::absolute(out_dir, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot create " + out_dir + ": " + ec.message());
  auto work_dir = WorkDir::Create(dir);
  if (!work_dir) return std::unexpected(work_dir.error());
  const fs::path& work = work_dir->path();

  KernelArtifact art;
  art.cpu_targets = options.cpu_targets;
  for (const char* name : kKernelArgNames) art.arg_names.push_back(name);
  auto targets = ResolveTargets(options, art);
  if (!targets) return std::unexpected(targets.error());

  std::vector<std::string> archives;
  for (const FusedChain& chain : chains) {
    auto k = CompileChain(chain, work, *targets, archives);
    if (!k) return std::unexpected(k.error());
    art.kernels.push_back(std::move(*k));
  }
  if (targets->cuda) art.cuda_target = options.cuda_target;

  // One Halide runtime for the whole library: the baseline CPU target, plus CUDA.
  const std::string runtime_obj = (work / "halide_runtime.o").string();
  SLUICE_RETURN_IF_ERROR(CatchHalide("compiling the Halide runtime", [&] {
    Halide::Target rt(options.cpu_targets.front());
    if (targets->cuda) rt = rt.with_feature(Halide::Target::CUDA);
    Halide::compile_standalone_runtime(runtime_obj, rt);
  }));
  std::string shim_obj;
  if (targets->cuda) {
    auto shim = CompileCudaShim(options, work);
    if (!shim) return std::unexpected(shim.error());
    shim_obj = std::move(*shim);
  }
  const std::string lib = (dir / plan_format::kKernelsFile).string();
  SLUICE_RETURN_IF_ERROR(LinkKernelLibrary(options, work, lib, archives, runtime_obj, shim_obj));
  art.library = lib;
  return art;
}

}  // namespace sluice
