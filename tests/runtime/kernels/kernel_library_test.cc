// KernelLibrary: clear errors for a missing or corrupt kernels.so, a missing
// symbol, or a CPU that matches none of the library's targets.
#include "runtime/kernels/kernel_library.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/compiler/codegen/kernel_fixture.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime {
namespace {

TEST(KernelLibraryTest, MissingFileIsNotFound) {
  auto lib = KernelLibrary::Open("/nonexistent/kernels.so");
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.error().code, ErrorCode::kNotFound);
}

TEST(KernelLibraryTest, CorruptFileIsCorruptData) {
  testing::TempDir dir;
  const std::string path = dir.Write("kernels.so", std::string_view("not an ELF file at all"));
  auto lib = KernelLibrary::Open(path);
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(lib.error().message.find(path), std::string::npos);
}

TEST(KernelLibraryTest, MissingSymbolIsNotFound) {
  const auto& k = sluice::testing::SharedKernels();
  ASSERT_TRUE(k.library) << k.library.error().ToString();
  FusedChain chain = k.chains.at("train");
  chain.symbol = "no_such_kernel";
  auto kernel = k.library->CpuKernel(chain);
  ASSERT_FALSE(kernel);
  EXPECT_EQ(kernel.error().code, ErrorCode::kNotFound);
  EXPECT_NE(kernel.error().message.find("no_such_kernel"), std::string::npos);
  // Built without CUDA: the CUDA symbol is reported missing, not called.
  auto cuda = k.library->CudaKernel(k.chains.at("train"));
  ASSERT_FALSE(cuda);
  EXPECT_EQ(cuda.error().code, ErrorCode::kNotFound);
}

TEST(KernelLibraryTest, WrongChannelCountIsRejected) {
  const auto& k = sluice::testing::SharedKernels();
  ASSERT_TRUE(k.library);
  auto kernel = k.library->CpuKernel(k.chains.at("eval"));
  ASSERT_TRUE(kernel);
  std::vector<uint8_t> px(16);
  std::vector<float> out(224 * 224 * 3);
  auto st = kernel->Run({px.data(), 4, 4, 1, 4}, SampleArgs{}, out.data());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
}

// A Halide run-time failure inside a kernel (here: a library whose kernel was
// built for 3 channels, called as the plan's 4-channel chain, so the kernel's
// buffer constraint fails) is an error carrying Halide's message. Without the
// library's error handler, Halide's default one printed and called abort().
TEST(KernelLibraryTest, HalideFailureIsAnErrorNotAnAbort) {
  const auto& k = sluice::testing::SharedKernels();
  ASSERT_TRUE(k.library) << k.library.error().ToString();
  FusedChain chain = k.chains.at("crop_flip");
  chain.input.dims[2] = 4;  // the kernel's input constraint is 3 channels
  auto kernel = k.library->CpuKernel(chain);
  ASSERT_TRUE(kernel) << kernel.error().ToString();
  std::vector<uint8_t> px(8 * 8 * 4);
  std::vector<uint8_t> out(40 * 30 * 3);
  auto st = kernel->Run({px.data(), 8, 8, 4, 8 * 4}, SampleArgs{}, out.data());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kInternal);
  EXPECT_NE(st.error().message.find("Halide error code"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("in.extent.0 (4) == 3"), std::string::npos)
      << st.error().message;
  EXPECT_EQ(LastHalideError().substr(0, 20), "Constraint violated:");

  // The message does not leak into the next call, on this thread or another.
  auto good = k.library->CpuKernel(k.chains.at("crop_flip"));
  ASSERT_TRUE(good);
  std::vector<uint8_t> rgb(48 * 40 * 3, 7);
  auto args = ComputeSampleArgs(k.chains.at("crop_flip"), 48, 40, 1, 0, 0);
  ASSERT_TRUE(args) << args.error().ToString();
  EXPECT_TRUE(good->Run({rgb.data(), 48, 40, 3, 40 * 3}, *args, out.data()));
  EXPECT_TRUE(LastHalideError().empty());
  std::string other;
  std::thread([&] { other = std::string(LastHalideError()); }).join();
  EXPECT_TRUE(other.empty());
}

// Halide's own buffer-size limit (2^31 - 1 bytes per buffer), reached by an
// image over ~715 MP RGB (possible with a raised max_pixels): the image's
// error (kCorruptData, a bad sample), not an abort nor a kernel failure. The
// view's rows are never read (the check comes first).
TEST(KernelLibraryTest, InputOverHalideBufferLimitIsAnError) {
  const auto& k = sluice::testing::SharedKernels();
  ASSERT_TRUE(k.library) << k.library.error().ToString();
  auto kernel = k.library->CpuKernel(k.chains.at("crop_flip"));
  ASSERT_TRUE(kernel);
  std::vector<uint8_t> px(64);
  std::vector<uint8_t> out(40 * 30 * 3);
  const int64_t stride = int64_t{1} << 30;  // 4 rows span 3 GiB + 12 bytes
  auto st = kernel->Run({px.data(), 4, 4, 3, stride}, SampleArgs{}, out.data());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kCorruptData) << st.error().message;
  EXPECT_NE(st.error().message.find("input limit"), std::string::npos) << st.error().message;
}

// What a GPU stage keeps (its device, so the CUDA context outlives the Halide
// module cache) lives as long as the library is loaded by anyone: a copy of the
// library or a kernel from it, and is released once, after the last of them.
TEST(KernelLibraryTest, KeptOwnerLivesUntilTheLibraryIsUnloaded) {
  const auto& k = sluice::testing::SharedKernels();
  ASSERT_TRUE(k.library) << k.library.error().ToString();
  auto lib = KernelLibrary::Open(k.library->path());
  ASSERT_TRUE(lib) << lib.error().ToString();
  auto owner = std::make_shared<int>(7);
  std::weak_ptr<int> watch = owner;
  lib->KeepUntilUnloaded(owner);
  lib->KeepUntilUnloaded(owner);  // kept once
  EXPECT_EQ(owner.use_count(), 2);
  owner.reset();
  std::optional<KernelLibrary> copy = *lib;
  auto kernel = lib->CpuKernel(k.chains.at("train"));
  ASSERT_TRUE(kernel);
  lib = std::unexpected(Error{});  // the first handle goes
  EXPECT_FALSE(watch.expired());
  copy.reset();  // the copy goes; the kernel still holds the library
  EXPECT_FALSE(watch.expired());
  kernel = std::unexpected(Error{});
  EXPECT_TRUE(watch.expired());
}

TEST(KernelLibraryTest, CpuTargetCheck) {
  EXPECT_TRUE(CheckCpuSupports({"x86-64-linux-sse41"}));
  auto none = CheckCpuSupports({});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kUnsupported);
  auto arm = CheckCpuSupports({"arm-64-linux"});
  ASSERT_FALSE(arm);
  EXPECT_EQ(arm.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(arm.error().message.find("arm-64-linux"), std::string::npos);
  if (!__builtin_cpu_supports("avx512f")) {
    EXPECT_FALSE(CheckCpuSupports({"x86-64-linux-avx512_skylake-avx512"}));
  }
}

}  // namespace
}  // namespace sluice::runtime
