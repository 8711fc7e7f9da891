// Plan::Load on a real plan: compile examples/imagenet_train.yaml once (one
// CPU target, no CUDA, to keep the test quick), then load it back and break
// copies of it in the ways a user can (old format, other compiler, deleted or
// truncated kernels.so, missing ${DATA}, a CPU the kernels do not run on).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "compiler/codegen/codegen.h"
#include "compiler/driver/compilation_internal.h"
#include "compiler/ir/ir.h"
#include "compiler/passes/fused_chains.h"
#include "ops/fusion/plan_format.h"
#include "runtime/kernels/kernel_library.h"
#include "runtime/plan/plan_internal.h"
#include "sluice/plan.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using testing_loader::ReadTextFile;

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A plan compiled once per test suite into a temporary directory from
// `SpecSource::Text()`: the graph after passes (graph_), the compile status,
// and fresh copies to break.
template <typename SpecSource>
class CompiledPlanSuite : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("sluice_plan_load_test_" + SpecSource::Name() +
                                                     "_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    const std::string text = SpecSource::Text();
    // Through the compile driver, as the CLI does.
    CompileOptions options;
    options.spec_text = text;
    options.spec_name = SpecSource::Name() + ".yaml";
    options.codegen.cpu_targets = testing_loader::TestCodegenOptions().cpu_targets;
    options.codegen.cuda = false;
    auto compilation = Compile(options);
    ASSERT_TRUE(compilation) << compilation.error().ToString();
    ASSERT_FALSE(compilation->has_errors()) << compilation->diagnostics();
    compiled_ = new Status(compilation->WritePlan(Plan().string()));
    graph_ = new Graph(std::move(compilation->impl().graph));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete graph_;
    delete compiled_;
  }
  void SetUp() override { ASSERT_TRUE(*compiled_) << compiled_->error().ToString(); }

  static fs::path Plan() { return *dir_ / (SpecSource::Name() + ".plan"); }
  // A fresh copy of the plan to break.
  static fs::path Copy(const std::string& name) {
    fs::path copy = *dir_ / name;
    fs::remove_all(copy);
    fs::copy(Plan(), copy, fs::copy_options::recursive);
    return copy;
  }

  static inline fs::path* dir_ = nullptr;
  static inline Graph* graph_ = nullptr;
  static inline Status* compiled_ = nullptr;
};

struct ImagenetTrainSpec {
  static std::string Name() { return "imagenet_train"; }
  static std::string Text() {
    return ReadTextFile(std::string(SLUICE_SOURCE_DIR) + "/examples/imagenet_train.yaml");
  }
};

class PlanLoad : public CompiledPlanSuite<ImagenetTrainSpec> {
 protected:
  static void EditJson(const fs::path& plan, const std::function<void(json&)>& edit) {
    json j = json::parse(ReadTextFile(plan / "plan.json"));
    edit(j);
    WriteFile(plan / "plan.json", j.dump(2));
  }
};

const PlanVars kVars = {{"DATA", "/data/imagenet"}};

