// The loader's GPU stage (runtime/exec/gpu_stage.h, docs/gpu.md).
//
// A GPU plan is made from the loader test plan: its chain is split before
// `normalize` (gpu_from = 2) and recompiled with CUDA kernels, and plan.json
// gets the group's gpu fields, as the placement pass writes them
// (SplitForGpu, gpu_plan_util.h). A runtime-only build (the GPU kit's
// sluice_gpu_tests, scripts/gpu_kit.sh) takes that plan ready-made from
// SLUICE_TEST_GPU_PLAN and the CPU test plan from SLUICE_TEST_PLAN, and skips
// when they are not set. Without a CUDA device (CI) the tests check the
// fallback: a warning in LoaderStats and the CPU path with batches identical to
// the all-CPU plan's, a clear kUnsupported error when cuda is forced. The Gpu*
// tests need a device and skip without one (docs/gpu.md has the command that
// runs them on a GPU machine): device batches equal to the CPU path within
// 1e-3 relative, throughput printed, device memory unchanged over many epochs.

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "ops/fusion/plan_format.h"
#include "runtime/device/cuda_driver.h"
#include "runtime/kernels/kernel_library.h"
#include "runtime/plan/plan_internal.h"
#include "tests/runtime/loader/loader_test_util.h"
#ifndef SLUICE_TESTS_NO_COMPILER
#include "compiler/codegen/codegen.h"
#include "tests/runtime/exec/gpu_plan_util.h"
#endif

