// Offline autotuner (runtime/tune/autotuner.h) on the loader test plan: the
// search stays inside the CPU (option, else the spec's) and memory budgets,
// spec-explicit knobs are held,
// an impossible memory budget is an error, and WriteTunedKnobs keeps plan.json
// loadable with the knobs Plan::Load then reports.
#include "runtime/tune/autotuner.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/runtime/loader/loader_test_util.h"

namespace sluice::runtime {
namespace {

using testing_loader::EditedPlan;
using testing_loader::MakeDataset;
using testing_loader::ScopedDir;
using testing_loader::TestPlan;

class AutotunerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(TestPlan().error.empty()) << TestPlan().error;
    data_ = new ScopedDir("tune_data");
    MakeDataset(data_->path(), 48);
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }
  static Plan LoadPlan(const std::string& path) {
    auto plan = Plan::Load(path, {{"DATA", data_->path().string()}});
    EXPECT_TRUE(plan.has_value()) << plan.error().ToString();
    return std::move(*plan);
  }
  static HardwareProfile TwoCores() {
    HardwareProfile p;
    p.machine = "test";
    p.cpu.cores = 2;
    return p;
  }
  static ScopedDir* data_;
};
ScopedDir* AutotunerTest::data_ = nullptr;

TEST(AutotunerMemoryTest, EstimateMemoryCountsBuffersAndActiveWorkers) {
  // (prefetch + 1) batch buffers + min(threads, in_flight) scratch.
  EXPECT_EQ(EstimateMemory(Knobs{2, 2, 2}, 1000, 10), 3 * 1000 + 2 * 10);
  EXPECT_EQ(EstimateMemory(Knobs{4, 1, 1}, 1000, 10), 2 * 1000 + 1 * 10);
  HardwareProfile p;
  EXPECT_EQ(ScratchBytes(p), static_cast<int64_t>(110000 + 500 * 375 * 3));
  p.storage = HardwareProfile::Storage{"/d", 100, 1e-5, 1000, 10, 20};
  EXPECT_EQ(ScratchBytes(p), 1000 + 10 * 20 * 3);
}

TEST_F(AutotunerTest, StaysWithinTheCpuBudgetAndHoldsExplicitKnobs) {
  ScopedDir dir("tune_plan");
  // The spec sets prefetch: 3 explicitly; threads and in_flight stay auto.
  std::string path =
      EditedPlan(dir.path(), "p.plan", [](nlohmann::json& j) { j["output"]["prefetch"] = 3; });
  Plan plan = LoadPlan(path);
  TuneOptions o;
  o.cpu_budget = 2;
  o.seconds = 5;  // room for the start and a neighbour on a loaded machine
  std::vector<int> seen;
  o.on_trial = [&](const Trial& t) { seen.push_back(t.index); };
  auto r = Autotune(plan, TwoCores(), o);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_GE(r->trials.size(), 2u);  // the start and at least one neighbour
  EXPECT_EQ(seen.size(), r->trials.size());
  EXPECT_EQ(r->trials[0].note, "start");
  EXPECT_EQ(r->trials[0].knobs, (Knobs{2, 2, 3}));
  for (const Trial& t : r->trials) {
    EXPECT_GE(t.knobs.threads, 1);
    EXPECT_LE(t.knobs.threads, 2);
    EXPECT_GE(t.knobs.in_flight, 1);
    EXPECT_LE(t.knobs.in_flight, t.knobs.threads);
    EXPECT_EQ(t.knobs.prefetch, 3) << t.knobs.ToString();
    EXPECT_GT(t.images_per_second, 0);
    EXPECT_GT(t.memory_bytes, 0);
  }
  EXPECT_EQ(r->cpu_budget, 2);
  EXPECT_GT(r->batch_bytes, 0);
  EXPECT_GT(r->images_per_second, 0);
  bool best_was_tried = false;
  for (const Trial& t : r->trials) best_was_tried |= t.knobs == r->best;
  EXPECT_TRUE(best_was_tried);
}

