// Batch fields that no fusion group writes (plan.json "reference_chains") run
// in the loader on the reference implementations: values equal ReferenceChain
// on the whole decoded image (the same code path, so bit for bit), determinism
// across loaders, the one warning, a plan mixing a fused and a reference
// field, a chain whose result has the wrong shape for some image sizes (a bad
// sample under on_error: skip), and float16 output conversion.
//
// Most tests compile their own plans, so they need the compiler library. The
// first two also run in the sanitizer runs' runtime-only binary, on the plan
// of reference_chain_test.yaml that tests/sanitizers/run.sh compiles
// (SLUICE_TEST_REFERENCE_PLAN).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "ops/fusion/sample_args.h"
#include "runtime/decode/jpeg_decoder.h"
#include "runtime/plan/plan_internal.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using json = nlohmann::json;

#ifndef SLUICE_TESTS_NO_COMPILER
// Compiles `spec_text` into dir/name.plan (TestCodegenOptions); throws on error.
std::string CompileSpec(const std::string& spec_text, const fs::path& dir,
                        const std::string& name) {
  const std::string out = (dir / (name + ".plan")).string();
  Status st = CompileSpecText(spec_text, name + ".yaml", out, TestCodegenOptions());
  if (!st) throw std::runtime_error(st.error().ToString());
  return out;
}

std::string SpecText(const std::string& graph, const std::string& fields,
                     const std::string& on_error = "{policy: fail}") {
  return "sluice: 1\nname: ref_test\nsource: {format: image_folder, path: \"${DATA}\"}\n"
         "sampling: {order: shuffle, seed: 5, sharding: none, remainder: drop}\n"
         "graph:\n" +
         graph + "batch: {size: 4, fields: " + fields + "}\n" +
         "output: {device: cpu, on_error: " + on_error + "}\n";
}

#endif  // SLUICE_TESTS_NO_COMPILER

// The spec of reference_chain_test.yaml: color_jitter before the crop, so
// nothing fuses.
std::string JitterFirstSpec() {
  return ReadTextFile(std::string(SLUICE_SOURCE_DIR) +
                      "/tests/runtime/loader/reference_chain_test.yaml");
}

class ReferenceChainLoader : public ::testing::Test {
 protected:
  void SetUp() override {
    plans_ = std::make_unique<ScopedDir>("ref_plans");
    data_ = std::make_unique<ScopedDir>("ref_data");
    paths_ = MakeDataset(data_->path(), 14);
    std::sort(paths_.begin(), paths_.end());  // image_folder's index order
  }
  Plan Load(const std::string& path) {
    auto plan = Plan::Load(path, {{"DATA", data_->path().string()}});
    if (!plan) throw std::runtime_error("Plan::Load: " + plan.error().ToString());
    return *plan;
  }
  // The plan of reference_chain_test.yaml: compiled here, or (runtime-only
  // binary) the one SLUICE_TEST_REFERENCE_PLAN names; "" when neither.
  std::string JitterPlan(const std::string& name) {
#ifndef SLUICE_TESTS_NO_COMPILER
    return CompileSpec(JitterFirstSpec(), plans_->path(), name);
#else
    (void)name;
    const char* env = std::getenv("SLUICE_TEST_REFERENCE_PLAN");
    return env != nullptr ? env : "";
#endif
  }
  static LoaderOptions Threads(int t) {
    LoaderOptions o;
    o.threads = t;
    return o;
  }
  // The whole decoded image of dataset index `idx`, as the reference ops read it.
  RefTensor Decoded(uint64_t idx) const {
    std::ifstream in(paths_[idx], std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    runtime::ImageBuffer decoded;
    auto region = runtime::DecodeJpeg(bytes, {}, decoded);
    if (!region) throw std::runtime_error(region.error().ToString());
    RefTensor t =
        RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {decoded.height(), decoded.width(), 3});
    for (int64_t y = 0; y < decoded.height(); ++y) {
      for (int64_t k = 0; k < decoded.width() * 3; ++k) {
        t.data[y * decoded.width() * 3 + k] = decoded.row(static_cast<int>(y))[k];
      }
    }
    return t;
  }
  std::unique_ptr<ScopedDir> plans_, data_;
  std::vector<std::string> paths_;
};

