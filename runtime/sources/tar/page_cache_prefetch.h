// Page-cache prefetch for local shards: the loader announces the samples it
// will read soon (Source::WillRead), and one helper thread asks the kernel to
// start reading their members into the page cache (posix_fadvise
// POSIX_FADV_WILLNEED), so that a worker's read later finds them resident:
// preadv2(RWF_NOWAIT) succeeds, the read needs no deadline hand-off, and the
// worker does not wait on the disk while it could be decoding.
//
// Contract:
//  - Hints only. Announce never blocks on I/O (it takes a mutex and copies
//    into a fixed ring); what does not fit is dropped and counted. Errors of
//    posix_fadvise (a file system without it, a pipe) are ignored.
//  - Bounded by construction: the ring is allocated once; the only memory
//    the hints fill is the kernel's page cache, which it may reclaim.
//  - The descriptors passed in must stay open until the prefetcher is
//    destroyed (the destructor stops and joins the thread first).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace sluice::runtime::tar {

class PageCachePrefetcher {
 public:
  struct Range {
    int fd = -1;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  struct Counters {
    uint64_t advised = 0;  // ranges handed to posix_fadvise
    uint64_t dropped = 0;  // ranges dropped because the ring was full
  };

  // capacity: ranges the ring holds (at least 1).
  explicit PageCachePrefetcher(size_t capacity = 4096);
  ~PageCachePrefetcher();
  PageCachePrefetcher(const PageCachePrefetcher&) = delete;
  PageCachePrefetcher& operator=(const PageCachePrefetcher&) = delete;

  // Queues the ranges in order; adjacent ranges of one descriptor are merged.
  void Announce(std::span<const Range> ranges);
  // Drops what is queued; later announcements are ignored (the loader's
  // shutdown). Idempotent.
  void Cancel();
  Counters counters() const;

 private:
  void Run();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Range> ring_;  // fixed size: capacity
  size_t head_ = 0;          // the oldest queued range
  size_t queued_ = 0;
  bool stop_ = false;
  Counters counters_;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace sluice::runtime::tar
