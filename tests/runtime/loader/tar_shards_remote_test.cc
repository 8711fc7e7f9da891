// The loader over a tar_shards source named by file:// URLs (read through the
// ObjectStore path: range reads for shuffle, streamed shards with read-ahead
// for shard_shuffle and sequential) delivers exactly the batches of the same
// shards read as local paths, resumes from a saved state, reports request
// stats, and turns an unreadable shard into bad samples naming its URL.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "runtime/remote/shard_cache.h"
#include "tests/runtime/loader/loader_test_util.h"
#include "tests/runtime/loader/shard_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using nlohmann::json;

class TarShardsRemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_TEST_PLAN();
    work_ = std::make_unique<ScopedDir>("rtar_plans");
    folder_ = std::make_unique<ScopedDir>("rtar_folder");
    shards_ = std::make_unique<ScopedDir>("rtar_shards");
    cache_ = std::make_unique<ScopedDir>("rtar_cache");
    MakeDataset(folder_->path(), 24);
    ASSERT_NO_FATAL_FAILURE(WriteTarShards(folder_->path(), shards_->path(), 3, 8));
  }
  // The test plan reading tar_shards at `path` in `order`.
  std::string TarPlan(const std::string& name, const std::string& path, const std::string& order,
                      const std::string& policy = "fail", int read_ahead = 1,
                      const std::string& shard_cache = "") {
    return EditedPlan(work_->path(), name, [&](json& j) {
      j["sampling"]["order"] = order;
      UseTarShardsSource(j, path, cache_->path().string());
      j["source"]["params"]["read_ahead"] = read_ahead;
      if (!shard_cache.empty()) {
        j["source"]["params"]["cache"] = {{"dir", shard_cache}, {"max_bytes", 1 << 30}};
      }
      j["output"]["on_error"] = {{"policy", policy}, {"max_fraction", 0.5}};
    });
  }
  Loader Make(const std::string& plan_path, int threads) {
    return MakeSingleRankLoader(plan_path, shards_->path(), threads);
  }
  std::string Url() const { return "file://" + shards_->path().string(); }
  std::unique_ptr<ScopedDir> work_, folder_, shards_, cache_;
};

TEST_F(TarShardsRemoteTest, FileUrlsGiveTheSameBatchesAsLocalPathsInEveryOrder) {
  for (const std::string order : {"shuffle", "shard_shuffle", "sequential"}) {
    SCOPED_TRACE(order);
    Loader local =
        Make(TarPlan(order + "-local.plan", "${DATA}/shard-{000000..000002}.tar", order), 2);
    Loader url =
        Make(TarPlan(order + "-url.plan", Url() + "/shard-{000000..000002}.tar", order), 2);
    for (int epoch = 0; epoch < 2; ++epoch) {
      auto a = ReadEpoch(local);
      auto b = ReadEpoch(url);
      ASSERT_TRUE(a.has_value()) << a.error().ToString();
      ASSERT_TRUE(b.has_value()) << b.error().ToString();
      EXPECT_EQ(b->batches.size(), 6u);
      EXPECT_EQ(a->samples, b->samples);
      EXPECT_TRUE(a->batches == b->batches);
    }
    const LoaderStats ls = local.Stats();
    const LoaderStats us = url.Stats();
    EXPECT_FALSE(ls.remote);
    EXPECT_EQ(ls.remote_requests, 0u);
    EXPECT_TRUE(us.remote);
    EXPECT_GT(us.remote_requests, 0u);
    EXPECT_GT(us.remote_bytes_fetched, 0u);
    EXPECT_GT(us.remote_latency_p99, 0.0);
    EXPECT_EQ(us.bad_samples, 0u);
    if (order == "shuffle") {
      EXPECT_EQ(us.shards_streamed, 0u);
    } else {
      EXPECT_GE(us.shards_streamed, 3u);  // every shard streamed at least once per epoch
    }
  }
}