TEST_F(ReferenceChainLoader, PointwiseBeforeGeometryRunsAndEqualsReferenceChain) {
  const std::string path = JitterPlan("jitter");
  if (path.empty()) GTEST_SKIP() << "SLUICE_TEST_REFERENCE_PLAN is not set (no compiler here)";
  Plan plan = Load(path);
  ASSERT_TRUE(plan.chains().empty());
  ASSERT_EQ(plan.reference_chains().size(), 1u);
  auto loader = Loader::Create(plan, Threads(2));
  ASSERT_TRUE(loader) << loader.error().ToString();
  EXPECT_EQ(loader->batches_per_epoch(), 3u);
  int compared = 0;
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    for (int b = 0; b < 3; ++b) {
      auto next = loader->Next();
      ASSERT_TRUE(next) << next.error().ToString();
      ASSERT_TRUE(next->has_value());
      const Batch& batch = **next;
      const TensorView* image = batch.field("image");
      ASSERT_NE(image, nullptr);
      EXPECT_EQ(image->dtype, DType::kFloat32);
      EXPECT_EQ(image->shape, (std::vector<int64_t>{4, 3, 16, 16}));
      for (int i = 0; i < 4; ++i) {
        const uint64_t idx = batch.sample_indices()[i];
        auto ref = ReferenceChain(plan.reference_chains()[0], Decoded(idx), 5, epoch, idx);
        ASSERT_TRUE(ref) << ref.error().ToString();
        ASSERT_EQ(ref->num_elements(), 3 * 16 * 16);
        const float* got = image->as<float>() + i * 3 * 16 * 16;
        EXPECT_EQ(std::memcmp(got, ref->data.data(), sizeof(float) * 3 * 16 * 16), 0)
            << "epoch " << epoch << " sample " << idx;
        const int64_t label = batch.field("label")->as<int64_t>()[i];
        EXPECT_EQ(label,
                  static_cast<int64_t>(paths_[idx].find("class_1") != std::string::npos   ? 1
                                       : paths_[idx].find("class_2") != std::string::npos ? 2
                                                                                          : 0));
        ++compared;
      }
    }
    auto end = loader->Next();
    ASSERT_TRUE(end);
    EXPECT_FALSE(end->has_value());
  }
  EXPECT_EQ(compared, 24);
  LoaderStats stats = loader->Stats();
  EXPECT_GT(stats.kernel_seconds, 0);
  EXPECT_EQ(stats.bad_samples, 0u);
  ASSERT_EQ(stats.warnings.size(), 1u);
  EXPECT_NE(stats.warnings[0].find("batch field `image` is not fused ("), std::string::npos)
      << stats.warnings[0];
  EXPECT_NE(stats.warnings[0].find("color_jitter"), std::string::npos) << stats.warnings[0];
  EXPECT_NE(stats.warnings[0].find("it runs on the reference implementations, much slower than "
                                   "a fused kernel — see report.txt"),
            std::string::npos)
      << stats.warnings[0];
  EXPECT_EQ(stats.device, "cpu");
}

TEST_F(ReferenceChainLoader, DeterministicAcrossLoadersAndThreadCounts) {
  const std::string path = JitterPlan("det");
  if (path.empty()) GTEST_SKIP() << "SLUICE_TEST_REFERENCE_PLAN is not set (no compiler here)";
  Plan plan = Load(path);
  auto a = Loader::Create(plan, Threads(1));
  auto b = Loader::Create(plan, Threads(3));
  ASSERT_TRUE(a && b);
  auto ea = ReadEpoch(*a);
  auto eb = ReadEpoch(*b);
  ASSERT_TRUE(ea && eb);
  ASSERT_EQ(ea->batches.size(), 3u);
  EXPECT_EQ(ea->samples, eb->samples);
  EXPECT_TRUE(ea->batches == eb->batches);
  // Another seed draws other jitter factors and crops.
  LoaderOptions other = Threads(2);
  other.seed = 6;
  auto c = Loader::Create(plan, other);
  ASSERT_TRUE(c);
  auto ec = ReadEpoch(*c);
  ASSERT_TRUE(ec);
  EXPECT_FALSE(ea->batches == ec->batches);
}

