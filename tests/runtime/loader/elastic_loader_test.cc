// Elastic resume through the Loader (LoaderState in include/sluice/loader.h):
// N ranks deliver some batches, their states are merged (MergeStates) and
// restored on M ranks, which deliver the rest of the epoch: every sample not
// yet delivered exactly once (drop: fewer than M * batch left over; pad:
// all, plus repeats), the same batch count on every rank. Over an image
// folder and over tar shards, with shuffle, sequential and shard_shuffle,
// strict and relaxed ordering.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "tests/runtime/loader/loader_test_util.h"
#include "tests/runtime/loader/shard_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using nlohmann::json;

constexpr int kFolderSamples = 50;
constexpr int kTarSamples = 60;  // ten shards of six
constexpr uint64_t kBatch = 4;   // the test plan's batch size

class ElasticLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_TEST_PLAN();
    work_ = std::make_unique<ScopedDir>("elastic_plans");
    folder_ = std::make_unique<ScopedDir>("elastic_folder");
    shards_ = std::make_unique<ScopedDir>("elastic_shards");
    tar_folder_ = std::make_unique<ScopedDir>("elastic_tar_folder");
    MakeDataset(folder_->path(), kFolderSamples);
    MakeDataset(tar_folder_->path(), kTarSamples);
    ASSERT_NO_FATAL_FAILURE(WriteTarShards(tar_folder_->path(), shards_->path(), 10, 6));
  }

  std::string PlanFor(bool tar, const std::string& order, const std::string& remainder) {
    const std::string name = std::string(tar ? "tar_" : "folder_") + order + "_" + remainder;
    return EditedPlan(work_->path(), name + ".plan", [&](json& j) {
      j["sampling"]["order"] = order;
      j["sampling"]["remainder"] = remainder;
      j["sampling"]["shuffle_buffer"] = 4;
      if (tar) UseTarShardsSource(j, "${DATA}");
    });
  }

  Loader Make(const std::string& plan_path, bool tar, int rank, int world, bool relaxed) {
    auto plan = Plan::Load(plan_path, {{"DATA", (tar ? shards_ : folder_)->path().string()}});
    if (!plan) throw std::runtime_error(plan.error().ToString());
    LoaderOptions o;
    o.threads = 2;
    o.prefetch = 3;
    o.rank = rank;
    o.world_size = world;
    o.relaxed_ordering = relaxed;
    auto loader = Loader::Create(*plan, o);
    if (!loader) throw std::runtime_error(loader.error().ToString());
    return std::move(*loader);
  }

  std::unique_ptr<ScopedDir> work_, folder_, shards_, tar_folder_;
};

struct Case {
  bool tar;
  const char* order;
  const char* remainder;
};

TEST_F(ElasticLoaderTest, ResumeOnAnotherWorldSizeDeliversTheRestExactlyOnce) {
  const Case cases[] = {{false, "shuffle", "drop"},
                        {false, "sequential", "pad"},
                        {true, "shard_shuffle", "drop"},
                        {true, "shuffle", "pad"}};
  for (const Case& c : cases) {
    const std::string plan = PlanFor(c.tar, c.order, c.remainder);
    const uint64_t n = c.tar ? kTarSamples : kFolderSamples;
    const bool pad = std::string(c.remainder) == "pad";
    for (auto [from, to] : {std::pair{4, 2}, {2, 3}, {3, 3}}) {
      for (bool relaxed : {false, true}) {
        for (uint64_t k : {1ull, 2ull}) {
          SCOPED_TRACE(::testing::Message()
                       << (c.tar ? "tar " : "folder ") << c.order << " " << c.remainder << " "
                       << from << "->" << to << (relaxed ? " relaxed" : " strict") << " k=" << k);
          std::map<uint64_t, int> count;
          uint64_t delivered = 0;
          std::vector<LoaderState> states;
          for (int r = 0; r < from; ++r) {
            Loader loader = Make(plan, c.tar, r, from, relaxed);
            ASSERT_LT(k, loader.batches_per_epoch());  // mid-epoch
            for (uint64_t i = 0; i < k; ++i) {
              auto next = loader.Next();
              ASSERT_TRUE(next && next->has_value());
              for (uint64_t s : (**next).sample_indices()) ++count[s];
              delivered += kBatch;
            }
            states.push_back(loader.State());
            EXPECT_EQ(states.back().complete(), !relaxed);
          }
          auto merged = MergeStates(states);
          ASSERT_TRUE(merged) << merged.error().ToString();
          ASSERT_TRUE(merged->complete());
          auto text = LoaderState::FromString(merged->ToString());
          ASSERT_TRUE(text && *text == *merged);
          // Without padding, what was delivered is what the state names.
          if (!pad) {
            EXPECT_EQ(merged->consumed_count(), delivered);
          }
          uint64_t batches = 0;
          for (int r = 0; r < to; ++r) {
            Loader loader = Make(plan, c.tar, r, to, relaxed);
            ASSERT_TRUE(loader.Restore(*merged));
            uint64_t mine = 0;
            while (true) {
              auto next = loader.Next();
              ASSERT_TRUE(next) << next.error().ToString();
              if (!next->has_value()) break;
              for (uint64_t s : (**next).sample_indices()) ++count[s];
              delivered += kBatch;
              ++mine;
            }
            if (r == 0) batches = mine;
            EXPECT_EQ(mine, batches) << "rank " << r << " of " << to;
          }
          uint64_t missing = 0, repeats = 0;
          for (uint64_t s = 0; s < n; ++s) {
            if (count[s] == 0) ++missing;
            if (count[s] > 1) repeats += static_cast<uint64_t>(count[s] - 1);
          }
          if (pad) {
            EXPECT_EQ(missing, 0u);
            EXPECT_EQ(repeats, delivered - n);
          } else {
            EXPECT_EQ(repeats, 0u);
            EXPECT_LT(missing, static_cast<uint64_t>(to) * kBatch);
            EXPECT_EQ(delivered + missing, n);
          }
        }
      }
    }
  }
}