namespace sluice {
namespace {

using namespace testing_loader;
using json = nlohmann::json;

struct GpuPlan {
  std::unique_ptr<ScopedDir> dir;
  std::string path, data, error;
  std::string skip;  // why the GPU plan tests skip (no NVPTX, no ready-made plan)
};

const GpuPlan& MakeGpuPlan() {
  static GpuPlan g = [] {
    GpuPlan out;
    out.dir = std::make_unique<ScopedDir>("gpu_plan");
    out.data = (out.dir->path() / "data").string();
    MakeDataset(out.data, 24);
    if (const char* ready = std::getenv("SLUICE_TEST_GPU_PLAN"); ready != nullptr && *ready) {
      out.path = ready;
      return out;
    }
#ifdef SLUICE_TESTS_NO_COMPILER
    out.skip = "SLUICE_TEST_GPU_PLAN is not set and this test binary has no compiler";
#else
    if (TestPlan().path.empty()) {
      out.error = "test plan: " + TestPlan().error;
      return out;
    }
    if (!HalideHasCuda()) {
      out.skip = "Halide without NVPTX";
      return out;
    }
    out.path = EditedPlan(out.dir->path(), "gpu.plan",
                          [](json& j) { j["output"]["device"] = "auto"; });
    auto cut = testing_gpu::SplitForGpu(out.path, {"x86-64-linux-sse41"});
    if (!cut) out.error = cut.error().ToString();
#endif
    return out;
  }();
  return g;
}

#define REQUIRE_GPU_PLAN()                                              \
  const GpuPlan& gp = MakeGpuPlan();                                    \
  if (!gp.skip.empty()) GTEST_SKIP() << gp.skip;                        \
  ASSERT_TRUE(gp.error.empty()) << gp.error

bool HaveDevice(std::string* why) {
  auto n = runtime::cuda::CudaDeviceCount();
  if (!n) {
    *why = n.error().message;
    return false;
  }
  if (*n < 1) *why = "the CUDA driver reports no device";
  return *n >= 1;
}

Result<EpochBytes> CpuEpoch(const GpuPlan& gp, uint64_t epoch = 0) {
  auto plan = Plan::Load(gp.path, {{"DATA", gp.data}});
  if (!plan) return std::unexpected(plan.error());
  LoaderOptions o;
  o.device = "cpu";
  o.threads = 2;
  o.epoch = epoch;
  auto loader = Loader::Create(*plan, o);
  if (!loader) return std::unexpected(loader.error());
  return ReadEpoch(*loader);
}

TEST(GpuStagePlanTest, LoadsGpuFieldsAndCpuPartKernel) {
  REQUIRE_GPU_PLAN();
  auto plan = Plan::Load(gp.path, {{"DATA", gp.data}});
  ASSERT_TRUE(plan) << plan.error().ToString();
  ASSERT_EQ(plan->gpu_stages().size(), 1u);
  ASSERT_TRUE(plan->gpu_stages()[0].has_value());
  const GpuStage& st = *plan->gpu_stages()[0];
  EXPECT_EQ(st.gpu_from, 2);
  EXPECT_EQ(plan->chains()[0].gpu_from, 2);
  EXPECT_EQ(st.cpu_part_symbol, plan->chains()[0].symbol + "_cpu_part");
  EXPECT_EQ(st.gpu_batch_symbol, plan->chains()[0].symbol + "_gpu_batch");
  EXPECT_EQ(st.staging.ToString(), "uint8[3,32,32] CHW");  // planar (gpu_staging.h)
  ASSERT_NE(plan->cpu_part_kernel(0), nullptr);
  EXPECT_EQ(plan->cpu_part_kernel(0)->output(), st.staging);
  EXPECT_EQ(plan->placement_device(), "cuda:0");
}

TEST(GpuStagePlanTest, NullGpuFieldsMeanNoStage) {
  REQUIRE_GPU_PLAN();
  std::string edited = EditedPlan(gp.dir->path(), "null_fields.plan", [](json& j) {
    j["fusion_groups"][0]["gpu_from"] = nullptr;
    j["fusion_groups"][0]["cpu_part_symbol"] = nullptr;
    j["fusion_groups"][0]["gpu_batch_symbol"] = nullptr;
    j["fusion_groups"][0]["staging_type"] = nullptr;
  });
  auto plan = Plan::Load(edited, {{"DATA", gp.data}});
  ASSERT_TRUE(plan) << plan.error().ToString();
  EXPECT_FALSE(plan->gpu_stages()[0].has_value());
  EXPECT_EQ(plan->cpu_part_kernel(0), nullptr);
  EXPECT_EQ(plan->chains()[0].gpu_from, -1);
}

TEST(GpuStagePlanTest, MissingCpuPartSymbolIsCorrupt) {
  REQUIRE_GPU_PLAN();
  std::string edited = EditedPlan(gp.dir->path(), "bad_symbol.plan", [](json& j) {
    j["fusion_groups"][0]["gpu_from"] = 2;
    j["fusion_groups"][0]["cpu_part_symbol"] = "no_such_kernel";
    j["fusion_groups"][0]["gpu_batch_symbol"] = "no_such_kernel_gpu";
    j["fusion_groups"][0]["staging_type"] =
        plan_format::TypeToJson(Image(DType::kUInt8, Layout::kCHW, 32, 32, 3));
  });
  auto plan = Plan::Load(edited, {{"DATA", gp.data}});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(plan.error().message.find("no_such_kernel"), std::string::npos);
}

// Plans written before planar staging (ops/fusion/gpu_staging.h) recorded an
// interleaved HWC staging image; their kernels do not fit this runtime.
TEST(GpuStagePlanTest, InterleavedStagingOfAnOlderPlanIsRefusedWithAHint) {
  REQUIRE_GPU_PLAN();
  std::string edited = CopyWithEditedJson(gp.path, gp.dir->path() / "hwc_staging.plan", [](json& j) {
    j["fusion_groups"][0]["staging_type"] =
        plan_format::TypeToJson(Image(DType::kUInt8, Layout::kHWC, 32, 32, 3));
  });
  auto plan = Plan::Load(edited, {{"DATA", gp.data}});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(plan.error().message.find("uint8[32,32,3] HWC"), std::string::npos)
      << plan.error().message;
  EXPECT_NE(plan.error().hint.find("recompile"), std::string::npos) << plan.error().hint;
}

TEST(GpuStageFallbackTest, NoDeviceWarnsAndMatchesCpuPlan) {
  REQUIRE_GPU_PLAN();
  std::string why;
  if (HaveDevice(&why)) GTEST_SKIP() << "a CUDA device is present: the fallback is not taken";
  auto plan = Plan::Load(gp.path, {{"DATA", gp.data}});
  ASSERT_TRUE(plan) << plan.error().ToString();
  LoaderOptions o;
  o.threads = 2;
  auto loader = Loader::Create(*plan, o);
  ASSERT_TRUE(loader) << loader.error().ToString();
  const LoaderStats stats = loader->Stats();
  EXPECT_EQ(stats.device, "cpu");
  ASSERT_EQ(stats.warnings.size(), 1u);
  EXPECT_NE(stats.warnings[0].find("running the whole chains on the CPU"), std::string::npos)
      << stats.warnings[0];
  EXPECT_NE(stats.warnings[0].find(why), std::string::npos) << stats.warnings[0];
  auto got = ReadEpoch(*loader);
  ASSERT_TRUE(got) << got.error().ToString();
  // The all-CPU plan (the original test plan, same data).
  auto cpu_plan = Plan::Load(TestPlan().path, {{"DATA", gp.data}});
  ASSERT_TRUE(cpu_plan) << cpu_plan.error().ToString();
  auto cpu_loader = Loader::Create(*cpu_plan, o);
  ASSERT_TRUE(cpu_loader) << cpu_loader.error().ToString();
  EXPECT_TRUE(cpu_loader->Stats().warnings.empty());
  auto want = ReadEpoch(*cpu_loader);
  ASSERT_TRUE(want) << want.error().ToString();
  ASSERT_EQ(got->batches.size(), 6u);
  EXPECT_EQ(got->batches, want->batches);
  EXPECT_EQ(got->samples, want->samples);
}

TEST(GpuStageFallbackTest, ForcedCudaWithoutDeviceIsUnsupported) {
  REQUIRE_GPU_PLAN();
  std::string why;
  if (HaveDevice(&why)) GTEST_SKIP() << "a CUDA device is present";
  auto plan = Plan::Load(gp.path, {{"DATA", gp.data}});
  ASSERT_TRUE(plan);
  LoaderOptions o;
  o.device = "cuda:0";
  auto loader = Loader::Create(*plan, o);
  ASSERT_FALSE(loader);
  EXPECT_EQ(loader.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(loader.error().message.find("cuda:0"), std::string::npos);
  EXPECT_NE(loader.error().message.find(why), std::string::npos) << loader.error().message;
  // The spec's output.device: cuda forces it the same way.
  const fs::path forced = gp.dir->path() / "forced.plan";
  fs::remove_all(forced);
  fs::copy(gp.path, forced, fs::copy_options::recursive);
  {
    std::ifstream in(forced / "plan.json");
    json j = json::parse(in);
    in.close();
    j["output"]["device"] = "cuda";
    std::ofstream(forced / "plan.json") << j.dump(2);
  }
  auto fplan = Plan::Load(forced.string(), {{"DATA", gp.data}});
  ASSERT_TRUE(fplan) << fplan.error().ToString();
  auto floader = Loader::Create(*fplan, {});
  ASSERT_FALSE(floader);
  EXPECT_EQ(floader.error().code, ErrorCode::kUnsupported);
}

TEST(GpuStageFallbackTest, DeviceCpuForcesCpuWithoutWarning) {
  REQUIRE_GPU_PLAN();
  auto plan = Plan::Load(gp.path, {{"DATA", gp.data}});
  ASSERT_TRUE(plan);
  LoaderOptions o;
  o.device = "cpu";
  auto loader = Loader::Create(*plan, o);
  ASSERT_TRUE(loader) << loader.error().ToString();
  EXPECT_TRUE(loader->Stats().warnings.empty());
  EXPECT_EQ(loader->Stats().device, "cpu");
  auto next = loader->Next();
  ASSERT_TRUE(next && *next);
  EXPECT_EQ((*next)->field("image")->device_type, DeviceType::kCPU);
  o.device = "tpu";
  auto bad = Loader::Create(*plan, o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

// ---- on a GPU -------------------------------------------------------------

#define REQUIRE_DEVICE()                                 \
  do {                                                   \
    std::string why_;                                    \
    if (!HaveDevice(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)

// Copies a device field back to the host.
std::vector<uint8_t> ToHost(const TensorView& v) {
  auto dev = runtime::cuda::CudaDevice::Open(v.device_id);
  EXPECT_TRUE(dev);
  std::vector<uint8_t> host(v.bytes);
  runtime::cuda::CudaDevice::Scope scope(**dev);
  const auto& drv = (*dev)->driver();
  EXPECT_TRUE(drv.Check(drv.cuMemcpyDtoH(host.data(),
                                         reinterpret_cast<uintptr_t>(v.data), v.bytes),
                        "cuMemcpyDtoH"));
  return host;
}

TEST(GpuStageTest, GpuBatchesMatchCpuPath) {
  REQUIRE_GPU_PLAN();
  REQUIRE_DEVICE();
  auto want = CpuEpoch(gp);
  ASSERT_TRUE(want) << want.error().ToString();
  auto plan = Plan::Load(gp.path, {{"DATA", gp.data}});
  ASSERT_TRUE(plan);
  LoaderOptions o;
  o.threads = 2;
  auto loader = Loader::Create(*plan, o);
  ASSERT_TRUE(loader) << loader.error().ToString();
  EXPECT_EQ(loader->Stats().device, "cuda:0");
  EXPECT_TRUE(loader->Stats().warnings.empty());
  size_t b = 0;
  while (true) {
    auto next = loader->Next();
    ASSERT_TRUE(next) << next.error().ToString();
    if (!*next) break;
    ASSERT_LT(b, want->batches.size());
    const TensorView* image = (*next)->field("image");
    ASSERT_NE(image, nullptr);
    EXPECT_EQ(image->device_type, DeviceType::kCUDA);
    EXPECT_NE((*next)->cuda_event(), nullptr);
    std::vector<uint8_t> got = ToHost(*image);
    // Fields are in name order: image first in the CPU epoch's bytes.
    const float* g = reinterpret_cast<const float*>(got.data());
    const float* w = reinterpret_cast<const float*>(want->batches[b].data());
    size_t bad = 0;
    for (size_t i = 0; i < got.size() / 4; ++i) {
      if (std::fabs(g[i] - w[i]) > 1e-3f * std::max(1.0f, std::fabs(w[i]))) ++bad;
    }
    EXPECT_EQ(bad, 0u) << "batch " << b;
    const TensorView* label = (*next)->field("label");
    EXPECT_EQ(label->device_type, DeviceType::kCPU);
    EXPECT_EQ(0, std::memcmp(label->data, want->batches[b].data() + image->bytes, label->bytes));
    EXPECT_EQ((*next)->sample_indices(), want->samples[b]);
    ++b;
  }
  EXPECT_EQ(b, want->batches.size());
}

// A field's bytes, copied back from the device when it is on one.
std::vector<uint8_t> AnyFieldBytes(const TensorView& v) {
  return v.device_type == DeviceType::kCUDA ? ToHost(v) : HostFieldBytes(v);
}

// One epoch's batches, device fields copied back to the host.
Result<EpochBytes> ReadDeviceEpoch(Loader& loader) {
  return ReadEpoch(loader, SIZE_MAX, AnyFieldBytes);
}

TEST(GpuStageTest, ThroughputAndNoDeviceLeakOverEpochs) {
  REQUIRE_GPU_PLAN();
  REQUIRE_DEVICE();
  auto dev = runtime::cuda::CudaDevice::Open(0);
  ASSERT_TRUE(dev);
  auto plan = Plan::Load(gp.path, {{"DATA", gp.data}});
  ASSERT_TRUE(plan);
  {  // Warm-up: Halide loads its CUDA module once per context.
    auto warm = Loader::Create(*plan, {});
    ASSERT_TRUE(warm);
    ASSERT_TRUE(ReadDeviceEpoch(*warm));
  }
  auto before = (*dev)->MemInfo();
  ASSERT_TRUE(before);
  constexpr int kEpochs = 30;
  EpochBytes last;
  {
    LoaderOptions o;
    o.threads = 2;
    auto loader = Loader::Create(*plan, o);
    ASSERT_TRUE(loader) << loader.error().ToString();
    for (int e = 0; e < kEpochs; ++e) {
      auto ep = ReadDeviceEpoch(*loader);
      ASSERT_TRUE(ep) << ep.error().ToString();
      ASSERT_EQ(ep->batches.size(), 6u);
      last = std::move(*ep);
    }
    const LoaderStats s = loader->Stats();
    std::printf("[ GPU      ] %s: %.0f images/s with %d CPU threads (batch 4, 32x32)\n",
                (*dev)->name().c_str(), s.images_per_second, s.threads);
  }
  auto after = (*dev)->MemInfo();
  ASSERT_TRUE(after);
  EXPECT_EQ(before->first, after->first) << "device memory in use changed over 30 epochs";
  // The last epoch is still the CPU path's epoch, sample for sample.
  auto want = CpuEpoch(gp, kEpochs - 1);
  ASSERT_TRUE(want) << want.error().ToString();
  EXPECT_EQ(last.samples, want->samples);
}

// Nothing holds the device between two plans: the first plan's primary context
// is released only after its kernels.so (and the Halide module cache in it) is
// unloaded, and the second plan loads its modules into a fresh context.
TEST(GpuStageTest, APlanLoadedAgainAfterEverythingWasReleasedRuns) {
  REQUIRE_GPU_PLAN();
  REQUIRE_DEVICE();
  for (int round = 0; round < 2; ++round) {
    auto plan = Plan::Load(gp.path, {{"DATA", gp.data}});
    ASSERT_TRUE(plan);
    auto loader = Loader::Create(*plan, {});
    ASSERT_TRUE(loader) << loader.error().ToString();
    auto ep = ReadDeviceEpoch(*loader);
    ASSERT_TRUE(ep) << "round " << round << ": " << ep.error().ToString();
    EXPECT_EQ(ep->batches.size(), 6u);
  }
}

}  // namespace
}  // namespace sluice