// Two decodes of the same file: field `x` is a fused chain, field `y` (colour
// first) runs on the reference implementations. Both are right.
#ifndef SLUICE_TESTS_NO_COMPILER
TEST_F(ReferenceChainLoader, MixedPlanFusedAndReferenceFields) {
  const std::string graph =
      "  - decode_jpeg: {in: jpg, out: a, color: rgb}\n"
      "  - random_resized_crop: {size: [16, 16], out: x}\n"
      "  - decode_jpeg: {in: jpg, out: b, color: rgb}\n"
      "  - color_jitter: {saturation: 0.5}\n"
      "  - center_crop: {size: [12, 12], out: y}\n";
  const std::string path =
      CompileSpec(SpecText(graph, "{x: x, y: y, label: cls}"), plans_->path(), "mixed");
  Plan plan = Load(path);
  ASSERT_EQ(plan.chains().size(), 1u);
  ASSERT_EQ(plan.chain_fields(), (std::vector<std::string>{"x"}));
  ASSERT_EQ(plan.reference_fields(), (std::vector<std::string>{"y"}));
  auto loader = Loader::Create(plan, Threads(2));
  ASSERT_TRUE(loader) << loader.error().ToString();
  auto next = loader->Next();
  ASSERT_TRUE(next && next->has_value());
  const Batch& batch = **next;
  const TensorView* x = batch.field("x");
  const TensorView* y = batch.field("y");
  ASSERT_TRUE(x && y);
  EXPECT_EQ(x->shape, (std::vector<int64_t>{4, 16, 16, 3}));
  EXPECT_EQ(y->shape, (std::vector<int64_t>{4, 12, 12, 3}));
  EXPECT_EQ(y->dtype, DType::kUInt8);
  for (int i = 0; i < 4; ++i) {
    const uint64_t idx = batch.sample_indices()[i];
    RefTensor decoded = Decoded(idx);
    auto rx = ReferenceChain(plan.chains()[0], decoded, 5, 0, idx);
    auto ry = ReferenceChain(plan.reference_chains()[0], decoded, 5, 0, idx);
    ASSERT_TRUE(rx && ry);
    // The fused kernel: within one uint8 level of the reference.
    const uint8_t* gx = x->as<uint8_t>() + i * 16 * 16 * 3;
    float max_diff = 0;
    for (int64_t k = 0; k < rx->num_elements(); ++k) {
      max_diff = std::max(max_diff, std::abs(gx[k] - rx->data[k]));
    }
    EXPECT_LE(max_diff, 1.0f) << "sample " << idx;
    // The reference field: exactly.
    const uint8_t* gy = y->as<uint8_t>() + i * 12 * 12 * 3;
    for (int64_t k = 0; k < ry->num_elements(); ++k) {
      ASSERT_EQ(gy[k], static_cast<uint8_t>(ry->data[k])) << "sample " << idx << " element " << k;
    }
  }
  const LoaderStats stats = loader->Stats();
  ASSERT_EQ(stats.warnings.size(), 1u);
  EXPECT_NE(stats.warnings[0].find("batch field `y` is not fused"), std::string::npos);
  EXPECT_EQ(stats.warnings[0].find("`x`"), std::string::npos) << stats.warnings[0];
}

// A reference chain whose result is the field's shape only for square images
// (a resize to the shorter side, written into plan.json by hand: the compiler
// would not accept it): the other images are bad samples, skipped and counted.
TEST_F(ReferenceChainLoader, WrongShapeForSomeImageSizesIsABadSample) {
  data_ = std::make_unique<ScopedDir>("ref_shapes");
  paths_.clear();
  for (int i = 0; i < 12; ++i) {
    const bool square = i % 6 != 0;  // 10 square, 2 not
    char name[64];
    std::snprintf(name, sizeof name, "class_0/img_%03d.jpg", i);
    fs::path p = data_->path() / name;
    WriteBytes(p, MakeJpeg(40 + i, square ? 40 + i : 60 + i, static_cast<uint32_t>(i)));
    paths_.push_back(p.string());
  }
  std::sort(paths_.begin(), paths_.end());
  const std::string graph =
      "  - decode_jpeg: {in: jpg, out: image, color: rgb}\n"
      "  - color_jitter: {brightness: 0.2}\n"
      "  - resize: {size: [20, 20]}\n";
  const std::string compiled = CompileSpec(
      SpecText(graph, "{image: image, label: cls}", "{policy: skip, max_fraction: 1.0}"),
      plans_->path(), "shapes");
  const fs::path edited =
      CopyWithEditedJson(compiled, plans_->path() / "shapes_edited.plan", [](json& j) {
        ASSERT_EQ(j["reference_chains"].size(), 1u);
        json& resize = j["reference_chains"][0]["steps"][1];
        ASSERT_EQ(resize["op"], "resize");
        resize["params"]["size"] = json::array({20});  // shorter side: 20 x (20 * w / h)
      });
  ASSERT_FALSE(HasFatalFailure());
  Plan plan = Load(edited.string());
  auto loader = Loader::Create(plan, Threads(2));
  ASSERT_TRUE(loader) << loader.error().ToString();
  auto epoch = ReadEpoch(*loader);
  ASSERT_TRUE(epoch) << epoch.error().ToString();
  ASSERT_EQ(epoch->batches.size(), 3u);
  for (const auto& samples : epoch->samples) {
    for (uint64_t idx : samples) {
      const int i = std::stoi(paths_[idx].substr(paths_[idx].size() - 7, 3));
      EXPECT_NE(i % 6, 0) << "a non-square image was delivered: " << paths_[idx];
    }
  }
  const LoaderStats stats = loader->Stats();
  EXPECT_GT(stats.bad_samples, 0u);
  EXPECT_EQ(stats.skipped, stats.bad_reads);
  ASSERT_FALSE(stats.last_bad.empty());
  // Two workers record the two bad samples in either order: look at all of them.
  std::string reasons;
  for (const BadSample& bad : stats.last_bad) {
    EXPECT_NE(bad.reason.find("image, not the field's uint8[20,20,3] HWC"), std::string::npos)
        << bad.reason;
    reasons += bad.reason + "\n";
  }
  // 40x60 -> 20x30 (the shorter side resized to 20).
  EXPECT_NE(reasons.find("batch field `image`: its reference chain gives uint8[30,20,3] HWC for "
                         "a 40x60 image"),
            std::string::npos)
      << reasons;

  // Under on_error: fail the same sample stops the batch with its error.
  const fs::path failing =
      CopyWithEditedJson(edited, plans_->path() / "shapes_fail.plan",
                         [](json& j) { j["output"]["on_error"]["policy"] = "fail"; });
  Plan fail_plan = Load(failing.string());
  auto fail_loader = Loader::Create(fail_plan, Threads(1));
  ASSERT_TRUE(fail_loader);
  bool failed = false;
  for (int b = 0; b < 3 && !failed; ++b) {
    auto next = fail_loader->Next();
    if (!next) {
      failed = true;
      EXPECT_NE(next.error().message.find("its reference chain gives"), std::string::npos)
          << next.error().message;
    }
  }
  EXPECT_TRUE(failed);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400u), exp - 25);
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
}