TEST_F(PlanLoad, RoundTripGivesTheSameChains) {
  EXPECT_TRUE(fs::exists(Plan() / "report.txt"));
  auto plan = sluice::Plan::Load(Plan().string(), kVars);
  ASSERT_TRUE(plan) << plan.error().ToString();
  EXPECT_EQ(plan->name(), "imagenet_train");
  EXPECT_EQ(plan->source_format(), "image_folder");
  EXPECT_EQ(plan->source_params().at("path").AsString(), "/data/imagenet/train");
  EXPECT_EQ(plan->batch().at("size").AsInt(), 256);
  EXPECT_EQ(plan->output().at("device").AsString(), "auto");
  EXPECT_EQ(plan->sampling(), graph_->sampling);
  EXPECT_EQ(plan->cpu_targets(), (std::vector<std::string>{"x86-64-linux-sse41"}));

  std::vector<FusedChain> expected = BuildFusedChains(*graph_);
  ASSERT_EQ(plan->chains().size(), expected.size());
  ASSERT_EQ(expected.size(), 1u);
  const FusedChain& got = plan->chains()[0];
  EXPECT_EQ(got.symbol, expected[0].symbol);
  EXPECT_EQ(got.input, expected[0].input);
  EXPECT_EQ(got.output, expected[0].output);
  ASSERT_EQ(got.steps.size(), expected[0].steps.size());
  for (size_t i = 0; i < got.steps.size(); ++i) {
    EXPECT_EQ(got.steps[i].op, expected[0].steps[i].op) << i;
    EXPECT_EQ(got.steps[i].op_id, expected[0].steps[i].op_id) << i;
    EXPECT_EQ(got.steps[i].params, expected[0].steps[i].params) << i;
  }
  EXPECT_EQ(plan->chain_fields(), (std::vector<std::string>{"image"}));
  EXPECT_EQ(plan->cpu_kernel(0).output(), expected[0].output);
}

TEST_F(PlanLoad, UnboundVariableIsNamed) {
  auto plan = sluice::Plan::Load(Plan().string(), {});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(plan.error().message.find("${DATA}"), std::string::npos) << plan.error().message;
  EXPECT_NE(plan.error().message.find("source.path"), std::string::npos) << plan.error().message;
}

TEST_F(PlanLoad, BumpedFormatVersionIsAVersionMismatch) {
  fs::path copy = Copy("format.plan");
  const int bumped = sluice::plan_format::kFormatVersion + 1;
  EditJson(copy, [&](json& j) { j["format_version"] = bumped; });
  auto plan = sluice::Plan::Load(copy.string(), kVars);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kVersionMismatch);
  EXPECT_NE(plan.error().message.find("plan format version " + std::to_string(bumped)),
            std::string::npos)
      << plan.error().message;
}

TEST_F(PlanLoad, OtherCompilerSeriesIsAVersionMismatch) {
  fs::path copy = Copy("compiler.plan");
  EditJson(copy, [](json& j) { j["compiler_version"] = "9.3.0"; });
  auto plan = sluice::Plan::Load(copy.string(), kVars);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kVersionMismatch);
  EXPECT_NE(plan.error().message.find("sluice 9.3.0"), std::string::npos) << plan.error().message;
}

TEST_F(PlanLoad, DeletedKernelsSoIsNotFound) {
  fs::path copy = Copy("deleted.plan");
  fs::remove(copy / "kernels.so");
  auto plan = sluice::Plan::Load(copy.string(), kVars);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kNotFound);
  EXPECT_NE(plan.error().message.find("no kernels.so"), std::string::npos) << plan.error().message;
}

TEST_F(PlanLoad, TruncatedKernelsSoIsCorrupt) {
  fs::path copy = Copy("truncated.plan");
  fs::resize_file(copy / "kernels.so", fs::file_size(copy / "kernels.so") / 2);
  auto plan = sluice::Plan::Load(copy.string(), kVars);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(plan.error().message.find("does not match plan.json"), std::string::npos)
      << plan.error().message;
}

TEST_F(PlanLoad, CpuWithNoMatchingTargetIsUnsupported) {
  fs::path copy = Copy("arm.plan");
  EditJson(copy, [](json& j) { j["kernels"]["cpu_targets"] = json::array({"arm-64-linux"}); });
  auto plan = sluice::Plan::Load(copy.string(), kVars);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(plan.error().message.find("arm-64-linux"), std::string::npos) << plan.error().message;
}

TEST_F(PlanLoad, NotAPlanAndBadJson) {
  auto missing = sluice::Plan::Load((*dir_ / "nope.plan").string(), kVars);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  fs::path copy = Copy("badjson.plan");
  WriteFile(copy / "plan.json", "{\"format_version\": 1,");
  auto bad = sluice::Plan::Load(copy.string(), kVars);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kCorruptData);
}