// A complete state whose consumed batches are not every rank's first ones
// (what MergeStates makes of a relaxed job whose ranks delivered batch 2
// early) restored on strict ranks: the ranks' states stay equal, and the
// epoch's rest is delivered once. Before, each strict rank kept only its own
// early batch in its State(), so resuming rank 0's state repeated rank 1's.
TEST_F(ElasticLoaderTest, StrictRanksRestoringBatchesDeliveredOutOfOrderAgree) {
  const std::string plan = PlanFor(false, "sequential", "drop");
  Loader probe = Make(plan, false, 0, 2, false);
  LoaderState state = probe.State();
  ASSERT_TRUE(state.complete());
  state.consumed = {{4 * kBatch, 6 * kBatch}};  // batch 2 of rank 0 and of rank 1
  std::map<uint64_t, int> count;
  for (uint64_t s = 4 * kBatch; s < 6 * kBatch; ++s) ++count[s];  // sequential: U = sample
  std::vector<LoaderState> after_one;
  for (int r = 0; r < 2; ++r) {
    Loader loader = Make(plan, false, r, 2, false);
    ASSERT_TRUE(loader.Restore(state));
    auto next = loader.Next();
    ASSERT_TRUE(next && next->has_value());
    after_one.push_back(loader.State());
  }
  EXPECT_TRUE(after_one[0] == after_one[1])
      << after_one[0].ToString() << " vs " << after_one[1].ToString();
  // Rank 0's state is the job's: resume it on 3 ranks, and on 2 as well.
  for (int to : {3, 2}) {
    SCOPED_TRACE(::testing::Message() << "to " << to);
    std::map<uint64_t, int> seen = count;
    uint64_t delivered = 0;
    for (int r = 0; r < 2; ++r) {  // the batch each rank took before saving
      Loader loader = Make(plan, false, r, 2, false);
      ASSERT_TRUE(loader.Restore(state));
      auto next = loader.Next();
      ASSERT_TRUE(next && next->has_value());
      for (uint64_t s : (**next).sample_indices()) ++seen[s];
    }
    for (int r = 0; r < to; ++r) {
      Loader loader = Make(plan, false, r, to, false);
      ASSERT_TRUE(loader.Restore(after_one[0]));
      auto rest = ReadEpoch(loader);
      ASSERT_TRUE(rest) << rest.error().ToString();
      for (const auto& batch : rest->samples) {
        for (uint64_t s : batch) ++seen[s];
        delivered += batch.size();
      }
    }
    for (const auto& [sample, times] : seen) EXPECT_EQ(times, 1) << "sample " << sample;
    EXPECT_LT(kFolderSamples - seen.size(), static_cast<size_t>(to) * kBatch);
    EXPECT_GT(delivered, 0u);
  }
}

TEST_F(ElasticLoaderTest, SameWorldSizeContinuesExactlyAndRankStatesNeedTheirRank) {
  const std::string plan = PlanFor(true, "shard_shuffle", "drop");
  Loader whole = Make(plan, true, 1, 3, false);
  auto expected = ReadEpoch(whole);
  ASSERT_TRUE(expected);
  ASSERT_EQ(expected->batches.size(), 5u);  // floor(60 / 12)
  Loader first = Make(plan, true, 0, 3, false);
  ASSERT_TRUE(ReadEpoch(first, 1));
  LoaderState state = first.State();  // strict: every rank's, in lockstep
  EXPECT_EQ(state.order_world_size, 3);
  Loader resumed = Make(plan, true, 1, 3, false);
  ASSERT_TRUE(resumed.Restore(state));
  auto next = resumed.Next();
  ASSERT_TRUE(next && next->has_value());
  EXPECT_EQ((**next).index(), 1u);
  EXPECT_TRUE(BatchBytes(**next) == expected->batches[1]);

  // A relaxed rank state restores only on its own rank of its world size.
  Loader relaxed = Make(plan, true, 2, 3, true);
  ASSERT_TRUE(ReadEpoch(relaxed, 1));
  LoaderState rank_state = relaxed.State();
  ASSERT_FALSE(rank_state.complete());
  EXPECT_EQ(rank_state.rank, 2);
  EXPECT_FALSE(resumed.Restore(rank_state));
  Loader same = Make(plan, true, 2, 3, true);
  EXPECT_TRUE(same.Restore(rank_state));
  // Merging needs every rank once.
  EXPECT_FALSE(MergeStates({rank_state}));
  EXPECT_FALSE(MergeStates({rank_state, rank_state, rank_state}));
  EXPECT_FALSE(MergeStates({rank_state, state}));
  // Ranks outside the world size are refused (rank -5 corrupted the heap).
  for (int bad_rank : {-5, 3, 64}) {
    std::vector<LoaderState> states;
    for (int r = 0; r < 3; ++r) {
      Loader rank_loader = Make(plan, true, r, 3, true);
      ASSERT_TRUE(ReadEpoch(rank_loader, 1));
      states.push_back(rank_loader.State());
    }
    ASSERT_TRUE(MergeStates(states));
    states[1].rank = bad_rank;
    auto merged = MergeStates(states);
    ASSERT_FALSE(merged) << bad_rank;
    EXPECT_NE(merged.error().message.find("not one of the 3 ranks"), std::string::npos)
        << merged.error().message;
  }
}

}  // namespace
}  // namespace sluice
