// CUDA fused kernels: built in CI, run only where a CUDA device is present.
//
// BuildsCudaSymbols needs no GPU: it compiles two small chains with
// CodegenOptions::cuda (skipped, with the reason, when this Halide build has no
// NVPTX backend) and checks that kernels.so exports the CUDA entry points and
// that KernelLibrary::CudaKernel finds them. MatchesCpuKernel runs them only
// when the CUDA driver (libcuda.so.1, dlopened: no link-time CUDA dependency)
// reports at least one device; otherwise it skips with the reason. On a GPU the
// CUDA output must agree with the reference chain and the CPU kernel under the
// CPU kernel tolerances of fused_kernel_test.cc (uint8 within 1; float within
// 1e-3 relative, or one uint8 level through the pointwise tail for at most 1%
// of the elements).
//
// The GPU kit (scripts/gpu_kit.sh) runs these on a machine without Halide: its
// sluice_gpu_tests is built with SLUICE_TESTS_NO_COMPILER and loads the library
// that the kit's builder compiled here into SLUICE_TEST_CUDA_KERNELS_DIR (set
// that variable to build or reuse the library in a chosen folder).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/fusion/sample_args.h"
#include "runtime/plan/plan_internal.h"
#include "tests/compiler/codegen/kernel_fixture.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using testing::F;
using testing::Fs;
using testing::I;
using testing::Is;
using testing::LoadElement;
using testing::S;

std::vector<FusedChain> CudaChains() {
  return {
      // ImageNet-train shape at 32x32: crop box, flip, normalize, CHW, float16.
      testing::MakeChain("cu_train", {{"random_resized_crop", {{"size", Is({32})}}},
                                      {"random_flip", {}},
                                      testing::ImagenetNormalize(),
                                      {"layout", {{"to", S("CHW")}}},
                                      {"cast", {{"dtype", S("float16")}}}}),
      // uint8 HWC output through pad, flips and a bicubic resize.
      testing::MakeChain("cu_pad_resize",
                         {{"pad", {{"padding", Is({3, 1, 2, 4})}, {"fill", F(9)}}},
                          {"random_flip", {{"horizontal", F(0.5)}, {"vertical", F(0.5)}}},
                          {"resize", {{"size", Is({24, 28})}, {"interpolation", S("bicubic")}}}}),
  };
}

struct CudaBuild {
  Result<KernelArtifact> artifact = MakeError(ErrorCode::kInternal, "not built");
  Result<runtime::KernelLibrary> library = MakeError(ErrorCode::kInternal, "not built");
  std::vector<FusedChain> chains;
};

// The folder of the CUDA test library: SLUICE_TEST_CUDA_KERNELS_DIR, else a
// temporary one keyed by the test binary's identity (as in kernel_fixture.h),
// because ctest runs each test in its own process.
fs::path CudaKernelsDir() {
  if (const char* dir = std::getenv("SLUICE_TEST_CUDA_KERNELS_DIR"); dir && *dir) return dir;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const auto stamp = std::to_string(std::hash<std::string>{}(
      exe.string() + "|" + std::to_string(fs::file_size(exe, ec)) + "|" +
      std::to_string(fs::last_write_time(exe, ec).time_since_epoch().count())));
  return fs::temp_directory_path() / ("sluice_cuda_kernels_" + stamp);
}

// Whether the CUDA kernels can be had: built by this binary's Halide, or (in a
// binary without the compiler) loaded from SLUICE_TEST_CUDA_KERNELS_DIR.
std::string NoCudaKernelsReason() {
#ifdef SLUICE_TESTS_NO_COMPILER
  const char* dir = std::getenv("SLUICE_TEST_CUDA_KERNELS_DIR");
  if (!dir || !*dir) {
    return "SLUICE_TEST_CUDA_KERNELS_DIR is not set and this test binary has no compiler";
  }
  return "";
#else
  return HalideHasCuda() ? "" : "this Halide build has no NVPTX backend: CUDA kernels are not built";
#endif
}

