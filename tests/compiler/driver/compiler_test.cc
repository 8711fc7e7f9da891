// The compile driver (include/sluice/compiler.h): spec text or file, spec
// errors as diagnostics, stop_after, the profile and CPU budget reaching the
// passes through their context, and writing the plan.
#include "sluice/compiler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/hardware_profile.h"
#include "compiler/cost/cost_model.h"
#include "compiler/driver/compilation_internal.h"
#include "tests/compiler/synthetic_profile.h"

namespace sluice {
namespace {

const char* kSpec =
    "sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\ngraph:\n"
    "  - decode_jpeg: {in: jpg, out: image}\n"
    "  - random_resized_crop: {size: [32, 32]}\n"
    "  - normalize: {mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25], scale: 255}\n"
    "batch: {size: 4, fields: {image: image, label: cls}}\n";

CompileOptions TextOptions(const std::string& text) {
  CompileOptions o;
  o.spec_text = text;
  o.spec_name = "t.yaml";
  return o;
}

TEST(CompileDriver, CompilesTextThroughEveryPass) {
  auto c = Compile(TextOptions(kSpec));
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_FALSE(c->has_errors());
  EXPECT_EQ(c->diagnostics(), "");
  EXPECT_EQ(c->name(), "t");
  EXPECT_EQ(c->node_count(), 5);
  EXPECT_EQ(c->fusion_group_count(), 1);
  EXPECT_EQ(c->stopped_after(), "");
  EXPECT_EQ(c->batch_summary(), "image: float32[4,32,32,3] HWC, label: int64[4]");
  const std::string ir = c->ir_text();
  EXPECT_NE(ir.find("roi=yes, dct_scaling=opt-in"), std::string::npos) << ir;
  EXPECT_NE(ir.find("memory: batch buffer"), std::string::npos) << ir;
  EXPECT_TRUE(c->impl().graph.placement.ran);
  EXPECT_TRUE(c->impl().graph.memory.planned);
}

TEST(CompileDriver, SpecErrorsAreDiagnosticsNotErrors) {
  std::string bad = kSpec;
  bad.replace(bad.find("random_resized_crop"), 19, "random_resize_crop");
  auto c = Compile(TextOptions(bad));
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  ASSERT_TRUE(c->has_errors());
  EXPECT_NE(c->diagnostics().find("t.yaml:6:"), std::string::npos) << c->diagnostics();
  EXPECT_NE(c->diagnostics().find("random_resized_crop"), std::string::npos);
  Error e = c->diagnostics_error();
  EXPECT_EQ(e.code, ErrorCode::kInvalidSpec);
  EXPECT_EQ(e.mark.line, 6);
  EXPECT_EQ(c->ir_text(), "");
  Status written = c->WritePlan((std::filesystem::temp_directory_path() / "never.plan").string());
  ASSERT_FALSE(written.has_value());
  EXPECT_EQ(written.error().code, ErrorCode::kInvalidArgument);
}

TEST(CompileDriver, StopAfterAndParseOnly) {
  CompileOptions o = TextOptions(kSpec);
  o.stop_after = "decode_pushdown";
  auto c = Compile(o);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->stopped_after(), "decode_pushdown");
  EXPECT_NE(c->ir_text().find("pushdown: %image:"), std::string::npos) << c->ir_text();
  EXPECT_FALSE(c->impl().graph.placement.ran);
  EXPECT_FALSE(c->impl().graph.memory.planned);
  EXPECT_FALSE(c->WritePlan("unused.plan").has_value());

  o.stop_after = "no_such_pass";
  auto unknown = Compile(o);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.error().hint.find("memory_planning"), std::string::npos);

  CompileOptions parse = TextOptions(kSpec);
  parse.parse_only = true;
  auto p = Compile(parse);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->impl().spec.name, "t");
  EXPECT_EQ(p->ir_text(), "");
}

TEST(CompileDriver, OptionsNeedExactlyOneSpec) {
  CompileOptions neither;
  EXPECT_FALSE(Compile(neither).has_value());
  CompileOptions both = TextOptions(kSpec);
  both.spec_path = "x.yaml";
  EXPECT_FALSE(Compile(both).has_value());
}

