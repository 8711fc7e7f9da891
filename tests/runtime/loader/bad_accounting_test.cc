// Exact bad-sample accounting (docs/reliability.md): 30 of 3,002 tiny JPEGs
// (1%) corrupted four ways (truncated, empty, random bytes, text). For each
// policy, 1 and 2 threads and both remainder modes, the distinct bad samples
// Stats() and BadSamples() report are exactly the corrupted files the epoch
// reads, each once with its reason, while bad reads count every visit; skip
// and replace keep every batch full and identical across thread counts;
// max_fraction compares distinct bad samples, so 1.0 never fails.
//
// The corrupted set is chosen from epoch 0's order so that both remainder
// modes matter: 3,002 = 750 * 4 + 2, the sample at global position 0 is
// corrupt (pad repeats it: two bad reads, one bad sample) and so is the one
// at position 3,001 (drop leaves it out of the epoch: 29 distinct, not 30).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "runtime/sampling/epoch_sampler.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using nlohmann::json;

constexpr uint64_t kFiles = 3002;
constexpr uint64_t kCorrupt = 30;
constexpr int64_t kBatch = 4;  // the test plan's batch size
constexpr uint64_t kSeed = 7;  // the test plan's sampling.seed

struct Corpus {
  std::unique_ptr<ScopedDir> data, plans;
  std::vector<std::string> paths;  // by dataset index (image_folder's sorted order)
  std::set<uint64_t> corrupt;
  uint64_t first = 0, last = 0;  // dataset indices at global positions 0 and n-1
  std::vector<uint64_t> order;   // epoch 0's global order (all n positions)
};

// Writes the data set once for the whole suite.
const Corpus& TheCorpus() {
  static Corpus* corpus = [] {
    auto* c = new Corpus;
    c->data = std::make_unique<ScopedDir>("account_data");
    c->plans = std::make_unique<ScopedDir>("account_plans");
    for (uint64_t i = 0; i < kFiles; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "class_%d/img_%04d.jpg", static_cast<int>(i % 3),
                    static_cast<int>(i));
      c->paths.push_back((c->data->path() / name).string());
    }
    std::sort(c->paths.begin(), c->paths.end());
    runtime::SamplerConfig sc;
    sc.num_samples = kFiles;
    sc.seed = kSeed;
    sc.batch_size = kBatch;
    sc.remainder = runtime::Remainder::kPad;
    auto sampler = runtime::EpochSampler::Create(sc);
    if (!sampler) throw std::runtime_error(sampler.error().ToString());
    runtime::EpochOrder order = sampler->Epoch(0);
    for (uint64_t p = 0; p < kFiles; ++p) c->order.push_back(order[p]);
    c->first = c->order.front();
    c->last = c->order.back();
    // No two corrupted indices adjacent: replace (next index) then never meets
    // a second corrupted file, so it cannot reach the dropped one either.
    auto free_at = [&](uint64_t i) {
      for (uint64_t j : {i, (i + 1) % kFiles, (i + kFiles - 1) % kFiles}) {
        if (c->corrupt.count(j)) return false;
      }
      return true;
    };
    c->corrupt.insert(c->first);
    if (!free_at(c->last)) throw std::runtime_error("positions 0 and n-1 hold neighbours");
    c->corrupt.insert(c->last);
    for (uint64_t k = 0; c->corrupt.size() < kCorrupt; ++k) {
      const uint64_t i = (17 + 101 * k) % kFiles;
      if (free_at(i)) c->corrupt.insert(i);
    }
    int kind = 0;
    for (uint64_t i = 0; i < kFiles; ++i) {
      std::vector<uint8_t> good = MakeJpeg(16, 16, static_cast<uint32_t>(i % 64));
      if (!c->corrupt.count(i)) {
        WriteBytes(c->paths[i], good);
        continue;
      }
      std::vector<uint8_t> bytes;
      switch (kind++ % 4) {
        case 0:  // truncated inside the scan
          bytes.assign(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2));
          break;
        case 1:  // empty
          break;
        case 2: {  // random bytes (never a JPEG's 0xFF 0xD8 start)
          uint32_t s = static_cast<uint32_t>(i) * 2654435761u + 1;
          for (int b = 0; b < 300; ++b) {
            s = s * 1664525u + 1013904223u;
            bytes.push_back(static_cast<uint8_t>(s >> 24));
          }
          bytes[0] = 0x42;
          break;
        }
        default: {  // text
          const std::string text = "<html>not an image " + std::to_string(i) + "</html>\n";
          bytes.assign(text.begin(), text.end());
        }
      }
      WriteBytes(c->paths[i], bytes);
    }
    return c;
  }();
  return *corpus;
}

struct Setup {
  std::string policy;
  std::string remainder;
  int threads;
};