TEST_F(TarShardsRemoteTest, DirectoryUrlAndResumeFromAState) {
  for (const std::string order : {"shuffle", "shard_shuffle"}) {
    SCOPED_TRACE(order);
    const std::string plan = TarPlan(order + ".plan", Url() + "/", order);
    Loader original = Make(plan, 2);
    ASSERT_TRUE(ReadEpoch(original, 2).has_value());
    const LoaderState state = original.State();
    auto rest = ReadEpoch(original);
    auto next = ReadEpoch(original, 2);
    ASSERT_TRUE(rest.has_value() && next.has_value());
    Loader restored = Make(plan, 1);
    ASSERT_TRUE(ReadEpoch(restored, 1).has_value());
    ASSERT_TRUE(restored.Restore(state).has_value());
    auto again = ReadEpoch(restored);
    auto again_next = ReadEpoch(restored, 2);
    ASSERT_TRUE(again.has_value() && again_next.has_value());
    EXPECT_EQ(again->samples, rest->samples);
    EXPECT_TRUE(again->batches == rest->batches);
    EXPECT_TRUE(again_next->batches == next->batches);
  }
}

TEST_F(TarShardsRemoteTest, AShardCacheIsFilledOnceThenServesEveryRead) {
  ScopedDir shard_cache("rtar_shard_cache");
  Loader local = Make(TarPlan("c-local.plan", "${DATA}", "shuffle"), 2);
  auto want = ReadEpoch(local);
  ASSERT_TRUE(want.has_value());
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    Loader url = Make(
        TarPlan("c-url.plan", Url() + "/", "shuffle", "fail", 1, shard_cache.path().string()), 2);
    auto got = ReadEpoch(url);
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    EXPECT_TRUE(got->batches == want->batches);
    const LoaderStats s = url.Stats();
    // Round 0 builds the index by fetching each shard into the cache (the
    // misses), and the reads then hit it: each shard is downloaded once.
    EXPECT_EQ(s.cache_misses, round == 0 ? 3u : 0u);
    EXPECT_EQ(s.cache_hits, 3u);
    uint64_t shard_bytes = 0;
    for (int k = 0; k < 3; ++k) {
      shard_bytes += fs::file_size(shards_->path() / ("shard-00000" + std::to_string(k) + ".tar"));
    }
    EXPECT_EQ(s.remote_bytes_fetched, round == 0 ? shard_bytes : 0u);
    if (round == 1) {
      EXPECT_EQ(s.remote_requests, 0u);  // index cached, shards cached
    }
  }
}