TEST_F(ReferenceChainLoader, Float16OutputIsConvertedExactly) {
  const std::string graph =
      "  - decode_jpeg: {in: jpg, out: image, color: rgb}\n"
      "  - color_jitter: {contrast: 0.5}\n"
      "  - center_crop: {size: [10, 10]}\n"
      "  - normalize: {mean: [0.5, 0.4, 0.3], std: [0.01, 0.2, 3.0], scale: 255}\n"
      "  - cast: {dtype: float16}\n";
  const std::string path =
      CompileSpec(SpecText(graph, "{image: image, label: cls}"), plans_->path(), "half");
  Plan plan = Load(path);
  ASSERT_EQ(plan.reference_chains().size(), 1u);
  auto loader = Loader::Create(plan, Threads(2));
  ASSERT_TRUE(loader) << loader.error().ToString();
  auto next = loader->Next();
  ASSERT_TRUE(next && next->has_value());
  const TensorView* image = (*next)->field("image");
  ASSERT_NE(image, nullptr);
  EXPECT_EQ(image->dtype, DType::kFloat16);
  EXPECT_EQ(image->shape, (std::vector<int64_t>{4, 10, 10, 3}));
  EXPECT_EQ(image->bytes, 4u * 10 * 10 * 3 * 2);
  int nonzero = 0;
  for (int i = 0; i < 4; ++i) {
    const uint64_t idx = (*next)->sample_indices()[i];
    auto ref = ReferenceChain(plan.reference_chains()[0], Decoded(idx), 5, 0, idx);
    ASSERT_TRUE(ref);
    const auto* got = static_cast<const uint16_t*>(image->data) + i * 300;
    for (int k = 0; k < 300; ++k) {
      // The reference's values are already float16-rounded: the bits must
      // decode back to exactly that value, and match the compiler's own
      // float -> _Float16 conversion.
      EXPECT_EQ(HalfToFloat(got[k]), ref->data[k]) << "sample " << idx << " element " << k;
      const _Float16 h = static_cast<_Float16>(ref->data[k]);
      EXPECT_EQ(got[k], std::bit_cast<uint16_t>(h));
      nonzero += got[k] != 0;
    }
  }
  EXPECT_GT(nonzero, 100);  // a real image, not zeros
}

// A plan whose only batch field cannot be built as a simple chain still says
// which field (an old loader's error path stays clear too).
TEST_F(ReferenceChainLoader, FieldWithoutAnyChainIsUnsupportedNamingIt) {
  const std::string path = CompileSpec(JitterFirstSpec(), plans_->path(), "nochain");
  const fs::path edited =
      CopyWithEditedJson(path, plans_->path() / "nochain_edited.plan", [](json& j) {
        j.erase("reference_chains");  // as an old compiler wrote it
      });
  Plan plan = Load(edited.string());
  auto loader = Loader::Create(plan, Threads(1));
  ASSERT_FALSE(loader);
  EXPECT_EQ(loader.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(loader.error().message.find("no fused kernel and no reference chain"),
            std::string::npos)
      << loader.error().message;
}

#endif  // SLUICE_TESTS_NO_COMPILER

}  // namespace
}  // namespace sluice