TEST_F(AutotunerTest, SpecCpuBudgetBoundsTheSearchWithoutAnOption) {
  // output.cpu_budget: 1 on a 2-core profile: without --cpu-budget the tuner
  // used the profile's cores and wrote threads 2, which the loader then took
  // over the spec's budget (tuned threads come before cpu_budget).
  ScopedDir dir("tune_spec_budget");
  std::string path =
      EditedPlan(dir.path(), "b.plan", [](nlohmann::json& j) { j["output"]["cpu_budget"] = 1; });
  Plan plan = LoadPlan(path);
  TuneOptions o;
  o.seconds = 2;
  auto r = Autotune(plan, TwoCores(), o);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->cpu_budget, 1);
  for (const Trial& t : r->trials) EXPECT_EQ(t.knobs.threads, 1) << t.knobs.ToString();
  o.cpu_budget = 2;  // the option still wins
  auto wide = Autotune(plan, TwoCores(), o);
  ASSERT_TRUE(wide.has_value()) << wide.error().ToString();
  EXPECT_EQ(wide->cpu_budget, 2);
  EXPECT_EQ(wide->trials[0].knobs.threads, 2);
}

TEST_F(AutotunerTest, MemoryBudgetBoundsEveryTrialAndTooSmallIsAnError) {
  Plan plan = LoadPlan(TestPlan().path);
  TuneOptions o;
  o.cpu_budget = 1;
  o.seconds = 2;
  auto probe = Autotune(plan, TwoCores(), o);
  ASSERT_TRUE(probe.has_value()) << probe.error().ToString();
  const int64_t batch = probe->batch_bytes;
  const int64_t scratch = ScratchBytes(TwoCores());
  // Room for prefetch 2 but not 4.
  o.memory_budget = EstimateMemory(Knobs{1, 1, 2}, batch, scratch);
  auto r = Autotune(plan, TwoCores(), o);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  for (const Trial& t : r->trials) {
    EXPECT_LE(t.memory_bytes, o.memory_budget) << t.knobs.ToString();
    EXPECT_LE(t.knobs.prefetch, 2);
    EXPECT_EQ(t.knobs.threads, 1);
  }
  o.memory_budget = EstimateMemory(Knobs{1, 1, 1}, batch, scratch) - 1;
  auto none = Autotune(plan, TwoCores(), o);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(AutotunerTest, WriteTunedKnobsKeepsThePlanLoadable) {
  ScopedDir dir("tune_write");
  std::string path = EditedPlan(dir.path(), "w.plan", [](nlohmann::json&) {});
  std::ifstream before_in(path + "/plan.json");
  nlohmann::ordered_json before = nlohmann::ordered_json::parse(before_in);
  TuneResult r;
  r.best = Knobs{2, 1, 4};
  r.cpu_budget = 2;
  r.images_per_second = 123.5;
  r.batch_bytes = 4096;
  ASSERT_TRUE(WriteTunedKnobs(path, r, "test box").has_value());
  std::ifstream after_in(path + "/plan.json");
  nlohmann::ordered_json after = nlohmann::ordered_json::parse(after_in);
  // Everything else is unchanged, key order included.
  nlohmann::ordered_json stripped = after;
  stripped.erase("tuned");
  EXPECT_EQ(stripped.dump(), before.dump());
  EXPECT_EQ(after["tuned"]["profile_machine"], "test box");
  Plan plan = LoadPlan(path);
  EXPECT_EQ(plan.tuned().threads, 2);
  EXPECT_EQ(plan.tuned().in_flight, 1);
  EXPECT_EQ(plan.tuned().prefetch, 4);
  EXPECT_EQ(plan.tuned().cpu_budget, 2);
  auto loader = Loader::Create(plan);
  ASSERT_TRUE(loader.has_value()) << loader.error().ToString();
  EXPECT_EQ(loader->Stats().threads, 2);

  auto missing = WriteTunedKnobs((dir.path() / "nope.plan").string(), r, "x");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace sluice::runtime