// Rewrites the label of every sample of the tar shard at `path` in place
// (class c becomes c + 1 modulo 3, one digit for one digit): the same size,
// other bytes.
void RelabelInPlace(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  int relabelled = 0;
  for (size_t at = 0; at + 512 <= bytes.size() && bytes[at] != '\0';) {
    const std::string name = bytes.substr(at, bytes.find('\0', at) - at);
    const size_t size = std::stoul(bytes.substr(at + 124, 12), nullptr, 8);
    if (name.ends_with(".cls")) {
      ASSERT_EQ(size, 1u) << name;
      char& digit = bytes[at + 512];
      digit = static_cast<char>('0' + (digit - '0' + 1) % 3);
      ++relabelled;
    }
    at += 512 + (size + 511) / 512 * 512;
  }
  ASSERT_GT(relabelled, 0);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A shard replaced by one of the same size (a new version: its mtime, for
// file://) is read anew, not from the shard cache's copy of the old one:
// the index is rescanned from the new bytes and the batches carry them, and
// the cache holds one entry per shard within max_bytes.
TEST_F(TarShardsRemoteTest, AShardReplacedByOneOfTheSameSizeIsNotServedFromTheShardCache) {
  ScopedDir copy("rtar_replaced");
  ScopedDir relabelled("rtar_relabelled");
  ScopedDir shard_cache("rtar_replaced_cache");
  for (int k = 0; k < 3; ++k) {
    const std::string name = "shard-00000" + std::to_string(k) + ".tar";
    fs::copy_file(shards_->path() / name, copy.path() / name);
    fs::copy_file(shards_->path() / name, relabelled.path() / name);
  }
  ASSERT_NO_FATAL_FAILURE(RelabelInPlace(relabelled.path() / "shard-000000.tar"));
  const std::string local_plan = TarPlan("v-local.plan", "${DATA}", "shuffle");
  Loader old_local = Make(local_plan, 2);
  auto old_batches = ReadEpoch(old_local);
  Loader new_local = MakeSingleRankLoader(local_plan, relabelled.path(), 2);
  auto new_batches = ReadEpoch(new_local);
  ASSERT_TRUE(old_batches.has_value() && new_batches.has_value());
  ASSERT_FALSE(old_batches->batches == new_batches->batches);

  const std::string url_plan =
      TarPlan("v-url.plan", "file://" + copy.path().string() + "/shard-{000000..000002}.tar",
              "shuffle", "fail", 1, shard_cache.path().string());
  {
    Loader url = Make(url_plan, 2);
    auto got = ReadEpoch(url);
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    EXPECT_TRUE(got->batches == old_batches->batches);
  }
  const fs::path replaced = copy.path() / "shard-000000.tar";
  const auto mtime = fs::last_write_time(replaced);
  fs::copy_file(relabelled.path() / "shard-000000.tar", replaced,
                fs::copy_options::overwrite_existing);
  fs::last_write_time(replaced, mtime + std::chrono::seconds(5));
  Loader url = Make(url_plan, 2);
  auto got = ReadEpoch(url);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_TRUE(got->batches == new_batches->batches);
  EXPECT_EQ(url.Stats().cache_misses, 1u);  // the replaced shard, once
  uint64_t entries = 0, bytes = 0;
  for (const auto& e : fs::directory_iterator(shard_cache.path())) {
    if (e.path().extension() != ".shard") continue;
    ++entries;
    bytes += fs::file_size(e.path());
  }
  EXPECT_EQ(entries, 3u);
  EXPECT_LE(bytes, uint64_t{1} << 30);
  uint64_t shard_bytes = 0;
  for (const auto& e : fs::directory_iterator(copy.path())) {
    if (e.path().extension() == ".tar") shard_bytes += fs::file_size(e.path());
  }
  EXPECT_EQ(bytes, shard_bytes);
}

// A cache whose directory lock another process holds and never releases (a
// stopped rank, say) is waited for at most remote.deadline_s each time; the
// shards are then read past the cache, and the batches are the same.
TEST_F(TarShardsRemoteTest, ACacheLockedByAStuckProcessIsReadPastAfterTheDeadline) {
  ScopedDir shard_cache("rtar_stuck_cache");
  const int held = ::open((shard_cache.path() / ".lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);  // its own open file description: a peer
  Loader local = Make(TarPlan("s-local.plan", "${DATA}", "shard_shuffle"), 2);
  auto want = ReadEpoch(local);
  ASSERT_TRUE(want.has_value());
  const std::string plan = CopyWithEditedJson(
      TarPlan("s-url0.plan", Url() + "/", "shard_shuffle", "fail", 1, shard_cache.path().string()),
      work_->path() / "s-url.plan", [](json& j) {
        j["source"]["params"]["remote"] = {{"deadline_s", 0.3}};
      });
  Loader url = Make(plan, 2);
  auto got = ReadEpoch(url);
  ::close(held);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_TRUE(got->batches == want->batches);
  const LoaderStats s = url.Stats();
  EXPECT_EQ(s.cache_hits, 0u);
  EXPECT_GE(s.cache_lock_timeouts, 3u);  // each shard's reservation, at least
  EXPECT_EQ(s.bad_samples, 0u);
  for (const auto& e : fs::directory_iterator(shard_cache.path())) {
    EXPECT_FALSE(e.path().filename().string().ends_with(".shard")) << e.path();
  }
}

// A cache whose disk refuses the space reads every shard past it, with the
// same batches, and the loader's stats say so (cache_passthrough and
// cache_no_space, from ShardCacheStats).
TEST_F(TarShardsRemoteTest, ACacheWithoutSpaceIsCountedInTheLoaderStats) {
  ScopedDir shard_cache("rtar_full_cache");
  Loader local = Make(TarPlan("f-local.plan", "${DATA}", "shard_shuffle"), 2);
  auto want = ReadEpoch(local);
  ASSERT_TRUE(want.has_value());
  runtime::remote::ShardCache::FailReservationsForTest(ENOSPC);  // the index build's too
  Loader url = Make(
      TarPlan("f-url.plan", Url() + "/", "shard_shuffle", "fail", 1, shard_cache.path().string()),
      2);
  auto got = ReadEpoch(url);
  runtime::remote::ShardCache::FailReservationsForTest(0);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_TRUE(got->batches == want->batches);
  const LoaderStats s = url.Stats();
  EXPECT_EQ(s.cache_hits, 0u);
  EXPECT_GE(s.cache_no_space, 3u);  // each shard at least once
  EXPECT_EQ(s.cache_passthrough, s.cache_no_space);
  EXPECT_EQ(s.bad_samples, 0u);
}

// Left auto, the read-ahead is sized from the plan's tuned memory budget
// (what it leaves after the prefetch + 1 batch buffers) when there is one.
TEST_F(TarShardsRemoteTest, AutoReadAheadFollowsTheTunedMemoryBudget) {
  uint64_t largest = 0;
  for (int k = 0; k < 3; ++k) {
    largest = std::max<uint64_t>(
        largest, fs::file_size(shards_->path() / ("shard-00000" + std::to_string(k) + ".tar")));
  }
  const int64_t batch_bytes = 1000;
  auto plan_with = [&](const std::string& name, const json& tuned) {
    return EditedPlan(work_->path(), name, [&](json& j) {
      j["sampling"]["order"] = "shard_shuffle";
      j["source"]["format"] = "tar_shards";
      j["source"]["params"] = {{"path", Url() + "/shard-{000000..000002}.tar"},
                               {"image", "jpg"},
                               {"label", "cls"},
                               {"index", ""},
                               {"cache_dir", cache_->path().string()}};
      if (!tuned.is_null()) j["tuned"] = tuned;
    });
  };
  Loader local = Make(TarPlan("ra-local.plan", "${DATA}", "shard_shuffle"), 2);
  auto want = ReadEpoch(local);
  ASSERT_TRUE(want.has_value());
  // No tuned budget: 2 shards ahead to start with (tiny shards: room for more).
  Loader untuned = Make(plan_with("ra-untuned.plan", json()), 2);
  auto got = ReadEpoch(untuned);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_TRUE(got->batches == want->batches);
  EXPECT_GE(untuned.Stats().read_ahead, 2);
  // A budget that leaves, after 3 batch buffers (prefetch 2 + 1), room for
  // the shard being read and one more: read-ahead 1, and it cannot grow.
  const int64_t budget = static_cast<int64_t>(2 * largest + largest / 2) + 3 * batch_bytes;
  Loader tuned = Make(
      plan_with("ra-tuned.plan", {{"memory_budget", budget}, {"batch_bytes", batch_bytes}}), 2);
  got = ReadEpoch(tuned);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_TRUE(got->batches == want->batches);
  EXPECT_EQ(tuned.Stats().read_ahead, 1);
}

// A shard whose bytes do not match the manifest's SHA-256 is not kept in the
// shard cache: the index is still built (from a plain stream), and the
// shard's samples, not the whole source, fail and follow on_error.
TEST_F(TarShardsRemoteTest, AShardFailingItsManifestChecksumIsBadSamplesNotAFailedSource) {
  ScopedDir copy("rtar_checksum");
  ScopedDir shard_cache("rtar_checksum_cache");
  for (int k = 0; k < 3; ++k) {
    const std::string name = "shard-00000" + std::to_string(k) + ".tar";
    fs::copy_file(shards_->path() / name, copy.path() / name);
  }
  {
    std::ofstream manifest(copy.path() / "manifest.json");
    manifest << R"({"shards": [{"name": "shard-000001.tar", "sha256": ")" << std::string(64, '0')
             << R"("}]})";
  }
  const std::string url = "file://" + copy.path().string() + "/shard-{000000..000002}.tar";
  auto plan = Plan::Load(
      TarPlan("checksum.plan", url, "shuffle", "skip", 1, shard_cache.path().string()), {});
  ASSERT_TRUE(plan.has_value()) << plan.error().ToString();
  auto loader = Loader::Create(*plan, LoaderOptions{.rank = 0, .world_size = 1});
  ASSERT_TRUE(loader.has_value()) << loader.error().ToString();
  auto epoch = ReadEpoch(*loader);
  ASSERT_TRUE(epoch.has_value()) << epoch.error().ToString();
  const LoaderStats stats = loader->Stats();
  EXPECT_EQ(stats.bad_samples, 8u);
  ASSERT_FALSE(stats.last_bad.empty());
  for (const BadSample& bad : stats.last_bad) {
    EXPECT_NE(bad.path.find("shard-000001.tar"), std::string::npos) << bad.path;
  }
  EXPECT_NE(stats.last_bad.front().reason.find("SHA-256"), std::string::npos)
      << stats.last_bad.front().reason;
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(shard_cache.path())) {
    entries += e.path().extension() == ".shard";
  }
  EXPECT_EQ(entries, 2u);  // the two good shards
}