class BadAccountingTest : public ::testing::Test {
 protected:
  void SetUp() override { SLUICE_REQUIRE_TEST_PLAN(); }
  static std::string PlanFor(const std::string& policy, const std::string& remainder,
                             double max_fraction) {
    const std::string name =
        policy + "_" + remainder + "_" + std::to_string(max_fraction) + ".plan";
    return EditedPlan(TheCorpus().plans->path(), name, [&](json& j) {
      j["output"]["on_error"] = {{"policy", policy}, {"max_fraction", max_fraction}};
      j["sampling"]["remainder"] = remainder;
    });
  }
  static Loader Make(const std::string& plan_path, int threads) {
    return MakeSingleRankLoader(plan_path, TheCorpus().data->path(), threads);
  }
  // The corrupted files epoch 0 reads: all with pad, all but the one at
  // global position n-1 with drop.
  static std::set<uint64_t> Expected(const std::string& remainder) {
    std::set<uint64_t> e = TheCorpus().corrupt;
    if (remainder == "drop") e.erase(TheCorpus().last);
    return e;
  }
  // Checks BadSamples(epoch) names exactly `expected`, each once, with its
  // path and a reason.
  static void ExpectList(const Loader& loader, uint64_t epoch, const std::set<uint64_t>& expected) {
    auto bad = loader.BadSamples(epoch);
    ASSERT_TRUE(bad) << bad.error().ToString();
    std::vector<uint64_t> got;
    for (const BadSample& b : *bad) {
      got.push_back(b.index);
      EXPECT_EQ(b.epoch, epoch);
      ASSERT_LT(b.index, kFiles);
      EXPECT_EQ(b.path, TheCorpus().paths[b.index]);
      EXPECT_FALSE(b.reason.empty());
      EXPECT_EQ(b.reason.find(b.path), std::string::npos) << b.reason;
    }
    EXPECT_EQ(got, std::vector<uint64_t>(expected.begin(), expected.end()));
  }
};

TEST_F(BadAccountingTest, SkipAndReplaceCountEachCorruptedFileOnce) {
  for (const std::string policy : {"skip", "replace"}) {
    for (const std::string remainder : {"drop", "pad"}) {
      SCOPED_TRACE(policy + " " + remainder);
      const std::string plan = PlanFor(policy, remainder, 0.5);
      std::vector<EpochBytes> runs;
      for (int threads : {1, 2}) {
        SCOPED_TRACE(threads);
        Loader loader = Make(plan, threads);
        auto epoch = ReadEpoch(loader);
        ASSERT_TRUE(epoch) << epoch.error().ToString();
        // Every batch full: one per batch of the epoch, no corrupted index in a slot.
        const uint64_t positions = remainder == "pad" ? kFiles + 2 : kFiles - 2;
        EXPECT_EQ(epoch->batches.size(), positions / kBatch);
        for (const auto& indices : epoch->samples) {
          ASSERT_EQ(indices.size(), static_cast<size_t>(kBatch));
          for (uint64_t i : indices) EXPECT_FALSE(TheCorpus().corrupt.count(i)) << i;
        }
        const std::set<uint64_t> expected = Expected(remainder);
        LoaderStats s = loader.Stats();
        EXPECT_EQ(s.bad_samples, expected.size());
        // Pad's repeat of global position 0 reads that corrupted file again.
        EXPECT_GE(s.bad_reads, s.bad_samples + (remainder == "pad" ? 1 : 0));
        EXPECT_EQ(policy == "skip" ? s.skipped : s.replaced, s.bad_reads);
        EXPECT_EQ(policy == "skip" ? s.replaced : s.skipped, 0u);
        ExpectList(loader, 0, expected);
        runs.push_back(std::move(*epoch));
      }
      EXPECT_EQ(runs[0].samples, runs[1].samples);
      EXPECT_TRUE(runs[0].batches == runs[1].batches);
    }
  }
}