// Compiled (or loaded) once per test binary.
const CudaBuild& Build() {
  static const CudaBuild* b = [] {
    auto* out = new CudaBuild;
    if (!NoCudaKernelsReason().empty()) return out;  // the tests skip, saying why
    out->chains = CudaChains();
    CodegenOptions opt;
    opt.cpu_targets = {"x86-64-linux-avx-avx2-f16c-fma-sse41"};
    opt.cuda = true;
    std::error_code ec;
    const fs::path dir = CudaKernelsDir();
    if (fs::exists(dir / "kernels.so")) {
      KernelArtifact art;
      art.library = (dir / "kernels.so").string();
      art.cuda_target = opt.cuda_target;
      for (const FusedChain& c : out->chains) {
        art.kernels.push_back({c.symbol, c.symbol + kCudaSuffix});
      }
      out->artifact = art;
    } else {
#ifdef SLUICE_TESTS_NO_COMPILER
      out->artifact = MakeError(ErrorCode::kNotFound,
                                "no kernels.so in " + dir.string() +
                                    " and this test binary has no compiler",
                                "build the GPU kit again (scripts/gpu_kit.sh)");
#else
      const fs::path tmp = dir.string() + ".tmp" + std::to_string(::getpid());
      out->artifact = CompileKernels(out->chains, tmp.string(), opt);
      if (out->artifact) {
        fs::rename(tmp, dir, ec);  // fails harmlessly if another process won
        fs::remove_all(tmp, ec);
        out->artifact->library = (dir / "kernels.so").string();
      }
#endif
    }
    if (!out->artifact) return out;
    // The CPU kernels beside the CUDA ones would die of SIGILL on a CPU
    // without the target's features (the kit's library travels): say so.
    if (Status st = runtime::CheckCpuSupports(opt.cpu_targets); !st) {
      out->library = std::unexpected(st.error());
    } else {
      out->library = runtime::KernelLibrary::Open(out->artifact->library);
    }
    return out;
  }();
  return *b;
}

// "" when a CUDA device is usable, else why not. Uses the driver API through
// dlopen so the test binary has no CUDA dependency.
std::string NoCudaDeviceReason() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::string("libcuda.so.1 not loadable: ") + dlerror();
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  if (!init || !count) return "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
  if (int rc = init(0); rc != 0) return "cuInit failed with CUresult " + std::to_string(rc);
  int n = 0;
  if (int rc = count(&n); rc != 0)
    return "cuDeviceGetCount failed with CUresult " + std::to_string(rc);
  if (n == 0) return "the CUDA driver reports no devices";
  return "";  // the library stays loaded: the Halide CUDA runtime uses it too
}

#define SKIP_WITHOUT_HALIDE_CUDA()                                   \
  if (std::string why = NoCudaKernelsReason(); !why.empty()) {       \
    GTEST_SKIP() << why;                                             \
  }

TEST(CudaKernelTest, BuildsCudaSymbols) {
  SKIP_WITHOUT_HALIDE_CUDA();
  const CudaBuild& b = Build();
  ASSERT_TRUE(b.artifact) << b.artifact.error().ToString();
  EXPECT_FALSE(b.artifact->cuda_target.empty()) << b.artifact->cuda_note;
  ASSERT_TRUE(b.library) << b.library.error().ToString();
  ASSERT_EQ(b.artifact->kernels.size(), b.chains.size());
  for (size_t i = 0; i < b.chains.size(); ++i) {
    EXPECT_EQ(b.artifact->kernels[i].cuda_symbol, b.chains[i].symbol + kCudaSuffix);
    auto cuda = b.library->CudaKernel(b.chains[i]);
    ASSERT_TRUE(cuda) << cuda.error().ToString();
    EXPECT_TRUE(cuda->cuda());
    EXPECT_EQ(cuda->output(), b.chains[i].output);
    auto cpu = b.library->CpuKernel(b.chains[i]);
    ASSERT_TRUE(cpu) << cpu.error().ToString();
    EXPECT_FALSE(cpu->cuda());
  }
  // A chain whose CUDA kernel was not built is reported, not crashed on.
  FusedChain other = b.chains[0];
  other.symbol = "cu_not_there";
  auto missing = b.library->CudaKernel(other);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  // Nothing was run: there is nothing to release, with or without a device.
  EXPECT_TRUE(b.library->ReleaseCachedDeviceMemory());
}

#ifndef SLUICE_TESTS_NO_COMPILER  // the CPU test library is built by the compiler
TEST(CudaKernelTest, NotBuiltWhenDisabled) {
  // cuda = false must give a library without CUDA symbols (the CPU-only plans
  // every other test uses); checked on the shared CPU test library.
  const auto& k = testing::SharedKernels();
  ASSERT_TRUE(k.library) << k.library.error().ToString();
  const FusedChain& chain = k.chains.begin()->second;
  auto cuda = k.library->CudaKernel(chain);
  ASSERT_FALSE(cuda);
  EXPECT_EQ(cuda.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(k.library->ReleaseCachedDeviceMemory());  // no device memory to release
}
#endif

RefTensor TestImage(int64_t h, int64_t w, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, 255);
  RefTensor t = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {h, w, 3});
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t c = 0; c < 3; ++c) {
        t.at(y, x, c) = static_cast<float>((x * 3 + y * 2 + c * 60 + d(rng) % 48) % 256);
      }
    }
  }
  return t;
}

