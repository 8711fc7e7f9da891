// ParallelismLease (runtime/exec/tbb_parallelism.h): the largest live request
// holds, so a second loader with fewer threads does not throttle the first.
#include "runtime/exec/tbb_parallelism.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <optional>

namespace sluice::runtime {
namespace {

size_t TbbLimit() {
  return tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
}

TEST(ParallelismLease, TheLargestLiveRequestHolds) {
  // Larger than any other test's loader, whose lease may still be alive in
  // a one-process run (a Batch keeps its loader's core).
  std::optional<ParallelismLease> wide(std::in_place, 201);
  EXPECT_EQ(TbbLimit(), 201u);
  {
    ParallelismLease narrow(2);  // a second loader with one thread
    EXPECT_EQ(TbbLimit(), 201u);  // was 2: the smallest live global_control
    EXPECT_EQ(ParallelismLease::CurrentLimit(), 201u);
    ParallelismLease same(201);
    wide.reset();
    EXPECT_EQ(TbbLimit(), 201u);  // `same` still asks for 201
  }
  EXPECT_LT(ParallelismLease::CurrentLimit(), 201u);  // ours are gone
}

}  // namespace
}  // namespace sluice::runtime