TEST(CompileDriver, SpecFileAndUnreadableFile) {
  auto dir = std::filesystem::temp_directory_path() / "sluice_driver_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "s.yaml").string();
  std::ofstream(path) << kSpec;
  CompileOptions o;
  o.spec_path = path;
  auto c = Compile(o);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_FALSE(c->has_errors()) << c->diagnostics();
  EXPECT_EQ(c->impl().spec_text, kSpec);
  EXPECT_NE(c->ir_text().find("(spec: " + path + ")"), std::string::npos);

  o.spec_path = (dir / "missing.yaml").string();
  auto missing = Compile(o);
  ASSERT_TRUE(missing.has_value());
  EXPECT_TRUE(missing->has_errors());
  EXPECT_NE(missing->diagnostics().find("cannot read"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(CompileDriver, SpecFileReadIsBoundedAndNeedsAFile) {
  // /dev/zero never ends: the read stops one byte past the 1 MiB limit.
  CompileOptions o;
  o.spec_path = "/dev/zero";
  auto zero = Compile(o);
  ASSERT_TRUE(zero.has_value()) << zero.error().ToString();
  EXPECT_NE(zero->diagnostics().find("/dev/zero:1:1: error: the spec is larger than 1048576"),
            std::string::npos)
      << zero->diagnostics();

  // A directory named like a spec is not "the spec is empty".
  auto dir = std::filesystem::temp_directory_path() / "sluice_driver_dir_test";
  std::filesystem::create_directories(dir / "x.yaml");
  o.spec_path = (dir / "x.yaml").string();
  auto d = Compile(o);
  ASSERT_TRUE(d.has_value()) << d.error().ToString();
  EXPECT_NE(d->diagnostics().find("`" + o.spec_path + "` is a directory, not a spec file"),
            std::string::npos)
      << d->diagnostics();
  EXPECT_EQ(d->diagnostics().find("empty"), std::string::npos) << d->diagnostics();
  std::filesystem::remove_all(dir);
}

TEST(CompileDriver, ProfileAndBudgetReachPlacement) {
  CompileOptions o = TextOptions(kSpec);
  o.profile_path = "/nonexistent/hw.yaml";
  auto missing = Compile(o);
  ASSERT_FALSE(missing.has_value());  // the profile's load error

  o.profile_path.clear();
  o.cpu_budget = 3;
  auto c = Compile(o);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->impl().graph.placement.cpu_budget, 3);
  EXPECT_EQ(c->impl().graph.placement.cpu_budget_from, "--cpu-budget");
}

// The driver hands placement the cost model's predictions for the profile
// (PassContext::predict): every alternative weighed is predicted, with the
// numbers PredictCost gives for that split.
TEST(CompileDriver, ProfileGivesPlacementTheCostModelsPredictions) {
  HardwareProfile p = testing_profile::SyntheticCpu();
  p.gpu = testing_profile::SyntheticGpu();
  const std::string path = testing::TempDir() + "/compile_driver_hw.yaml";
  ASSERT_TRUE(SaveHardwareProfile(p, path));
  auto loaded = LoadHardwareProfile(path);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().ToString();

  CompileOptions o = TextOptions(kSpec);
  o.profile_path = path;
  auto c = Compile(o);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  const PlacementDecision& d = c->impl().graph.placement;
  EXPECT_EQ(d.cpu_budget_from, "profile cores");
  ASSERT_EQ(d.alternatives.size(), 2u);  // all on cpu, normalize on gpu
  for (const PlacementAlternative& a : d.alternatives) {
    ASSERT_TRUE(a.predicted) << a.name;
    const CostPrediction want = PredictCost(*loaded, c->impl().graph, a.gpu_from, d.cpu_budget);
    EXPECT_GT(a.images_per_second, 0) << a.name;
    EXPECT_DOUBLE_EQ(a.images_per_second, want.images_per_second) << a.name;
    EXPECT_DOUBLE_EQ(a.cpu_s_per_sample, want.cpu_s) << a.name;
    EXPECT_DOUBLE_EQ(a.gpu_s_per_sample, want.gpu_s) << a.name;
    EXPECT_DOUBLE_EQ(a.h2d_bytes_per_sample, want.h2d_bytes) << a.name;
    EXPECT_EQ(a.limit, want.limit) << a.name;
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sluice