// Counts elements of `got` outside the CPU-kernel tolerance against `want`;
// `one_level` counts those accepted only through the one-level allowance.
int64_t CountBad(const std::vector<uint8_t>& got, const std::vector<float>& want, DType dtype,
                 double level, int64_t& one_level, std::string& first) {
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double a = LoadElement(got, dtype, i), b = want[i], d = std::fabs(a - b);
    bool ok;
    if (!IsFloat(dtype)) {
      ok = d <= 1.0;
    } else {
      const double rel = 1e-3 * std::max(1.0, std::fabs(b));
      ok = d <= rel;
      if (!ok && level > 0 && d <= level + rel) {
        ok = true;
        ++one_level;
      }
    }
    if (!ok && bad++ == 0) {
      first =
          "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(b);
    }
  }
  return bad;
}

TEST(CudaKernelTest, MatchesCpuKernelOnGpu) {
  SKIP_WITHOUT_HALIDE_CUDA();
  if (std::string why = NoCudaDeviceReason(); !why.empty()) {
    GTEST_SKIP() << "no CUDA device: " << why;
  }
  const CudaBuild& b = Build();
  ASSERT_TRUE(b.library) << b.library.error().ToString();
  const double kLevel = 1.0 / 255.0 / 0.224;  // one uint8 level through ImageNet normalize
  for (const FusedChain& chain : b.chains) {
    auto cuda = b.library->CudaKernel(chain);
    auto cpu = b.library->CpuKernel(chain);
    ASSERT_TRUE(cuda && cpu);
    const double level = chain.output.dtype == DType::kUInt8 ? 0.0 : kLevel;
    int64_t one_level = 0, total = 0;
    const std::vector<std::pair<int64_t, int64_t>> sizes = {
        {1, 1}, {37, 53}, {120, 90}, {375, 500}, {7, 300}};
    for (size_t s = 0; s < sizes.size(); ++s) {
      const auto [h, w] = sizes[s];
      RefTensor img = TestImage(h, w, static_cast<uint32_t>(s + 1));
      std::vector<uint8_t> packed(img.data.begin(), img.data.end());
      auto args = ComputeSampleArgs(chain, h, w, 4, 1, s);
      ASSERT_TRUE(args) << args.error().ToString();
      auto ref = ReferenceChain(chain, img, 4, 1, s);
      ASSERT_TRUE(ref) << ref.error().ToString();
      const size_t n = ref->num_elements();
      std::vector<uint8_t> gpu_out(n * DTypeSize(chain.output.dtype), 0xAB);
      std::vector<uint8_t> cpu_out(gpu_out.size(), 0xCD);
      const runtime::ImageView view{packed.data(), h, w, 3, w * 3};
      auto st = cuda->Run(view, *args, gpu_out.data());
      ASSERT_TRUE(st) << chain.symbol << ": " << st.error().ToString();
      ASSERT_TRUE(cpu->Run(view, *args, cpu_out.data()));
      std::vector<float> cpu_f(n);
      for (size_t i = 0; i < n; ++i) cpu_f[i] = LoadElement(cpu_out, chain.output.dtype, i);
      std::vector<float> ref_f(ref->data.begin(), ref->data.end());
      std::string first;
      EXPECT_EQ(CountBad(gpu_out, cpu_f, chain.output.dtype, level, one_level, first), 0)
          << chain.symbol << " " << h << "x" << w << " CUDA vs CPU kernel, first " << first;
      EXPECT_EQ(CountBad(gpu_out, ref_f, chain.output.dtype, level, one_level, first), 0)
          << chain.symbol << " " << h << "x" << w << " CUDA vs reference, first " << first;
      total += 2 * static_cast<int64_t>(n);
    }
    EXPECT_LE(one_level, total / 100) << chain.symbol << ": too many one-level differences";
  }
  // The runtime cached the freed device buffers; they go back to the driver
  // (the kit's compute-sanitizer run reports any that stay allocated).
  EXPECT_TRUE(b.library->ReleaseCachedDeviceMemory());
}

}  // namespace
}  // namespace sluice
