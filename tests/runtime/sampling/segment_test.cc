// Elastic resume at the sampler level (runtime/sampling/segment.h and
// EpochSampler::Segment): a consumed set saved by N ranks, dealt to M ranks,
// delivers every unconsumed sample exactly once with equal batch counts.
#include "runtime/sampling/segment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "runtime/sampling/epoch_sampler.h"

namespace sluice::runtime {
namespace {

TEST(ConsumedSet, NormalizesAndCountsUnconsumedPositions) {
  ConsumedSet c(2, {{10, 12}, {4, 6}, {6, 7}, {1, 3}, {20, 20}});
  EXPECT_EQ(c.prefix(), 3u);
  EXPECT_EQ(c.ranges(), (std::vector<PosRange>{{4, 7}, {10, 12}}));
  EXPECT_EQ(c.count(), 8u);
  // Unconsumed: 3, 7, 8, 9, 12, 13, ...
  std::vector<uint64_t> got;
  for (uint64_t u = 0; u < 6; ++u) got.push_back(c.Unconsumed(u));
  EXPECT_EQ(got, (std::vector<uint64_t>{3, 7, 8, 9, 12, 13}));
  EXPECT_TRUE(c.Contains(4, 7));
  EXPECT_FALSE(c.Contains(4, 8));
  EXPECT_TRUE(c.Contains(0, 3));
  ConsumedSet mine;
  mine.AddUnconsumedOf(c, 0, 5);  // 3, 7, 8, 9, 12
  EXPECT_EQ(mine.ranges(), (std::vector<PosRange>{{3, 4}, {7, 10}, {12, 13}}));
  ConsumedSet all = ConsumedSet::Union(c, mine);
  EXPECT_EQ(all.prefix(), 13u);
  EXPECT_TRUE(all.ranges().empty());
  mine.Add(13, 15);  // touching the last range: extends it
  EXPECT_EQ(mine.ranges().back(), (PosRange{12, 15}));
}

struct Case {
  SampleOrder order;
  Remainder remainder;
  int from, to;
  bool relaxed;
};

SamplerConfig Config(const Case& c, int world, int rank) {
  SamplerConfig s;
  s.num_samples = 103;
  s.seed = 9;
  s.order = c.order;
  s.world_size = world;
  s.rank = rank;
  s.batch_size = 4;
  s.remainder = c.remainder;
  s.shuffle_buffer = 7;
  if (c.order == SampleOrder::kShardShuffle) {
    for (uint64_t k = 0; k < 103; k += 10) s.shard_starts.push_back(k);
  }
  return s;
}

// One segment on `world` ranks after `base`: each rank delivers a set of its
// batches (the first `k`, or with relaxed ordering `k` of the first k + 2 at
// random); returns the consumed set after it (through AddRankBatches, as
// MergeStates builds it) and appends the delivered real samples to `seen`.
ConsumedSet RunSegment(const Case& c, int world, const ConsumedSet& base, uint64_t k,
                       std::mt19937& rng, std::vector<int>& seen, uint64_t* batches) {
  ConsumedSet after = base;
  for (int r = 0; r < world; ++r) {
    auto sampler = EpochSampler::Create(Config(c, world, r));
    EXPECT_TRUE(sampler.has_value());
    EpochOrder o = sampler->Segment(3, base);
    const uint64_t per_rank = o.size() / 4;
    if (r == 0) *batches = per_rank;
    EXPECT_EQ(per_rank, *batches) << "rank " << r << " has another batch count";
    const uint64_t take = std::min(k, per_rank);
    std::vector<uint64_t> ks(std::min(per_rank, take + (c.relaxed ? 2 : 0)));
    for (uint64_t i = 0; i < ks.size(); ++i) ks[i] = i;
    if (c.relaxed) std::shuffle(ks.begin(), ks.end(), rng);
    ks.resize(take);
    std::sort(ks.begin(), ks.end());
    for (uint64_t batch : ks) {
      for (uint64_t p = batch * 4; p < batch * 4 + 4; ++p) {
        if (!o.IsPadding(p)) ++seen[o[p]];
      }
    }
    uint64_t first = 0;
    while (first < ks.size() && ks[first] == first) ++first;
    AddRankBatches(
        after, base, o.layout(), r, first,
        std::vector<uint64_t>(ks.begin() + static_cast<std::ptrdiff_t>(first), ks.end()));
    if (!c.relaxed) {
      ConsumedSet lockstep = base;
      AddLockstep(lockstep, base, o.layout(), take);
      if (r == world - 1) EXPECT_EQ(lockstep, after) << "strict: lockstep = union of the ranks";
    }
  }
  if (after.order_world() == 0 && c.order == SampleOrder::kShardShuffle) {
    after.set_order_world(world);
  }
  return after;
}

// Consumes k1 batches per rank on `from` ranks, k2 on `to` ranks, then the
// rest of the epoch on `from` ranks again; every sample exactly once (drop:
// at most once, fewer than world * batch left per segment).
void ExpectExactCoverage(const Case& c, uint64_t k1, uint64_t k2) {
  SCOPED_TRACE(::testing::Message()
               << "order " << static_cast<int>(c.order) << " pad "
               << (c.remainder == Remainder::kPad) << " " << c.from << "->" << c.to << " relaxed "
               << c.relaxed << " k1 " << k1 << " k2 " << k2);
  std::mt19937 rng(static_cast<unsigned>(k1 * 31 + k2));
  std::vector<int> seen(103, 0);
  uint64_t batches = 0;
  ConsumedSet s1 = RunSegment(c, c.from, ConsumedSet(), k1, rng, seen, &batches);
  ConsumedSet s2 = RunSegment(c, c.to, s1, k2, rng, seen, &batches);
  const uint64_t before_last = s2.count();
  std::vector<int> last(103, 0);
  RunSegment(c, c.from, s2, ~uint64_t{0} / 8, rng, last, &batches);
  uint64_t missing = 0;
  for (uint64_t i = 0; i < 103; ++i) {
    // Padding slots are not counted: real deliveries only.
    ASSERT_LE(seen[i] + last[i], 1) << "sample " << i << " delivered twice";
    missing += (seen[i] + last[i]) == 0;
  }
  // Seen samples are exactly the consumed set's count.
  uint64_t seen_count = 0;
  for (int v : seen) seen_count += static_cast<uint64_t>(v);
  EXPECT_EQ(seen_count, before_last);
  if (c.remainder == Remainder::kPad) {
    EXPECT_EQ(missing, 0u);
  } else {
    EXPECT_LT(missing, static_cast<uint64_t>(c.from) * 4) << "drop leaves less than a step";
    EXPECT_EQ(missing, (103 - before_last) % (static_cast<uint64_t>(c.from) * 4));
  }
}

TEST(ElasticSegments, EveryUnconsumedSampleExactlyOnceAcrossResizes) {
  for (SampleOrder order :
       {SampleOrder::kShuffle, SampleOrder::kSequential, SampleOrder::kShardShuffle}) {
    for (Remainder rem : {Remainder::kDrop, Remainder::kPad}) {
      for (auto [from, to] : {std::pair{4, 2}, {2, 3}, {3, 3}}) {
        for (bool relaxed : {false, true}) {
          for (uint64_t k1 : {0ull, 1ull, 3ull, 5ull}) {
            for (uint64_t k2 : {0ull, 1ull, 2ull}) {
              ExpectExactCoverage(Case{order, rem, from, to, relaxed}, k1, k2);
            }
          }
        }
      }
    }
  }
}

TEST(ElasticSegments, SameWorldSizeContinuesTheUninterruptedOrder) {
  // Strict 3 -> 3 after k batches: the new segment's rank orders are the
  // rest of the fresh epoch's, in every order (padding repeats included).
  for (SampleOrder order :
       {SampleOrder::kShuffle, SampleOrder::kSequential, SampleOrder::kShardShuffle}) {
    for (Remainder rem : {Remainder::kDrop, Remainder::kPad}) {
      for (uint64_t k : {1ull, 4ull, 8ull}) {
        Case c{order, rem, 3, 3, false};
        ConsumedSet consumed;
        std::vector<EpochOrder> fresh;
        for (int r = 0; r < 3; ++r) {
          auto s = EpochSampler::Create(Config(c, 3, r));
          ASSERT_TRUE(s.has_value());
          fresh.push_back(s->Epoch(3));
        }
        AddLockstep(consumed, ConsumedSet(), fresh[0].layout(), k);
        if (order == SampleOrder::kShardShuffle) consumed.set_order_world(3);
        for (int r = 0; r < 3; ++r) {
          auto s = EpochSampler::Create(Config(c, 3, r));
          EpochOrder rest = s->Segment(3, consumed);
          ASSERT_EQ(rest.size() + k * 4, fresh[r].size());
          for (uint64_t p = 0; p < rest.size(); ++p) {
            ASSERT_EQ(rest[p], fresh[r][p + k * 4])
                << "order " << static_cast<int>(order) << " rank " << r << " k " << k << " p " << p;
            ASSERT_EQ(rest.IsPadding(p), fresh[r].IsPadding(p + k * 4));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice::runtime
