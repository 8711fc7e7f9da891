// The process-wide TBB worker limit that loaders raise while they live.
//
// oneTBB applies the smallest max_allowed_parallelism among the live
// tbb::global_control objects, so one global_control per loader let a second
// loader with fewer threads throttle every other loader in the process. A
// ParallelismLease instead registers its request with one process-wide
// registry, which keeps a single global_control at the largest live request
// (and none once every lease is gone).
#pragma once

#include <cstddef>

#include "sluice/result.h"

namespace sluice::runtime {

// True in a child forked after this process started a loader's threads:
// oneTBB's worker threads do not survive fork(), so a loader there (inherited
// or new) would wait forever. Loader::Create and Next then fail with
// ForkedError() instead.
bool ForkedAfterThreadsStarted();
// kUnsupported, saying so and how to start such processes instead.
Error ForkedError();

class ParallelismLease {
 public:
  // Asks for at least `threads` TBB threads (workers plus the caller) while
  // the lease lives. Thread-safe.
  explicit ParallelismLease(size_t threads);
  ~ParallelismLease();
  ParallelismLease(const ParallelismLease&) = delete;
  ParallelismLease& operator=(const ParallelismLease&) = delete;

  // The limit in force now for the live leases (0: none); for tests.
  static size_t CurrentLimit();

 private:
  size_t threads_;
};

}  // namespace sluice::runtime
