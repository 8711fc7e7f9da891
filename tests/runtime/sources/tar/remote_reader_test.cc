#include "runtime/sources/tar/remote_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/runtime/remote/counting_store.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime::tar {
namespace {

using remote::testing::CountingStore;
using runtime::testing::TempDir;
using Range = RemoteShardReader::Range;

// Byte i of shard k is (i * 7 + k) % 251.
std::string ShardBytes(size_t k, size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 7 + k) % 251);
  return s;
}

struct Fixture {
  explicit Fixture(size_t shards, size_t size = 64 << 10) : shard_size(size) {
    for (size_t k = 0; k < shards; ++k) {
      const std::string path = dir.Write("s" + std::to_string(k) + ".bin", ShardBytes(k, size));
      list.push_back({"file://" + path, size, k * 8});
    }
  }
  // Sample j of shard k: 8 samples of size/8 bytes each.
  Range Sample(size_t k, uint64_t j) const {
    return Range{k * 8 + j, k, j * (shard_size / 8), shard_size / 8};
  }
  std::unique_ptr<RemoteShardReader> Make(RemoteReadOptions o, ReadPattern p) {
    auto r = std::make_unique<RemoteShardReader>(store, list, list.size() * 8, o);
    r->SetPattern(p);
    return r;
  }
  // Reads `r` through `reader` and checks its bytes.
  void Check(RemoteShardReader& reader, const Range& r) const {
    std::vector<uint8_t> out(r.length);
    Status st = reader.Read(r, out.data());
    ASSERT_TRUE(st.has_value()) << st.error().ToString();
    const std::string want = ShardBytes(r.shard, shard_size).substr(r.offset, r.length);
    EXPECT_EQ(std::string(out.begin(), out.end()), want) << "sample " << r.index;
  }
  TempDir dir;
  size_t shard_size;
  std::vector<RemoteShardReader::Shard> list;
  std::shared_ptr<CountingStore> store = std::make_shared<CountingStore>();
};

