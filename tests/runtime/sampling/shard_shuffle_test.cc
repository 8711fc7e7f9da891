// order=shard_shuffle (runtime/sampling/epoch_sampler.h) and the coverage
// contract shared by all three orders: every sample once per epoch across
// ranks, determinism under (seed, epoch), exact resume, shard locality.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "runtime/sampling/epoch_sampler.h"
#include "runtime/sampling/permutation.h"
#include "tests/runtime/sampling/resume_check.h"

namespace sluice::runtime {
namespace {

// Shards of the given sizes (empty ones allowed) -> their starts.
std::vector<uint64_t> Starts(const std::vector<uint64_t>& sizes, uint64_t* n) {
  std::vector<uint64_t> starts;
  *n = 0;
  for (uint64_t s : sizes) {
    starts.push_back(*n);
    *n += s;
  }
  return starts;
}

SamplerConfig ShardConfig(const std::vector<uint64_t>& sizes, int world, uint64_t batch,
                          Remainder rem, uint64_t buffer,
                          SampleOrder order = SampleOrder::kShardShuffle) {
  SamplerConfig c;
  c.shard_starts = Starts(sizes, &c.num_samples);
  c.seed = 11;
  c.order = order;
  c.world_size = world;
  c.batch_size = batch;
  c.remainder = rem;
  c.shuffle_buffer = buffer;
  return c;
}

std::vector<uint64_t> Order(const SamplerConfig& c, uint64_t epoch) {
  auto s = EpochSampler::Create(c);
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().ToString());
  if (!s) return {};
  std::vector<uint64_t> out(s->samples_per_rank());
  s->Epoch(epoch).Fill(0, out);
  return out;
}

// The rank's stream as the header defines it: its slice of S, the samples of
// the shards in the order IndexPermutation(num_shards, seed, epoch).
std::vector<uint64_t> ExpectedStream(const SamplerConfig& c, uint64_t epoch) {
  const auto& st = c.shard_starts;
  IndexPermutation q(st.size(), c.seed, epoch);
  std::vector<uint64_t> s;
  for (uint64_t j = 0; j < st.size(); ++j) {
    uint64_t k = q.Permute(j);
    uint64_t end = k + 1 < st.size() ? st[k + 1] : c.num_samples;
    for (uint64_t i = st[k]; i < end; ++i) s.push_back(i);
  }
  const uint64_t n = c.num_samples, w = c.world_size, r = c.rank;
  return std::vector<uint64_t>(s.begin() + r * n / w, s.begin() + (r + 1) * n / w);
}

uint64_t ShardOf(const std::vector<uint64_t>& starts, uint64_t i) {
  return static_cast<uint64_t>(std::upper_bound(starts.begin(), starts.end(), i) - starts.begin()) -
         1;
}

const std::vector<std::vector<uint64_t>> kLayouts = {
    {10},                          // one shard
    {7, 7, 7, 7, 7, 7, 7, 7, 7},   // equal shards
    {1, 30, 0, 4, 17, 9, 0, 40},   // uneven, with empty shards
    {3, 5, 2, 8, 13, 1, 1, 6, 4},  // small ones
};

TEST(ShardShuffle, EverySampleOncePerEpochInEveryOrderAndWorldSize) {
  for (SampleOrder order :
       {SampleOrder::kShuffle, SampleOrder::kSequential, SampleOrder::kShardShuffle}) {
    for (const auto& sizes : kLayouts) {
      for (int world : {1, 2, 3}) {
        for (uint64_t batch : {1ull, 4ull}) {
          for (uint64_t buffer : {1ull, 5ull, 1000ull}) {
            SamplerConfig c = ShardConfig(sizes, world, batch, Remainder::kDrop, buffer, order);
            const uint64_t n = c.num_samples;
            SCOPED_TRACE(::testing::Message()
                         << "order=" << static_cast<int>(order) << " n=" << n << " world=" << world
                         << " batch=" << batch << " buffer=" << buffer);
            // drop: each sample at most once; delivered + dropped = all, and
            // fewer than one global step is dropped.
            std::vector<int> count(n, 0);
            uint64_t delivered = 0;
            for (int r = 0; r < world; ++r) {
              c.rank = r;
              for (uint64_t i : Order(c, 3)) {
                ASSERT_LT(i, n);
                ++count[i];
                ++delivered;
              }
            }
            EXPECT_EQ(delivered, (n / (world * batch)) * batch * world);
            EXPECT_EQ(*std::max_element(count.begin(), count.end()), delivered > 0 ? 1 : 0);
            EXPECT_LT(n - delivered, static_cast<uint64_t>(world) * batch);
            // pad: every sample at least once, pads flagged, equal batch counts.
            c.remainder = Remainder::kPad;
            std::fill(count.begin(), count.end(), 0);
            uint64_t total = 0, pads = 0;
            const uint64_t step = world * batch;
            for (int r = 0; r < world; ++r) {
              c.rank = r;
              auto s = EpochSampler::Create(c);
              ASSERT_TRUE(s.has_value());
              ASSERT_EQ(s->samples_per_rank(), (n + step - 1) / step * batch);
              EpochOrder o = s->Epoch(3);
              for (uint64_t p = 0; p < o.size(); ++p) {
                ASSERT_LT(o[p], n);
                if (!o.IsPadding(p)) ++count[o[p]];
                pads += o.IsPadding(p);
                ++total;
              }
            }
            for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(count[i], 1) << "sample " << i;
            EXPECT_EQ(pads, total - n);
          }
        }
      }
    }
  }
}

TEST(ShardShuffle, PadWithFewerSamplesThanRanks) {
  SamplerConfig c = ShardConfig({1, 1}, 3, 2, Remainder::kPad, 4);
  std::vector<int> count(2, 0);
  for (int r = 0; r < 3; ++r) {
    c.rank = r;
    auto s = EpochSampler::Create(c);
    ASSERT_TRUE(s.has_value());
    EpochOrder o = s->Epoch(0);
    ASSERT_EQ(o.size(), 2u);
    for (uint64_t p = 0; p < o.size(); ++p) {
      ASSERT_LT(o[p], 2u);
      if (!o.IsPadding(p)) ++count[o[p]];
    }
  }
  EXPECT_EQ(count, (std::vector<int>{1, 1}));
}

TEST(ShardShuffle, DeterministicUnderSeedAndEpochAndEpochsDiffer) {
  SamplerConfig c = ShardConfig(std::vector<uint64_t>(20, 50), 2, 8, Remainder::kDrop, 64);
  c.rank = 1;
  auto a = Order(c, 4);
  EXPECT_EQ(a, Order(c, 4));
  EXPECT_NE(a, Order(c, 5));
  c.seed = 12;
  EXPECT_NE(a, Order(c, 4));
  // The shard order changes across epochs too (not only the buffer draws).
  c.seed = 11;
  c.shuffle_buffer = 1;
  EXPECT_NE(Order(c, 4), Order(c, 5));
}

TEST(ShardShuffle, BufferOfOneReadsTheShardsSequentiallyInShardOrder) {
  for (int world : {1, 2, 3}) {
    SamplerConfig c = ShardConfig(kLayouts[2], world, 1, Remainder::kPad, 1);
    for (int r = 0; r < world; ++r) {
      c.rank = r;
      auto expected = ExpectedStream(c, 2);
      auto got = Order(c, 2);
      got.resize(expected.size());  // the pad tail repeats the start
      EXPECT_EQ(got, expected) << "rank " << r;
    }
  }
}

TEST(ShardShuffle, BufferMixesAndNothingIsOutputBeforeItIsRead) {
  for (uint64_t buffer : {2ull, 8ull, 100ull}) {
    SamplerConfig c = ShardConfig(std::vector<uint64_t>(12, 25), 2, 1, Remainder::kPad, buffer);
    c.rank = 1;
    auto stream = ExpectedStream(c, 0);
    auto got = Order(c, 0);
    ASSERT_EQ(got.size(), stream.size());
    EXPECT_NE(got, stream) << "buffer " << buffer;
    EXPECT_TRUE(std::is_permutation(got.begin(), got.end(), stream.begin()));
    std::vector<uint64_t> where(c.num_samples, 0);  // stream position of each sample
    for (uint64_t k = 0; k < stream.size(); ++k) where[stream[k]] = k;
    for (uint64_t t = 0; t < got.size(); ++t) {
      ASSERT_LT(where[got[t]], t + buffer) << "step " << t << " buffer " << buffer;
    }
  }
}

TEST(ShardShuffle, EachRankReadsAContiguousRunOfShards) {
  // Equal shards of size s: a rank's L samples come from at most
  // ceil(L / s) + 1 shards, whatever the buffer (global shuffle touches ~all).
  const uint64_t s = 16;
  for (int world : {1, 2, 3}) {
    for (uint64_t buffer : {1ull, 10ull, 10000ull}) {
      SamplerConfig c =
          ShardConfig(std::vector<uint64_t>(30, s), world, 4, Remainder::kDrop, buffer);
      for (int r = 0; r < world; ++r) {
        c.rank = r;
        auto got = Order(c, 1);
        std::set<uint64_t> shards;
        for (uint64_t i : got) shards.insert(ShardOf(c.shard_starts, i));
        EXPECT_LE(shards.size(), (got.size() + s - 1) / s + 1)
            << "world " << world << " rank " << r << " buffer " << buffer;
      }
    }
  }
  // The same check fails for the global shuffle.
  SamplerConfig g =
      ShardConfig(std::vector<uint64_t>(30, s), 3, 4, Remainder::kDrop, 1, SampleOrder::kShuffle);
  std::set<uint64_t> shards;
  for (uint64_t i : Order(g, 1)) shards.insert(ShardOf(g.shard_starts, i));
  EXPECT_GT(shards.size(), 160u / s + 1);
}

TEST(ShardShuffle, ResumeMidShardGivesTheIdenticalRemainingStream) {
  SamplerConfig c = ShardConfig({9, 14, 3, 22, 11, 6, 19}, 3, 4, Remainder::kDrop, 7);
  c.rank = 2;
  auto s = EpochSampler::Create(c);
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->samples_per_rank(), 28u);  // floor(84 / 12) = 7 batches of 4
  ExpectResumeContinues(c, {0, 5, 13, 27, 28, 29, 47, 83});
}

