#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "runtime/sampling/epoch_sampler.h"
#include "runtime/sampling/permutation.h"
#include "tests/runtime/sampling/resume_check.h"

namespace sluice::runtime {
namespace {

TEST(IndexPermutation, IsABijectionForManySizes) {
  for (uint64_t n : {1ull, 2ull, 3ull, 4ull, 5ull, 7ull, 8ull, 15ull, 16ull, 17ull, 31ull, 97ull,
                     256ull, 257ull, 1000ull, 4099ull, 65537ull}) {
    for (uint64_t seed : {0ull, 42ull}) {
      IndexPermutation p(n, seed, 3);
      std::vector<bool> seen(n, false);
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t v = p.Permute(i);
        ASSERT_LT(v, n) << "n=" << n;
        ASSERT_FALSE(seen[v]) << "n=" << n << " duplicate " << v;
        seen[v] = true;
      }
    }
  }
}

TEST(IndexPermutation, MillionIsABijection) {
  const uint64_t n = 1'000'003;  // a prime; the Feistel domain is 2^20
  IndexPermutation p(n, 7, 0);
  std::vector<bool> seen(n, false);
  uint64_t fixed_points = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t v = p.Permute(i);
    ASSERT_LT(v, n);
    ASSERT_FALSE(seen[v]);
    seen[v] = true;
    fixed_points += (v == i);
  }
  EXPECT_LT(fixed_points, 20u);  // ~1 expected for a random permutation
}

TEST(IndexPermutation, DiffersAcrossEpochsAndSeedsAndIsDeterministic) {
  const uint64_t n = 1000;
  auto order = [&](uint64_t seed, uint64_t epoch) {
    IndexPermutation p(n, seed, epoch);
    std::vector<uint64_t> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = p.Permute(i);
    return v;
  };
  auto base = order(1, 0);
  EXPECT_EQ(base, order(1, 0));
  auto same_positions = [&](const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
    int same = 0;
    for (uint64_t i = 0; i < n; ++i) same += a[i] == b[i];
    return same;
  };
  EXPECT_LT(same_positions(base, order(1, 1)), 20);
  EXPECT_LT(same_positions(base, order(2, 0)), 20);
  // Not close to the identity: few indices stay near their position.
  int near = 0;
  for (uint64_t i = 0; i < n; ++i) near += std::llabs(int64_t(base[i]) - int64_t(i)) < 10;
  EXPECT_LT(near, 60);
  // Roughly uniform: each value's position over many seeds averages near n/2.
  double mean_pos = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    IndexPermutation p(n, seed, 0);
    mean_pos += double(p.Permute(0));
  }
  mean_pos /= 200;
  EXPECT_NEAR(mean_pos, n / 2.0, 80);
}

SamplerConfig Config(uint64_t n, int world, uint64_t batch, Remainder rem,
                     SampleOrder order = SampleOrder::kShuffle) {
  SamplerConfig c;
  c.num_samples = n;
  c.seed = 5;
  c.order = order;
  c.world_size = world;
  c.batch_size = batch;
  c.remainder = rem;
  return c;
}

// Collects all ranks' indices for one epoch; checks equal batch counts.
std::vector<uint64_t> AllRanks(SamplerConfig c, uint64_t epoch, uint64_t* per_rank,
                               uint64_t* pads) {
  std::vector<uint64_t> all;
  *pads = 0;
  for (int r = 0; r < c.world_size; ++r) {
    c.rank = r;
    auto s = EpochSampler::Create(c);
    EXPECT_TRUE(s.has_value());
    if (r == 0) *per_rank = s->samples_per_rank();
    EXPECT_EQ(s->samples_per_rank(), *per_rank);
    EXPECT_EQ(s->samples_per_rank() % c.batch_size, 0u);
    EpochOrder o = s->Epoch(epoch);
    for (uint64_t p = 0; p < o.size(); ++p) {
      all.push_back(o[p]);
      *pads += o.IsPadding(p);
    }
  }
  return all;
}

TEST(EpochSampler, DropCoversEachSampleAtMostOnceWithEqualBatches) {
  for (uint64_t n : {0ull, 1ull, 7ull, 100ull, 1001ull}) {
    for (int world : {1, 2, 3, 8}) {
      for (uint64_t batch : {1ull, 4ull, 32ull}) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " world=" << world << " batch=" << batch);
        uint64_t per_rank = 0, pads = 0;
        auto all = AllRanks(Config(n, world, batch, Remainder::kDrop), 2, &per_rank, &pads);
        EXPECT_EQ(per_rank, (n / (world * batch)) * batch);
        EXPECT_EQ(pads, 0u);
        std::vector<int> count(n, 0);
        for (uint64_t i : all) {
          ASSERT_LT(i, n);
          ++count[i];
        }
        uint64_t covered = 0;
        for (int c : count) {
          ASSERT_LE(c, 1);
          covered += c;
        }
        EXPECT_EQ(covered, per_rank * world);
        EXPECT_GT(covered + world * batch, n);  // dropped fewer than one global step
      }
    }
  }
}