// The shard removed is one none of whose samples is in the first two batches
// (under a seed chosen for that), and the loader runs with one prefetch buffer
// (two batches dispatched at Create) and no read-ahead: its first read of that
// shard starts only after the first Next(), after the removal, so no open
// handle can still read it.
TEST_F(TarShardsRemoteTest, ASampleWhoseShardVanishedIsABadSampleNamingTheUrl) {
  for (const std::string order : {"shuffle", "sequential"}) {
    SCOPED_TRACE(order);
    LoaderOptions options;
    options.threads = 1;
    options.prefetch = 1;
    options.rank = 0;
    options.world_size = 1;
    // A seed whose early samples leave out a shard: the loader starts at
    // Create and, before the first Next, may read every sample of the
    // prefetch + 1 = 2 batches it fills and every sample it announces with
    // them, which for a streamed order (sequential) is the source's read hint
    // window too: one shard of 8 samples per shard streamed (read_ahead 0 + 1),
    // 2 batches of 4 more. A shard among those may be read before the test
    // removes it (then served whole: no bad sample), so it must be another.
    const size_t early_batches = order == "shuffle" ? 2 : 4;
    auto local_plan = Plan::Load(TarPlan(order + "-local.plan", "${DATA}", order, "fail", 0),
                                 {{"DATA", shards_->path().string()}});
    ASSERT_TRUE(local_plan.has_value()) << local_plan.error().ToString();
    std::string vanished;
    for (uint64_t seed = 1; seed < 64 && vanished.empty(); ++seed) {
      options.seed = seed;
      auto local = Loader::Create(*local_plan, options);
      ASSERT_TRUE(local.has_value()) << local.error().ToString();
      auto want = ReadEpoch(*local, early_batches);
      ASSERT_TRUE(want.has_value()) << want.error().ToString();
      std::vector<bool> early(3, false);
      for (const auto& batch : want->samples) {
        for (uint64_t i : batch) early[i / 8] = true;
      }
      const auto absent = std::find(early.begin(), early.end(), false);
      if (absent != early.end()) {
        vanished = "shard-00000" + std::to_string(absent - early.begin()) + ".tar";
      }
    }
    ASSERT_FALSE(vanished.empty()) << "no seed leaves a shard out of the early samples";

    ScopedDir copy("rtar_vanish_" + order);
    for (int k = 0; k < 3; ++k) {
      const std::string name = "shard-00000" + std::to_string(k) + ".tar";
      fs::copy_file(shards_->path() / name, copy.path() / name);
    }
    const std::string url = "file://" + copy.path().string() + "/shard-{000000..000002}.tar";
    auto plan = Plan::Load(TarPlan(order + "-skip.plan", url, order, "skip", 0), {});
    ASSERT_TRUE(plan.has_value()) << plan.error().ToString();
    auto loader = Loader::Create(*plan, options);
    ASSERT_TRUE(loader.has_value()) << loader.error().ToString();
    fs::remove(copy.path() / vanished);
    auto epoch = ReadEpoch(*loader);
    ASSERT_TRUE(epoch.has_value()) << epoch.error().ToString();
    const LoaderStats stats = loader->Stats();
    EXPECT_EQ(stats.bad_samples, 8u);  // each sample of the shard, once
    ASSERT_FALSE(stats.last_bad.empty());
    for (const BadSample& bad : stats.last_bad) {
      EXPECT_NE(bad.path.find("file://"), std::string::npos) << bad.path;
      EXPECT_NE(bad.path.find(vanished), std::string::npos) << bad.path;
    }
  }
}

}  // namespace
}  // namespace sluice
