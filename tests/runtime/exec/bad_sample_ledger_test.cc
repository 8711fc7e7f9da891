// BadSampleLedger: each bad index once per epoch with its first reason,
// distinct reads, totals over epochs, the current and previous epoch's
// records, and a restore into the current epoch keeping what it has.
#include "runtime/exec/bad_sample_ledger.h"

#include <gtest/gtest.h>

namespace sluice::runtime {
namespace {

std::vector<uint64_t> Indices(const std::vector<BadSampleLedger::Record>& records) {
  std::vector<uint64_t> out;
  for (const auto& r : records) out.push_back(r.index);
  return out;
}

TEST(BadSampleLedgerTest, CountsEachBadIndexOncePerEpoch) {
  BadSampleLedger ledger(130, 0);  // more than two bitmap words
  EXPECT_TRUE(ledger.AddBad(129, "truncated"));
  EXPECT_TRUE(ledger.AddBad(3, "empty"));
  EXPECT_FALSE(ledger.AddBad(129, "met again"));
  ledger.AddRead(5);
  ledger.AddRead(5);
  ledger.AddRead(64);
  EXPECT_EQ(ledger.epoch_bad(), 2u);
  EXPECT_EQ(ledger.epoch_read(), 4u);  // 3, 5, 64, 129: a bad read is a read
  EXPECT_EQ(ledger.total_bad(), 2u);
  auto records = ledger.Records(0);
  ASSERT_TRUE(records);
  EXPECT_EQ(Indices(*records), (std::vector<uint64_t>{3, 129}));
  EXPECT_EQ((*records)[1].reason, "truncated");  // the first reason
  // Out of range: never counted.
  EXPECT_FALSE(ledger.AddBad(1000, "no such sample"));
  EXPECT_EQ(ledger.epoch_bad(), 2u);
}

TEST(BadSampleLedgerTest, KeepsTheCurrentAndPreviousEpoch) {
  BadSampleLedger ledger(10, 4);
  EXPECT_TRUE(ledger.AddBad(7, "a"));
  ledger.StartEpoch(4);  // a restore into the current epoch keeps it
  EXPECT_FALSE(ledger.AddBad(7, "a"));
  ledger.StartEpoch(5);
  EXPECT_EQ(ledger.epoch(), 5u);
  EXPECT_EQ(ledger.epoch_bad(), 0u);
  EXPECT_EQ(ledger.epoch_read(), 0u);
  EXPECT_TRUE(ledger.AddBad(7, "b"));  // a new epoch counts it again
  EXPECT_TRUE(ledger.AddBad(2, "c"));
  EXPECT_EQ(ledger.total_bad(), 3u);
  ASSERT_TRUE(ledger.Records(4));
  EXPECT_EQ(Indices(*ledger.Records(4)), (std::vector<uint64_t>{7}));
  EXPECT_EQ(Indices(*ledger.Records(5)), (std::vector<uint64_t>{2, 7}));
  ledger.StartEpoch(6);
  EXPECT_FALSE(ledger.Records(4));
  EXPECT_TRUE(ledger.Records(5));
  EXPECT_TRUE(ledger.Records(6));
  EXPECT_FALSE(ledger.Records(7));
}

// A restore back into the epoch just left (state_dict saved before the end,
// loaded after it) keeps that epoch's bad samples counted once: they were
// counted twice before.
TEST(BadSampleLedgerTest, BackIntoThePreviousEpochCountsNothingTwice) {
  BadSampleLedger ledger(10, 0);
  EXPECT_TRUE(ledger.AddBad(3, "a"));
  EXPECT_TRUE(ledger.AddBad(8, "b"));
  ledger.StartEpoch(1);
  EXPECT_TRUE(ledger.AddBad(5, "c"));
  ledger.StartEpoch(0);  // back
  EXPECT_EQ(ledger.epoch(), 0u);
  EXPECT_EQ(ledger.epoch_bad(), 2u);
  EXPECT_EQ(ledger.epoch_read(), 2u);
  EXPECT_FALSE(ledger.AddBad(3, "a"));
  EXPECT_FALSE(ledger.AddBad(8, "b"));
  EXPECT_EQ(ledger.total_bad(), 3u);
  EXPECT_EQ(Indices(*ledger.Records(0)), (std::vector<uint64_t>{3, 8}));
  EXPECT_EQ(Indices(*ledger.Records(1)), (std::vector<uint64_t>{5}));
  ledger.StartEpoch(1);  // and forward again: epoch 1's record is kept
  EXPECT_FALSE(ledger.AddBad(5, "c"));
  EXPECT_EQ(ledger.total_bad(), 3u);
}

}  // namespace
}  // namespace sluice::runtime