TEST(EpochSampler, PadCoversEverySampleWithRepeatsOnlyFromTheStart) {
  for (uint64_t n : {1ull, 7ull, 100ull, 1001ull}) {
    for (int world : {1, 2, 3, 8}) {
      for (uint64_t batch : {1ull, 4ull, 32ull}) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " world=" << world << " batch=" << batch);
        SamplerConfig c = Config(n, world, batch, Remainder::kPad);
        uint64_t per_rank = 0, pads = 0;
        auto all = AllRanks(c, 1, &per_rank, &pads);
        const uint64_t step = world * batch;
        EXPECT_EQ(per_rank, ((n + step - 1) / step) * batch);
        EXPECT_EQ(all.size(), per_rank * world);
        EXPECT_EQ(pads, all.size() - n);
        std::vector<uint64_t> count(n, 0);
        for (uint64_t i : all) {
          ASSERT_LT(i, n);
          ++count[i];
        }
        // Every sample appears; the repeats are the first samples of the epoch's order.
        IndexPermutation perm(n, c.seed, 1);
        for (uint64_t j = 0; j < n; ++j) {
          uint64_t expected = 1 + (all.size() - n) / n + (j < (all.size() - n) % n ? 1 : 0);
          ASSERT_EQ(count[perm.Permute(j)], expected) << "global position " << j;
        }
      }
    }
  }
}

TEST(EpochSampler, SequentialOrderInterleavesRanks) {
  SamplerConfig c = Config(10, 2, 2, Remainder::kPad, SampleOrder::kSequential);
  c.rank = 1;
  auto s = EpochSampler::Create(c);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->batches_per_rank(), 3u);
  std::vector<uint64_t> got(6);
  s->Epoch(0).Fill(0, got);
  // Rank-interleaved batches: rank 1 takes global batches 1, 3 and 5 (the
  // last is past the 10 samples: padding, repeating the order's start).
  EXPECT_EQ(got, (std::vector<uint64_t>{2, 3, 6, 7, 0, 1}));
  EXPECT_TRUE(s->Epoch(0).IsPadding(5));
  EXPECT_TRUE(s->Epoch(0).IsPadding(4));
  EXPECT_FALSE(s->Epoch(0).IsPadding(3));
  std::vector<uint64_t> next(6);
  s->Epoch(1).Fill(0, next);
  EXPECT_EQ(next, got);  // sequential ignores the epoch
}

TEST(EpochSampler, EpochsReshuffle) {
  auto s = EpochSampler::Create(Config(500, 1, 10, Remainder::kDrop));
  ASSERT_TRUE(s.has_value());
  std::vector<uint64_t> a(500), b(500);
  s->Epoch(0).Fill(0, a);
  s->Epoch(1).Fill(0, b);
  EXPECT_NE(a, b);
}

TEST(EpochSampler, ResumeAtAnyPositionEqualsContinuing) {
  SamplerConfig c = Config(103, 3, 4, Remainder::kDrop);
  c.rank = 2;
  auto s = EpochSampler::Create(c);
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->samples_per_rank(), 32u);  // floor(103 / 12) = 8 batches of 4
  // Resuming from any saved (epoch, position) — with a fresh sampler — continues
  // the uninterrupted stream over 3 epochs.
  ExpectResumeContinues(c, {0, 1, 31, 32, 33, 70, 95});
}

TEST(EpochSampler, ParseSampleOrderNamesTheSpecOrders) {
  EXPECT_EQ(ParseSampleOrder("shuffle"), SampleOrder::kShuffle);
  EXPECT_EQ(ParseSampleOrder("sequential"), SampleOrder::kSequential);
  EXPECT_EQ(ParseSampleOrder("shard_shuffle"), SampleOrder::kShardShuffle);
  EXPECT_EQ(ParseSampleOrder("shufle"), std::nullopt);
}

TEST(EpochSampler, RejectsBadConfig) {
  SamplerConfig c = Config(10, 2, 0, Remainder::kDrop);
  EXPECT_FALSE(EpochSampler::Create(c).has_value());
  c.batch_size = 1;
  c.rank = 2;
  EXPECT_FALSE(EpochSampler::Create(c).has_value());
  c.rank = -1;
  EXPECT_FALSE(EpochSampler::Create(c).has_value());
  c.rank = 0;
  c.world_size = 0;
  EXPECT_FALSE(EpochSampler::Create(c).has_value());
}

TEST(DistributedEnv, ParsesTorchrunVariables) {
  auto none = ParseDistributedEnv(nullptr, nullptr);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->rank, 0);
  EXPECT_EQ(none->world_size, 1);
  auto ok = ParseDistributedEnv("3", "8");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->rank, 3);
  EXPECT_EQ(ok->world_size, 8);
  for (auto [r, w] : {std::pair<const char*, const char*>{"8", "8"},
                      {"-1", "4"},
                      {"1x", "4"},
                      {"", "4"},
                      {"0", "0"},
                      {"0", nullptr},
                      {nullptr, "2"},
                      {"0", "two"}}) {
    auto bad = ParseDistributedEnv(r, w);
    ASSERT_FALSE(bad.has_value()) << (r ? r : "null") << "/" << (w ? w : "null");
    EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  }
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  auto env = DistributedEnvFromEnvironment();
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 2);
}

TEST(DistributedEnv, ParsesLocalRank) {
  EXPECT_EQ(ParseLocalRank(nullptr), 0);  // unset: 0
  EXPECT_EQ(ParseLocalRank("3"), 3);
  for (const char* bad : {"-1", "x", ""}) {
    auto r = ParseLocalRank(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace sluice::runtime