// Plan::Verify: Load's checks without binding ${VARS}, checking the CPU or
// loading kernels.so.
TEST_F(PlanLoad, VerifyAcceptsAGoodPlanWithoutVarsOrThisCpu) {
  auto check = sluice::Plan::Verify(Plan().string());
  ASSERT_TRUE(check) << check.error().ToString();
  EXPECT_EQ(check->name, "imagenet_train");
  EXPECT_EQ(check->format_version, sluice::plan_format::kFormatVersion);
  EXPECT_EQ(check->kernels_hash, sluice::plan_format::HashFile((Plan() / "kernels.so").string()));
  // Targets this CPU does not run: Load refuses, Verify only checks integrity.
  fs::path copy = Copy("verify_arm.plan");
  EditJson(copy, [](json& j) { j["kernels"]["cpu_targets"] = json::array({"arm-64-linux"}); });
  EXPECT_TRUE(sluice::Plan::Verify(copy.string()));
}

TEST_F(PlanLoad, VerifyFindsWhatLoadFinds) {
  fs::path truncated = Copy("verify_truncated.plan");
  fs::resize_file(truncated / "kernels.so", fs::file_size(truncated / "kernels.so") / 2);
  auto t = sluice::Plan::Verify(truncated.string());
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(t.error().message.find("does not match plan.json"), std::string::npos);

  fs::path version = Copy("verify_format.plan");
  EditJson(version, [](json& j) { j["format_version"] = 99; });
  auto v = sluice::Plan::Verify(version.string());
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, ErrorCode::kVersionMismatch);

  fs::path op = Copy("verify_op.plan");
  EditJson(op, [](json& j) { j["decode"]["op"] = "decode_webp"; });
  auto o = sluice::Plan::Verify(op.string());
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().code, ErrorCode::kVersionMismatch);
  EXPECT_NE(o.error().message.find("decode_webp"), std::string::npos) << o.error().message;

  auto missing = sluice::Plan::Verify((*dir_ / "nope.plan").string());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST_F(PlanLoad, VerifyDoesNotLoadKernelsSo) {
  // Not a shared library, with plan.json's hash updated to match: Verify says
  // OK (it never dlopens), Load fails at dlopen.
  fs::path copy = Copy("verify_fake.plan");
  WriteFile(copy / "kernels.so", "not an ELF file\n");
  const auto hash = sluice::plan_format::HashFile((copy / "kernels.so").string());
  ASSERT_TRUE(hash);
  EditJson(copy, [&](json& j) { j["kernels"]["hash"] = *hash; });
  auto check = sluice::Plan::Verify(copy.string());
  ASSERT_TRUE(check) << check.error().ToString();
  EXPECT_EQ(check->kernels_hash, *hash);
  auto plan = sluice::Plan::Load(copy.string(), kVars);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kCorruptData);
}

TEST_F(PlanLoad, FusedPlanHasNoReferenceChains) {
  auto plan = sluice::Plan::Load(Plan().string(), kVars);
  ASSERT_TRUE(plan) << plan.error().ToString();
  EXPECT_TRUE(plan->reference_chains().empty());
  EXPECT_TRUE(plan->reference_fields().empty());
  // A plan from before reference chains (no key) loads the same.
  fs::path copy = Copy("old.plan");
  EditJson(copy, [](json& j) { j.erase("reference_chains"); });
  auto old = sluice::Plan::Load(copy.string(), kVars);
  ASSERT_TRUE(old) << old.error().ToString();
  EXPECT_TRUE(old->reference_chains().empty());
}

// A spec with color_jitter before the crop: no fusion group (kernels.so has no
// chain symbol), one reference chain, read back as the compiler built it.
struct JitterFirstSpec {
  static std::string Name() { return "ref"; }
  static std::string Text() {
    return "sluice: 1\nname: ref\nsource: {format: image_folder, path: \"${DATA}\"}\ngraph:\n"
           "  - decode_jpeg: {in: jpg, out: image}\n"
           "  - color_jitter: {brightness: 0.4, saturation: 0.4}\n"
           "  - random_resized_crop: {size: [16, 16]}\n"
           "  - cast: {dtype: float16}\n"
           "batch: {size: 2, fields: {image: image, label: cls}}\n";
  }
};