TEST(ShardShuffle, IndicesAbove32BitsUseTheWideTable) {
  // n > 2^32 with a huge world so each slice is a few samples. Rank 0 reads
  // the start of S: the first 4 samples of shard Q(0); pick a seed where
  // that is shard 1, whose indices are all >= 2^32.
  SamplerConfig c;
  c.order = SampleOrder::kShardShuffle;
  c.num_samples = (uint64_t{1} << 32) + 40;
  c.shard_starts = {0, uint64_t{1} << 32};
  c.world_size = 1 << 30;
  c.rank = 0;
  c.shuffle_buffer = 3;
  while (IndexPermutation(2, c.seed, 0).Permute(0) != 1) ++c.seed;
  auto got = Order(c, 0);
  ASSERT_EQ(got.size(), 4u);  // floor(n / W) = 4
  std::sort(got.begin(), got.end());
  const uint64_t base = uint64_t{1} << 32;
  EXPECT_EQ(got, (std::vector<uint64_t>{base, base + 1, base + 2, base + 3}));
}

TEST(ShardShuffle, BufferLargerThanTheSliceAllocatesOnlyTheSlice) {
  SamplerConfig c = ShardConfig({10, 10, 10}, 1, 1, Remainder::kDrop, uint64_t{1} << 50);
  auto got = Order(c, 0);
  ASSERT_EQ(got.size(), 30u);
  EXPECT_TRUE(std::is_permutation(got.begin(), got.end(), ExpectedStream(c, 0).begin()));
}

TEST(ShardShuffle, RejectsBadShardConfig) {
  SamplerConfig c = ShardConfig({4, 4}, 1, 1, Remainder::kDrop, 0);
  EXPECT_FALSE(EpochSampler::Create(c).has_value());  // buffer 0
  c.shuffle_buffer = 2;
  EXPECT_TRUE(EpochSampler::Create(c).has_value());
  for (std::vector<uint64_t> bad : {std::vector<uint64_t>{}, {1, 4}, {0, 5, 3}, {0, 9}}) {
    c.shard_starts = bad;
    auto s = EpochSampler::Create(c);
    ASSERT_FALSE(s.has_value());
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  }
  c.num_samples = 0;
  c.shard_starts.clear();
  EXPECT_TRUE(EpochSampler::Create(c).has_value());  // an empty source needs no shards
}

}  // namespace
}  // namespace sluice::runtime
