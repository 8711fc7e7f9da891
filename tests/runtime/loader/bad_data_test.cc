// on_error policies with truncated, zero-byte, non-JPEG, absurd-dimension and
// vanishing files: skip and replace stay deterministic (same batches with 1 and
// 2 threads) and count the bad files with their paths; fail names the path;
// max_fraction turns too many bad files into an error; a data directory that
// disappears mid-epoch gives errors, not a crash or a hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using nlohmann::json;

class BadDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_TEST_PLAN();
    work_ = std::make_unique<ScopedDir>("bad_plans");
    data_ = std::make_unique<ScopedDir>("bad_data");
    MakeDataset(data_->path(), 24);
    const fs::path d = data_->path();
    std::vector<uint8_t> good = MakeJpeg(64, 48, 1000);
    // Truncated: header and half the scan.
    WriteBytes(d / "class_0/bad_truncated.jpg",
               std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2));
    WriteBytes(d / "class_1/bad_empty.jpg", {});
    std::string text = "this is not a jpeg";
    WriteBytes(d / "class_2/bad_text.jpg", std::vector<uint8_t>(text.begin(), text.end()));
    // Absurd dimensions: patch the SOF0 height/width to 60000 x 60000.
    WriteBytes(d / "class_0/bad_huge.jpg", WithSof0Size(good, 60000, 60000));
  }
  std::string PlanWith(const std::string& policy, double max_fraction) {
    return EditedPlan(work_->path(), policy + std::to_string(max_fraction) + ".plan", [&](json& j) {
      j["output"]["on_error"] = {{"policy", policy}, {"max_fraction", max_fraction}};
    });
  }
  Loader Make(const std::string& plan_path, int threads) {
    return MakeSingleRankLoader(plan_path, data_->path(), threads);
  }
  std::unique_ptr<ScopedDir> work_, data_;
};

TEST_F(BadDataTest, SkipFillsSlotsDeterministicallyAndCounts) {
  const std::string plan = PlanWith("skip", 0.5);
  Loader one = Make(plan, 1);
  Loader two = Make(plan, 2);
  auto a = ReadEpoch(one);
  auto b = ReadEpoch(two);
  ASSERT_TRUE(a) << a.error().ToString();
  ASSERT_TRUE(b) << b.error().ToString();
  EXPECT_EQ(a->batches.size(), 7u);  // 28 files, batch 4: every slot filled
  EXPECT_TRUE(a->batches == b->batches);
  EXPECT_EQ(a->samples, b->samples);
  LoaderStats stats = one.Stats();
  // Each bad file is met once as itself; a replacement draw may meet another
  // (a bad read, not another bad sample).
  EXPECT_EQ(stats.bad_samples, 4u);
  EXPECT_GE(stats.bad_reads, 4u);
  EXPECT_EQ(stats.skipped, stats.bad_reads);
  ASSERT_FALSE(stats.last_bad.empty());
  for (const BadSample& bad : stats.last_bad) {
    EXPECT_NE(bad.path.find("bad_"), std::string::npos) << bad.path;
    EXPECT_FALSE(bad.reason.empty());
  }
  // No bad file's index appears in a delivered slot (indices follow sorted paths).
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(data_->path())) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 28u);
  for (const auto& batch : a->samples) {
    for (uint64_t idx : batch) {
      EXPECT_EQ(fs::path(files[idx]).filename().string().find("bad_"), std::string::npos)
          << files[idx];
    }
  }
}

TEST_F(BadDataTest, ReplaceUsesTheNextDecodableIndex) {
  const std::string plan = PlanWith("replace", 0.5);
  Loader one = Make(plan, 1);
  Loader two = Make(plan, 2);
  auto a = ReadEpoch(one);
  auto b = ReadEpoch(two);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->batches == b->batches);
  // bad_huge.jpg and bad_truncated.jpg are neighbours in sorted order, so
  // replacing the first tries the second (counted) before a good file.
  EXPECT_GE(one.Stats().replaced, 4u);
  EXPECT_EQ(one.Stats().bad_samples, 4u);
  EXPECT_EQ(one.Stats().replaced, one.Stats().bad_reads);
  EXPECT_EQ(one.Stats().skipped, 0u);
  EXPECT_EQ(a->samples, b->samples);
}

TEST_F(BadDataTest, FailNamesThePathAndReason) {
  Loader loader = Make(PlanWith("fail", 0.5), 2);
  bool failed = false;
  for (int i = 0; i < 8 && !failed; ++i) {
    auto next = loader.Next();
    if (!next) {
      failed = true;
      EXPECT_NE(next.error().message.find("bad_"), std::string::npos) << next.error().message;
    } else if (!*next) {
      break;
    }
  }
  EXPECT_TRUE(failed);
  EXPECT_GE(loader.Stats().bad_samples, 1u);
}

TEST_F(BadDataTest, TooManyBadSamplesIsAnError) {
  Loader loader = Make(PlanWith("skip", 0.05), 2);  // 4 of 28 > 5%
  auto epoch = ReadEpoch(loader);
  ASSERT_FALSE(epoch);
  EXPECT_EQ(epoch.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(epoch.error().message.find("max_fraction"), std::string::npos);
}

TEST_F(BadDataTest, VanishingDirectoryGivesErrorsNotAHang) {
  Loader loader = Make(PlanWith("skip", 0.5), 2);
  auto first = loader.Next();
  ASSERT_TRUE(first);
  first->reset();
  fs::remove_all(data_->path());
  auto t0 = std::chrono::steady_clock::now();
  bool error = false;
  for (int i = 0; i < 20; ++i) {
    auto next = loader.Next();
    if (!next) {
      error = true;
      break;
    }
    if (!*next) break;
  }
  EXPECT_TRUE(error);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_GT(loader.Stats().bad_samples, 0u);
}

}  // namespace
}  // namespace sluice