class ReferencePlanLoad : public CompiledPlanSuite<JitterFirstSpec> {};

TEST_F(ReferencePlanLoad, LoadsTheReferenceChainWithoutAnyFusedKernel) {
  auto plan = sluice::Plan::Load(Plan().string(), kVars);
  ASSERT_TRUE(plan) << plan.error().ToString();
  EXPECT_TRUE(plan->chains().empty());
  std::vector<ReferenceFieldChain> expected = BuildReferenceChains(*graph_);
  ASSERT_EQ(expected.size(), 1u);
  ASSERT_EQ(plan->reference_chains().size(), 1u);
  EXPECT_EQ(plan->reference_fields(), (std::vector<std::string>{"image"}));
  const FusedChain& got = plan->reference_chains()[0];
  EXPECT_EQ(got.symbol, "reference:image");
  EXPECT_EQ(got.gpu_from, -1);
  EXPECT_EQ(got.input, expected[0].chain.input);
  EXPECT_EQ(got.output, expected[0].chain.output);
  EXPECT_EQ(got.output.ToString(), "float16[16,16,3] HWC");
  ASSERT_EQ(got.steps.size(), 3u);
  ASSERT_EQ(got.steps.size(), expected[0].chain.steps.size());
  for (size_t i = 0; i < got.steps.size(); ++i) {
    EXPECT_EQ(got.steps[i].op, expected[0].chain.steps[i].op) << i;
    EXPECT_EQ(got.steps[i].op_id, expected[0].chain.steps[i].op_id) << i;
    EXPECT_EQ(got.steps[i].params, expected[0].chain.steps[i].params) << i;
  }
  EXPECT_EQ(got.steps[0].op->name, "color_jitter");
  EXPECT_NE(plan->reference_reasons()[0].find("color_jitter"), std::string::npos);
}

TEST_F(ReferencePlanLoad, CorruptReferenceStepIsCorruptDataNamingTheField) {
  fs::path copy = Copy("corrupt_step.plan");
  json j = json::parse(ReadTextFile(copy / "plan.json"));
  j["reference_chains"][0]["steps"][1].erase("op");
  WriteFile(copy / "plan.json", j.dump(2));
  auto plan = sluice::Plan::Load(copy.string(), kVars);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(plan.error().message.find("batch field `image`"), std::string::npos)
      << plan.error().message;

  fs::path no_type = Copy("no_type.plan");
  j = json::parse(ReadTextFile(no_type / "plan.json"));
  j["reference_chains"][0].erase("output_type");
  WriteFile(no_type / "plan.json", j.dump(2));
  auto missing = sluice::Plan::Load(no_type.string(), kVars);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(missing.error().message.find("batch field `image`"), std::string::npos);

  fs::path unknown = Copy("unknown_op.plan");
  j = json::parse(ReadTextFile(unknown / "plan.json"));
  j["reference_chains"][0]["steps"][0]["op"] = "colour_jitter";
  WriteFile(unknown / "plan.json", j.dump(2));
  auto op = sluice::Plan::Load(unknown.string(), kVars);
  ASSERT_FALSE(op);
  EXPECT_EQ(op.error().code, ErrorCode::kVersionMismatch);
  EXPECT_NE(op.error().message.find("colour_jitter"), std::string::npos);
}

TEST(BindVariables, SubstitutesAndNamesTheUnbound) {
  auto ok = BindVariables("${A}/x/${B}", {{"A", "a"}, {"B", "b"}}, "source.path");
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, "a/x/b");
  auto missing = BindVariables("${A}/${ROOT}", {{"A", "a"}}, "source.path");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("${ROOT}"), std::string::npos);
  EXPECT_FALSE(BindVariables("${A", {{"A", "a"}}, "source.path"));
}

}  // namespace
}  // namespace sluice
