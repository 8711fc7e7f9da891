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
  ASSERT_EQ(ParallelismLease::CurrentLimit(), 0u);
  std::optional<ParallelismLease> wide(std::in_place, 9);
  EXPECT_EQ(TbbLimit(), 9u);
  {
    ParallelismLease narrow(2);  // a second loader with one thread
    EXPECT_EQ(TbbLimit(), 9u);   // was 2: the smallest live global_control
    EXPECT_EQ(ParallelismLease::CurrentLimit(), 9u);
    ParallelismLease same(9);
    wide.reset();
    EXPECT_EQ(TbbLimit(), 9u);  // `same` still asks for 9
  }
  EXPECT_EQ(ParallelismLease::CurrentLimit(), 0u);
  ParallelismLease only(3);
  EXPECT_EQ(TbbLimit(), 3u);
}

}  // namespace
}  // namespace sluice::runtime
