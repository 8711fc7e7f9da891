#include "runtime/sources/tar/page_cache_prefetch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace sluice::runtime::tar {
namespace {

using Range = PageCachePrefetcher::Range;

// Polls until the prefetcher has advised `n` ranges (at most 10 s).
bool WaitAdvised(const PageCachePrefetcher& p, uint64_t n) {
  for (int i = 0; i < 1000; ++i) {
    if (p.counters().advised >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(PageCachePrefetcher, MergesAdjacentRangesAndDropsWhatTheRingCannotHold) {
  const int fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  {
    PageCachePrefetcher p(/*capacity=*/1);
    // One call holds the lock throughout: three adjacent ranges become one.
    const Range adjacent[] = {{fd, 0, 4096}, {fd, 4096, 4096}, {fd, 8192, 100}};
    p.Announce(adjacent);
    ASSERT_TRUE(WaitAdvised(p, 1));
    EXPECT_EQ(p.counters().dropped, 0u);
    // Apart (or another descriptor): each needs a slot; the ring holds one.
    const Range apart[] = {{fd, 0, 4096}, {fd, 65536, 4096}, {fd + 1000, 4096, 4096}};
    p.Announce(apart);
    ASSERT_TRUE(WaitAdvised(p, 2));
    EXPECT_EQ(p.counters().dropped, 2u);
    // Nothing to read is not queued.
    const Range empty[] = {{-1, 0, 4096}, {fd, 0, 0}};
    p.Announce(empty);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(p.counters().advised, 2u);
  }
  ::close(fd);
}

TEST(PageCachePrefetcher, CancelIgnoresLaterAnnouncementsAndDestructionIsPrompt) {
  PageCachePrefetcher p(16);
  p.Cancel();
  p.Cancel();  // idempotent
  const Range r[] = {{0, 0, 4096}};
  p.Announce(r);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(p.counters().advised, 0u);
  EXPECT_EQ(p.counters().dropped, 0u);
}

}  // namespace
}  // namespace sluice::runtime::tar
