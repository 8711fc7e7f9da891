#include "runtime/sources/tar/read_ahead.h"

#include <gtest/gtest.h>

namespace sluice::runtime::tar {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(ChooseReadAhead, AutoFitsTheLargestShardInOneEighthOfMemoryCappedAtOneGiB) {
  // 64 GiB of RAM: the 1 GiB cap; 256 MiB shards: the one being read + 3.
  ReadAheadChoice c = ChooseReadAhead({200 * kMiB, 256 * kMiB}, -1, -1, -1, 64 * kGiB);
  EXPECT_EQ(c.bytes, kGiB);
  EXPECT_EQ(c.max, 3);
  EXPECT_EQ(c.start, 2);
  EXPECT_NE(c.summary.find("growing on stalls up to 3"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("the 1 GiB cap"), std::string::npos) << c.summary;
  // 2 GiB of RAM: 256 MiB; 100 MiB shards fit two (the one read + 1).
  c = ChooseReadAhead({100 * kMiB}, -1, -1, -1, 2 * kGiB);
  EXPECT_EQ(c.bytes, 256 * kMiB);
  EXPECT_EQ(c.max, 1);
  EXPECT_EQ(c.start, 1);
  EXPECT_NE(c.summary.find("1/8 of the machine's memory"), std::string::npos) << c.summary;
  // Small shards: at most 16 ahead.
  c = ChooseReadAhead({kMiB, kMiB}, -1, -1, -1, 64 * kGiB);
  EXPECT_EQ(c.max, 16);
  EXPECT_EQ(c.start, 2);
  // Unknown memory: the cap.
  EXPECT_EQ(ChooseReadAhead({kMiB}, -1, -1, -1, 0).bytes, kGiB);
}

TEST(ChooseReadAhead, AShardLargerThanTheBudgetStreamsNothingAhead) {
  const ReadAheadChoice c = ChooseReadAhead({2 * kGiB}, -1, -1, -1, 64 * kGiB);
  EXPECT_EQ(c.max, 0);
  EXPECT_EQ(c.start, 0);
  EXPECT_NE(c.summary.find("read sample by sample"), std::string::npos) << c.summary;
}

TEST(ChooseReadAhead, ATunedMemoryBudgetSetsTheBytes) {
  // What `sluice tune --memory-budget` leaves after the batch buffers: 250
  // MiB holds the shard being read and one more 100 MiB shard.
  const ReadAheadChoice c = ChooseReadAhead({100 * kMiB}, -1, -1, 250 * kMiB, 64 * kGiB);
  EXPECT_EQ(c.bytes, 250 * kMiB);
  EXPECT_EQ(c.max, 1);
  EXPECT_EQ(c.start, 1);
  EXPECT_NE(c.summary.find("tuned memory budget"), std::string::npos) << c.summary;
  // Nothing left: no read-ahead, shards read sample by sample.
  EXPECT_EQ(ChooseReadAhead({100 * kMiB}, -1, -1, 0, 64 * kGiB).max, 0);
}

TEST(ChooseReadAhead, TheSpecsValuesWin) {
  ReadAheadChoice c = ChooseReadAhead({256 * kMiB}, 5, -1, -1, 64 * kGiB);
  EXPECT_EQ(c.start, 5);
  EXPECT_EQ(c.max, 5);  // fixed: no growth
  EXPECT_NE(c.summary.find("(read_ahead)"), std::string::npos) << c.summary;
  c = ChooseReadAhead({100 * kMiB}, -1, 450 * kMiB, 300 * kMiB, 64 * kGiB);
  EXPECT_EQ(c.bytes, 450 * kMiB);
  EXPECT_EQ(c.max, 3);  // 4 x 100 MiB fit in 450 MiB
  EXPECT_NE(c.summary.find("read_ahead_bytes"), std::string::npos) << c.summary;
  c = ChooseReadAhead({100 * kMiB}, 0, 0, -1, 64 * kGiB);
  EXPECT_EQ(c.start, 0);
  EXPECT_EQ(c.bytes, 0u);
}

}  // namespace
}  // namespace sluice::runtime::tar