TEST_F(BadAccountingTest, FailStopsAtTheFirstBadBatchAndCountsItsBadSamples) {
  // "Reported distinct count" under fail: the bad samples of the batches
  // handed out up to and including the one Next() failed on.
  for (const std::string remainder : {"drop", "pad"}) {
    const std::string plan = PlanFor("fail", remainder, 0.5);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(remainder + " " + std::to_string(threads));
      Loader loader = Make(plan, threads);
      const Corpus& c = TheCorpus();
      // Epoch 0 order holds the corrupted file at position 0: batch 0 fails.
      std::set<uint64_t> in_first_batch;
      for (int64_t p = 0; p < kBatch; ++p) {
        if (c.corrupt.count(c.order[p])) in_first_batch.insert(c.order[p]);
      }
      auto next = loader.Next();
      ASSERT_FALSE(next);
      EXPECT_EQ(next.error().code, ErrorCode::kCorruptData) << next.error().ToString();
      EXPECT_NE(next.error().message.find(c.paths[c.first]), std::string::npos)
          << next.error().message;
      EXPECT_EQ(loader.Stats().bad_samples, in_first_batch.size());
      EXPECT_EQ(loader.Stats().bad_reads, in_first_batch.size());
      ExpectList(loader, 0, in_first_batch);
      // Going on past each failed batch, the epoch's count ends exact too.
      uint64_t failed = 1, delivered = 0;
      for (uint64_t calls = 0; calls <= loader.batches_per_epoch(); ++calls) {
        auto more = loader.Next();
        if (!more) {
          ++failed;
          continue;
        }
        if (!*more) break;
        ++delivered;
      }
      const std::set<uint64_t> expected = Expected(remainder);
      EXPECT_EQ(loader.Stats().bad_samples, expected.size());
      ExpectList(loader, 0, expected);
      EXPECT_EQ(failed + delivered, loader.batches_per_epoch());
    }
  }
}

TEST_F(BadAccountingTest, MaxFractionComparesDistinctBadSamples) {
  // pad: 3,004 positions, 30 distinct bad samples, at least 31 bad reads.
  const double base = static_cast<double>(kFiles + 2);
  Loader under = Make(PlanFor("skip", "pad", 30.5 / base), 2);
  auto epoch = ReadEpoch(under);
  ASSERT_TRUE(epoch) << epoch.error().ToString();
  EXPECT_GT(under.Stats().bad_reads, 30.5);
  Loader over = Make(PlanFor("skip", "pad", 29.5 / base), 2);
  auto failed = ReadEpoch(over);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(failed.error().message.find("30 distinct bad samples"), std::string::npos)
      << failed.error().message;
  // Sticky until Restore.
  auto again = over.Next();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kCorruptData);
}

TEST_F(BadAccountingTest, ListsAreKeptForTheCurrentAndPreviousEpoch) {
  Loader loader = Make(PlanFor("skip", "drop", 0.5), 2);
  ASSERT_TRUE(ReadEpoch(loader));  // epoch 0; the loader is now in epoch 1
  ExpectList(loader, 0, Expected("drop"));
  auto none = loader.BadSamples(1);
  ASSERT_TRUE(none);  // epoch 1: nothing handed out yet
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(ReadEpoch(loader));  // epoch 1
  auto one = loader.BadSamples(1);
  ASSERT_TRUE(one);
  // Epoch 1's own order drops two other positions: a corrupted file can be among them.
  EXPECT_GE(one->size(), kCorrupt - 2);
  EXPECT_LE(one->size(), kCorrupt);
  EXPECT_EQ(loader.Stats().bad_samples, Expected("drop").size() + one->size());
  auto gone = loader.BadSamples(0);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kInvalidArgument);
}

// The example: 14 files of which 9 are bad, max_fraction 1.0.
TEST_F(BadAccountingTest, MaxFractionOneNeverFails) {
  ScopedDir data("account_small");
  ScopedDir plans("account_small_plans");
  for (int i = 0; i < 14; ++i) {
    const fs::path p = data.path() / ("class_0/img_" + std::to_string(10 + i) + ".jpg");
    if (i < 5) {
      WriteBytes(p, MakeJpeg(16, 16, static_cast<uint32_t>(i)));
    } else {
      WriteBytes(p, std::vector<uint8_t>(static_cast<size_t>(i), 0x20));
    }
  }
  for (const std::string policy : {"skip", "replace"}) {
    for (const std::string remainder : {"drop", "pad"}) {
      SCOPED_TRACE(policy + " " + remainder);
      const std::string path = EditedPlan(plans.path(), policy + remainder + ".plan", [&](json& j) {
        j["output"]["on_error"] = {{"policy", policy}, {"max_fraction", 1.0}};
        j["sampling"]["remainder"] = remainder;
      });
      auto plan = Plan::Load(path, {{"DATA", data.path().string()}});
      ASSERT_TRUE(plan) << plan.error().ToString();
      LoaderOptions o;
      o.threads = 2;
      o.rank = 0;
      o.world_size = 1;
      auto loader = Loader::Create(*plan, o);
      ASSERT_TRUE(loader) << loader.error().ToString();
      auto epoch = ReadEpoch(*loader);
      ASSERT_TRUE(epoch) << epoch.error().ToString();
      EXPECT_LE(loader->Stats().bad_samples, 9u);
      // Counting visits (bad reads), as before, exceeds the epoch's samples:
      // a max_fraction of 1.0 failed.
      EXPECT_GT(loader->Stats().bad_reads,
                loader->batches_per_epoch() * static_cast<uint64_t>(loader->batch_size()));
    }
  }
}

}  // namespace
}  // namespace sluice