// Waits (bounded) until `store` has served `n` range reads.
bool WaitForRangeReads(const CountingStore& store, int n) {
  for (int i = 0; i < 10000 && store.range_reads.load() < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return store.range_reads.load() >= n;
}

TEST(RemoteShardReader, CoalescesAnnouncedNeighboursIntoOneRequest) {
  Fixture f(2);
  RemoteReadOptions on_demand;
  on_demand.prefetch_requests = 0;  // requests start at the first Read
  auto reader = f.Make(on_demand, ReadPattern::kRandom);
  // Samples 1, 2, 3 of shard 0 are neighbours; 0-5 of shard 1 is a single.
  std::vector<Range> batch = {f.Sample(0, 3), f.Sample(1, 5), f.Sample(0, 1), f.Sample(0, 2)};
  reader->WillRead(batch);
  for (const Range& r : batch) f.Check(*reader, r);
  EXPECT_EQ(f.store->range_reads.load(), 2);
  const RemoteReadCounters c = reader->counters();
  EXPECT_EQ(c.coalesced_requests, 1u);
  EXPECT_EQ(c.coalesced_samples, 3u);
  EXPECT_EQ(c.direct_reads, 1u);
  // Not announced: read alone.
  f.Check(*reader, f.Sample(0, 4));
  EXPECT_EQ(f.store->range_reads.load(), 3);
}

TEST(RemoteShardReader, CoalescingRespectsGapLengthAndBudget) {
  Fixture f(1);
  RemoteReadOptions o;
  o.prefetch_requests = 0;
  o.coalesce_gap = 0;                       // only touching ranges
  o.coalesce_max = 3 * (f.shard_size / 8);  // at most three samples per request
  auto reader = f.Make(o, ReadPattern::kRandom);
  std::vector<Range> all;
  for (uint64_t j = 0; j < 8; ++j) all.push_back(f.Sample(0, j));
  reader->WillRead(all);
  for (const Range& r : all) f.Check(*reader, r);
  EXPECT_EQ(f.store->range_reads.load(), 3);  // 3 + 3 + 2 samples

  // A budget of one sample's bytes plans nothing: every read goes alone.
  Fixture g(1);
  RemoteReadOptions tiny;
  tiny.coalesce_budget = g.shard_size / 8;
  tiny.prefetch_requests = 0;
  auto alone = g.Make(tiny, ReadPattern::kRandom);
  std::vector<Range> two = {g.Sample(0, 0), g.Sample(0, 1)};
  alone->WillRead(two);
  for (const Range& r : two) g.Check(*alone, r);
  EXPECT_EQ(g.store->range_reads.load(), 2);
  EXPECT_EQ(alone->counters().coalesced_requests, 0u);
}

TEST(RemoteShardReader, PrefetchesAnnouncedRequestsBeforeTheirReads) {
  Fixture f(2);
  RemoteReadOptions o;
  o.prefetch_requests = 3;
  o.coalesce_gap = 0;  // only touching samples coalesce
  auto reader = f.Make(o, ReadPattern::kRandom);
  // One coalesced request (shard 0, samples 1-3) and three singles.
  std::vector<Range> batch = {f.Sample(1, 0), f.Sample(0, 3), f.Sample(1, 4),
                              f.Sample(0, 1), f.Sample(0, 2), f.Sample(1, 7)};
  reader->WillRead(batch);
  // Every planned request is issued without any Read.
  ASSERT_TRUE(WaitForRangeReads(*f.store, 4));
  for (const Range& r : batch) f.Check(*reader, r);
  EXPECT_EQ(f.store->range_reads.load(), 4);  // the reads found their bytes
  const RemoteReadCounters c = reader->counters();
  EXPECT_EQ(c.prefetched_requests, 4u);
  EXPECT_EQ(c.coalesced_requests, 1u);
  EXPECT_EQ(c.coalesced_samples, 3u);
  EXPECT_EQ(c.direct_reads, 0u);
  // Announced again later: planned and fetched again (nothing stays behind).
  reader->WillRead(std::span(batch).first(1));
  ASSERT_TRUE(WaitForRangeReads(*f.store, 5));
  f.Check(*reader, batch[0]);
  EXPECT_EQ(f.store->range_reads.load(), 5);
}

TEST(RemoteShardReader, ConcurrentReadsOfCoalescedGroupsUnderATightBudgetKeepTheirBytes) {
  // Several threads announce and read overlapping coalesced groups; a budget
  // of three samples' bytes makes every plan drop the oldest groups, some of
  // them loaded, or waited for by a read. Before the fix this crashed under
  // ASan: the dropped group was freed while its drop still used it (a
  // use-after-free that put a freed buffer among the spares), and a read
  // woken by its group's load copied from the buffer the drop had recycled.
  Fixture f(4, 256 << 10);
  RemoteReadOptions o;
  o.prefetch_requests = 4;
  o.coalesce_budget = 3 * (f.shard_size / 8);
  auto reader = f.Make(o, ReadPattern::kRandom);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> out(f.shard_size / 8);
      for (int i = 0; i < 150; ++i) {
        const size_t shard = static_cast<size_t>(t + i) % 4;
        const uint64_t first = static_cast<uint64_t>(i * 3 + t) % 6;
        std::vector<Range> batch = {f.Sample(shard, first), f.Sample(shard, first + 1),
                                    f.Sample(shard, first + 2)};
        reader->WillRead(batch);
        for (const Range& r : batch) {
          std::optional<Status> st = reader->ReadIfReady(r, out.data());
          if (!st) st = reader->Read(r, out.data());
          const std::string want = ShardBytes(r.shard, f.shard_size).substr(r.offset, r.length);
          if (!st->has_value() || std::string(out.begin(), out.end()) != want) ++bad;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(RemoteShardReader, APrefetchedRequestThatFailsGivesItsSampleTheStoresError) {
  Fixture f(2);
  f.store->FailUrlsContaining("s1.bin");
  auto reader = f.Make({}, ReadPattern::kRandom);
  std::vector<Range> batch = {f.Sample(1, 2), f.Sample(0, 5)};
  reader->WillRead(batch);
  ASSERT_TRUE(WaitForRangeReads(*f.store, 2));
  Status failed = reader->Read(batch[0], std::vector<uint8_t>(batch[0].length).data());
  ASSERT_FALSE(failed.has_value());
  EXPECT_NE(failed.error().message.find("s1.bin"), std::string::npos) << failed.error().ToString();
  f.Check(*reader, batch[1]);
}

// Polls reader.ReadIfReady(r) (bounded) until it answers; checks the bytes.
void ExpectReadyEventually(const Fixture& f, RemoteShardReader& reader, const Range& r) {
  std::vector<uint8_t> out(r.length);
  std::optional<Status> got;
  for (int i = 0; i < 10000 && !got; ++i) {
    got = reader.ReadIfReady(r, out.data());
    if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(got.has_value()) << "sample " << r.index << " never arrived";
  ASSERT_TRUE(got->has_value()) << got->error().ToString();
  EXPECT_EQ(std::string(out.begin(), out.end()),
            ShardBytes(r.shard, f.shard_size).substr(r.offset, r.length));
}

// Each case has its own fixture: a reader's destructor cancels its store.
TEST(RemoteShardReader, ReadIfReadyTakesOnlyBytesThatHaveArrived) {
  {  // Shuffled reads: a planned request not yet sent is not ready.
    Fixture f(2);
    std::vector<uint8_t> out(f.shard_size);
    RemoteReadOptions on_demand;
    on_demand.prefetch_requests = 0;
    auto reader = f.Make(on_demand, ReadPattern::kRandom);
    const std::vector<Range> batch = {f.Sample(0, 1), f.Sample(1, 6)};
    reader->WillRead(batch);
    EXPECT_FALSE(reader->ReadIfReady(batch[0], out.data()).has_value());
    EXPECT_FALSE(reader->ReadIfReady(f.Sample(0, 7), out.data()).has_value());  // not announced
    for (const Range& r : batch) f.Check(*reader, r);  // still readable: nothing consumed
    EXPECT_EQ(f.store->range_reads.load(), 2);
  }
  {  // Prefetched: ready once its request is done, without another request.
    Fixture f(2);
    auto reader = f.Make({}, ReadPattern::kRandom);
    const std::vector<Range> batch = {f.Sample(0, 2), f.Sample(1, 3)};
    reader->WillRead(batch);
    for (const Range& r : batch) ExpectReadyEventually(f, *reader, r);
    EXPECT_EQ(f.store->range_reads.load(), 2);
    EXPECT_EQ(reader->counters().direct_reads, 0u);
  }
  {  // Streamed shards: ready once the stream has passed the range's end.
    Fixture f(2);
    std::vector<uint8_t> out(f.shard_size);
    auto reader = f.Make({}, ReadPattern::kShardStream);
    f.store->CloseGate();
    const std::vector<Range> shard1 = {f.Sample(1, 0), f.Sample(1, 7)};
    reader->WillRead(shard1);
    f.store->WaitForWaiting(1);
    EXPECT_FALSE(reader->ReadIfReady(shard1[1], out.data()).has_value());
    f.store->OpenGate();
    for (const Range& r : shard1) ExpectReadyEventually(f, *reader, r);
    EXPECT_EQ(reader->counters().stream_reads, 2u);
  }
}

TEST(RemoteShardReader, StreamsAnnouncedShardsWithBoundedReadAhead) {
  Fixture f(5);
  RemoteReadOptions o;
  o.read_ahead = 1;
  auto reader = f.Make(o, ReadPattern::kShardStream);
  EXPECT_EQ(reader->HintWindow(), 16u);  // two shards of eight samples
  f.store->CloseGate();
  std::vector<Range> order;
  for (size_t k : {3, 0, 4, 1, 2}) {
    for (uint64_t j = 0; j < 8; ++j) order.push_back(f.Sample(k, j));
  }
  reader->WillRead(order);
  f.store->WaitForWaiting(2);
  EXPECT_EQ(f.store->streams.load(), 2);  // read_ahead + 1 in flight, no more
  f.store->OpenGate();
  for (const Range& r : order) f.Check(*reader, r);
  EXPECT_EQ(f.store->range_reads.load(), 0);
  // Streams start in the announced order, read_ahead + 1 at a time: the two
  // fetch threads may record neighbouring starts in either order.
  const std::vector<std::string> streamed = f.store->Streamed();
  const std::vector<std::string> announced = {f.list[3].url, f.list[0].url, f.list[4].url,
                                              f.list[1].url, f.list[2].url};
  ASSERT_EQ(streamed.size(), announced.size());
  for (size_t i = 0; i < announced.size(); ++i) {
    const size_t at = static_cast<size_t>(
        std::find(streamed.begin(), streamed.end(), announced[i]) - streamed.begin());
    ASSERT_LT(at, streamed.size()) << announced[i] << " never streamed";
    EXPECT_LE(at > i ? at - i : i - at, 1u) << announced[i] << " started out of order";
  }
  EXPECT_EQ(std::set<std::string>(streamed.begin(), streamed.end()),
            std::set<std::string>(announced.begin(), announced.end()));
  EXPECT_EQ(reader->counters().stream_reads, 40u);
}

TEST(RemoteShardReader, AutoReadAheadGrowsWhenAReadWaitsForAShardReadAhead) {
  Fixture f(6);
  RemoteReadOptions o;
  o.read_ahead = 1;
  o.max_read_ahead = 3;
  auto reader = f.Make(o, ReadPattern::kShardStream);
  EXPECT_EQ(reader->counters().read_ahead, 1);
  f.store->CloseGate();
  std::vector<Range> order;
  for (size_t k = 0; k < 6; ++k) {
    for (uint64_t j = 0; j < 8; ++j) order.push_back(f.Sample(k, j));
  }
  reader->WillRead(order);
  f.store->WaitForWaiting(2);  // shard 0 (needed) and shard 1 (ahead)
  EXPECT_EQ(f.store->streams.load(), 2);
  // Reading shard 1 while its stream waits at the gate: a stall. The reader
  // adds a shard, and a third stream starts.
  std::thread reading([&] { f.Check(*reader, f.Sample(1, 0)); });
  f.store->WaitForWaiting(3);
  EXPECT_EQ(reader->counters().read_ahead, 2);
  EXPECT_EQ(reader->counters().read_ahead_stalls, 1u);
  f.store->OpenGate();
  reading.join();
  for (const Range& r : order) {
    if (r.index != 8) f.Check(*reader, r);
  }
  const RemoteReadCounters c = reader->counters();
  EXPECT_LE(c.read_ahead, 3);  // never past max_read_ahead
  EXPECT_EQ(c.shards_streamed, 6u);
}

TEST(RemoteShardReader, MemoryBudgetBoundsTheReadAhead) {
  Fixture f(4);
  RemoteReadOptions o;
  o.read_ahead = 8;
  o.max_resident_bytes = 2 * f.shard_size;
  auto reader = f.Make(o, ReadPattern::kShardStream);
  f.store->CloseGate();
  std::vector<Range> order;
  for (size_t k = 0; k < 4; ++k) {
    for (uint64_t j = 0; j < 8; ++j) order.push_back(f.Sample(k, j));
  }
  reader->WillRead(order);
  f.store->WaitForWaiting(2);
  EXPECT_EQ(f.store->streams.load(), 2);
  f.store->OpenGate();
  for (const Range& r : order) f.Check(*reader, r);
  // Each shard streamed once, evicted only when read: a read that finds the
  // budget held by a stream that has all its bytes but has not returned yet
  // waits for it instead of reading its shard sample by sample.
  EXPECT_EQ(f.store->streams.load(), 4);
  // A shard larger than the budget is read sample by sample.
  RemoteReadOptions small;
  small.max_resident_bytes = f.shard_size / 2;
  auto direct = f.Make(small, ReadPattern::kShardStream);
  const int before = f.store->range_reads.load();
  f.Check(*direct, f.Sample(2, 3));
  EXPECT_EQ(f.store->range_reads.load(), before + 1);
  EXPECT_EQ(f.store->streams.load(), 4);
}

TEST(RemoteShardReader, AFailedShardFailsItsSamplesWithTheStoresMessage) {
  Fixture f(3);
  f.store->FailUrlsContaining("s1.bin");
  auto reader = f.Make({}, ReadPattern::kShardStream);
  f.Check(*reader, f.Sample(0, 0));
  for (uint64_t j = 0; j < 8; ++j) {
    std::vector<uint8_t> out(f.shard_size / 8);
    Status st = reader->Read(f.Sample(1, j), out.data());
    ASSERT_FALSE(st.has_value());
    EXPECT_EQ(st.error().code, ErrorCode::kIo);
    EXPECT_NE(st.error().message.find("s1.bin"), std::string::npos) << st.error().message;
    EXPECT_NE(st.error().message.find("HTTP 503"), std::string::npos) << st.error().message;
  }
  f.Check(*reader, f.Sample(2, 7));
  EXPECT_EQ(f.store->streams.load(), 3);  // the failed shard is not re-streamed per sample

  auto random = f.Make({}, ReadPattern::kRandom);
  std::vector<uint8_t> out(f.shard_size / 8);
  Status st = random->Read(f.Sample(1, 2), out.data());
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("HTTP 503"), std::string::npos);
}

// Reads `ranges` through `reader`; how many failed.
int FailedReads(RemoteShardReader& reader, const std::vector<Range>& ranges) {
  int failed = 0;
  for (const Range& r : ranges) {
    std::vector<uint8_t> out(r.length);
    if (!reader.Read(r, out.data())) ++failed;
  }
  return failed;
}

TEST(RemoteShardReader, AShardThatFailedInOneEpochIsStreamedAgainInTheNext) {
  Fixture f(3);
  auto reader = f.Make({}, ReadPattern::kShardStream);
  std::vector<Range> first_half, second_half, epoch;
  for (size_t k = 0; k < 3; ++k) {
    for (uint64_t j = 0; j < 8; ++j) (j < 4 ? first_half : second_half).push_back(f.Sample(k, j));
  }
  epoch = first_half;
  epoch.insert(epoch.end(), second_half.begin(), second_half.end());
  // Epoch 0: shard 1 fails (503s); its samples fail, announced in two parts,
  // and it is streamed once (no retry within the epoch).
  f.store->FailUrlsContaining("s1.bin");
  reader->WillRead(first_half);
  EXPECT_EQ(FailedReads(*reader, first_half), 4);
  reader->WillRead(second_half);
  EXPECT_EQ(FailedReads(*reader, second_half), 4);
  EXPECT_EQ(f.store->streams.load(), 3);
  // Epoch 1 (every sample announced again), the server healthy: shard 1 is
  // streamed again and every sample reads; the shards in memory are not.
  f.store->FailUrlsContaining("");
  reader->WillRead(epoch);
  for (const Range& r : epoch) f.Check(*reader, r);
  EXPECT_EQ(f.store->streams.load(), 4);
  // Epoch 2: nothing failed, nothing streamed again.
  reader->WillRead(epoch);
  for (const Range& r : epoch) f.Check(*reader, r);
  EXPECT_EQ(f.store->streams.load(), 4);
}

TEST(RemoteShardReader, WithoutAnnouncementsAFailedShardIsStreamedAgainWhenASampleIsReread) {
  Fixture f(2);
  auto reader = f.Make({}, ReadPattern::kShardStream);
  f.store->FailUrlsContaining("s0.bin");
  std::vector<Range> shard0;
  for (uint64_t j = 0; j < 8; ++j) shard0.push_back(f.Sample(0, j));
  auto streams_of_shard0 = [&] {
    const std::vector<std::string> urls = f.store->Streamed();
    return std::count(urls.begin(), urls.end(), f.list[0].url);
  };
  EXPECT_EQ(FailedReads(*reader, shard0), 8);
  EXPECT_EQ(streams_of_shard0(), 1);
  f.store->FailUrlsContaining("");
  for (const Range& r : shard0) f.Check(*reader, r);
  EXPECT_EQ(streams_of_shard0(), 2);
}

TEST(RemoteShardReader, CancelWakesAReadWaitingOnAStream) {
  Fixture f(2);
  auto reader = f.Make({}, ReadPattern::kShardStream);
  f.store->CloseGate();
  Status result = Ok();
  std::thread t([&] {
    std::vector<uint8_t> out(f.shard_size / 8);
    result = reader->Read(f.Sample(0, 0), out.data());
  });
  f.store->WaitForWaiting(1);
  reader->Cancel();
  t.join();
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kIo);
  std::vector<uint8_t> out(f.shard_size / 8);
  EXPECT_FALSE(reader->Read(f.Sample(1, 0), out.data()).has_value());  // fails fast
}

TEST(RemoteShardReader, WithACacheShardsAreDownloadedOnceAndThenHit) {
  Fixture f(2);
  TempDir cache_dir;
  for (int round = 0; round < 2; ++round) {
    auto cache = remote::ShardCache::Open(cache_dir.path().string(), 4 * f.shard_size);
    ASSERT_TRUE(cache.has_value()) << cache.error().ToString();
    RemoteReadOptions o;
    o.cache = std::move(*cache);
    auto reader = f.Make(o, ReadPattern::kRandom);  // a cache reads whole shards anyway
    std::vector<Range> batch = {f.Sample(1, 2), f.Sample(0, 7), f.Sample(1, 5)};
    reader->WillRead(batch);
    for (const Range& r : batch) f.Check(*reader, r);
    const remote::ShardCacheStats s = reader->cache_stats();
    EXPECT_EQ(s.misses, round == 0 ? 2u : 0u);
    EXPECT_EQ(s.hits, round == 0 ? 0u : 2u);
    EXPECT_EQ(f.store->streams.load(), 2);  // downloads in the first round only
    EXPECT_EQ(f.store->range_reads.load(), 0);
  }
}

}  // namespace
}  // namespace sluice::runtime::tar
