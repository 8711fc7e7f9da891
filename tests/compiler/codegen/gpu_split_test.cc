// Split fusion groups (FusedChain::gpu_from): codegen builds the CPU part
// (symbol_cpu_part), the batch-wide CUDA tail (symbol_gpu_batch) and the CUDA
// context shim into kernels.so. Needs no GPU: symbols are checked with dlsym
// and nm, the shim's hooks are called directly, and the CPU part runs against
// the reference prefix. (The CUDA tail itself runs in
// tests/runtime/exec/gpu_stage_test.cc, GpuStageTest.*, on a GPU.)
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <random>

#include "compiler/codegen/gpu_batch_pipeline.h"
#include "ops/fusion/sample_args.h"
#include "tests/compiler/codegen/kernel_fixture.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using testing::Is;
using testing::S;

FusedChain SplitChain() {
  FusedChain c = testing::MakeChain("gs_train", {{"random_resized_crop", {{"size", Is({32})}}},
                                                 {"random_flip", {}},
                                                 testing::ImagenetNormalize(),
                                                 {"layout", {{"to", S("CHW")}}},
                                                 {"cast", {{"dtype", S("float16")}}}});
  c.gpu_from = 2;
  return c;
}

std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

TEST(GpuSplitCodegenTest, RejectsBadSplits) {
  FusedChain c = SplitChain();
  c.gpu_from = 1;  // random_flip on the GPU
  EXPECT_EQ(CheckGpuSplit(c).error().code, ErrorCode::kUnsupported);
  c.gpu_from = 5;
  EXPECT_FALSE(CheckGpuSplit(c));
  c.gpu_from = 3;  // normalize before the cut: staging would be float
  EXPECT_FALSE(CheckGpuSplit(c));
  c.gpu_from = 2;
  ASSERT_TRUE(CheckGpuSplit(c));
  EXPECT_EQ(StagingType(c)->ToString(), "uint8[3,32,32] CHW");
  auto part = CpuPartChain(c);
  ASSERT_TRUE(part);
  EXPECT_EQ(part->symbol, "gs_train_cpu_part");
  EXPECT_EQ(part->steps.size(), 2u);
  runtime::testing::TempDir dir;
  FusedChain bad = SplitChain();
  bad.gpu_from = 1;
  CodegenOptions opt;
  opt.cpu_targets = {"x86-64-linux-sse41"};
  auto art = CompileKernels({bad}, dir.path().string(), opt);
  ASSERT_FALSE(art);
  EXPECT_EQ(art.error().code, ErrorCode::kUnsupported);
}

TEST(GpuSplitCodegenTest, BuildsPartsAndShim) {
  if (!HalideHasCuda()) GTEST_SKIP() << "this Halide build has no NVPTX backend";
  runtime::testing::TempDir dir;
  const FusedChain chain = SplitChain();
  CodegenOptions opt;
  opt.cpu_targets = {"x86-64-linux-sse41", "x86-64-linux-avx-avx2-f16c-fma-sse41"};
  opt.cuda = true;
  auto art = CompileKernels({chain}, dir.path().string(), opt);
  ASSERT_TRUE(art) << art.error().ToString();
  ASSERT_EQ(art->kernels.size(), 1u);
  EXPECT_EQ(art->kernels[0].cpu_part_symbol, "gs_train_cpu_part");
  EXPECT_EQ(art->kernels[0].gpu_batch_symbol, "gs_train_gpu_batch");
  EXPECT_EQ(art->kernels[0].staging.ToString(), "uint8[3,32,32] CHW");

  // The shim's hooks are strong definitions (T), not the runtime's weak ones.
  const std::string nm = RunCommand("nm -D --defined-only '" + art->library + "'");
  for (const char* sym : {"halide_cuda_acquire_context", "halide_cuda_release_context",
                          "halide_cuda_get_stream", "sluice_cuda_set_context",
                          "gs_train_cpu_part", "gs_train_gpu_batch", "gs_train"}) {
    EXPECT_NE(nm.find(std::string(" T ") + sym + "\n"), std::string::npos) << sym << "\n" << nm;
  }

  void* dl = dlopen(art->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(dl, nullptr) << dlerror();
  auto set = reinterpret_cast<SetCudaContextFn>(dlsym(dl, kSetCudaContextSymbol));
  auto acquire =
      reinterpret_cast<int (*)(void*, void**, bool)>(dlsym(dl, "halide_cuda_acquire_context"));
  auto get_stream =
      reinterpret_cast<int (*)(void*, void*, void**)>(dlsym(dl, "halide_cuda_get_stream"));
  ASSERT_TRUE(set && acquire && get_stream);
  ASSERT_NE(dlsym(dl, "gs_train_gpu_batch"), nullptr);
  // The runtime's context and stream come back (fake handles: nothing is launched).
  int ctx_tag = 0, stream_tag = 0;
  set(&ctx_tag, &stream_tag);
  void* ctx = nullptr;
  void* stream = nullptr;
  EXPECT_EQ(acquire(nullptr, &ctx, false), 0);
  EXPECT_EQ(ctx, &ctx_tag);
  EXPECT_EQ(get_stream(nullptr, ctx, &stream), 0);
  EXPECT_EQ(stream, &stream_tag);
  set(nullptr, nullptr);
  EXPECT_EQ(acquire(nullptr, &ctx, false), 0);
  EXPECT_EQ(ctx, nullptr);
  dlclose(dl);

  // The CPU part equals the reference prefix (uint8 within 1), written planar
  // (ops/fusion/gpu_staging.h) where the reference is interleaved.
  auto lib = runtime::KernelLibrary::Open(art->library);
  ASSERT_TRUE(lib);
  auto part = CpuPartChain(chain);
  ASSERT_TRUE(part);
  auto kernel = lib->CpuKernel(*part);
  ASSERT_TRUE(kernel) << kernel.error().ToString();
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    const int h = 40 + trial * 7, w = 70 - trial * 5;
    RefTensor img = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {h, w, 3});
    std::vector<uint8_t> bytes(static_cast<size_t>(h * w * 3));
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<uint8_t>(rng() & 255);
      img.data[i] = bytes[i];
    }
    auto args = ComputeSampleArgs(chain, h, w, 1, 0, static_cast<uint64_t>(trial));
    ASSERT_TRUE(args);
    std::vector<uint8_t> out(32 * 32 * 3);
    ASSERT_TRUE(kernel->Run({bytes.data(), h, w, 3, w * 3}, *args, out.data()));
    auto want = ReferenceChain(*part, img, 1, 0, static_cast<uint64_t>(trial));
    ASSERT_TRUE(want) << want.error().ToString();
    ASSERT_EQ(want->data.size(), out.size());
    int worst = 0;
    for (size_t c = 0; c < 3; ++c) {
      for (size_t p = 0; p < 32 * 32; ++p) {
        const int got = out[c * 32 * 32 + p];
        worst = std::max(worst, std::abs(got - int(std::lround(want->data[p * 3 + c]))));
      }
    }
    EXPECT_LE(worst, 1) << "trial " << trial;
  }
}

}  // namespace
}  // namespace sluice
