#include "runtime/exec/tbb_parallelism.h"

#include <tbb/global_control.h>

#include <pthread.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>

namespace sluice::runtime {
namespace {

std::atomic<bool> g_forked_after_threads{false};

void OnForkInChild() { g_forked_after_threads.store(true, std::memory_order_relaxed); }

// From the first lease on: a child forked later has no TBB workers.
void WatchForForks() {
  static const bool registered = [] { return pthread_atfork(nullptr, nullptr, OnForkInChild) == 0; }();
  (void)registered;
}

struct Registry {
  std::mutex mutex;
  std::multiset<size_t> requests;
  size_t limit = 0;
  std::unique_ptr<tbb::global_control> control;

  // Keeps `control` at the largest request. The old control goes first:
  // while two exist, TBB would apply the smaller.
  void UpdateLocked() {
    const size_t wanted = requests.empty() ? 0 : *requests.rbegin();
    if (wanted == limit) return;
    control.reset();
    if (wanted > 0) {
      control = std::make_unique<tbb::global_control>(
          tbb::global_control::max_allowed_parallelism, wanted);
    }
    limit = wanted;
  }
};

Registry& TheRegistry() {
  static Registry* registry = new Registry;  // never destroyed: leases may outlive statics
  return *registry;
}

}  // namespace

bool ForkedAfterThreadsStarted() { return g_forked_after_threads.load(std::memory_order_relaxed); }

Error ForkedError() {
  return Error{ErrorCode::kUnsupported,
               "this process was forked after it started a Sluice loader's threads, which do "
               "not survive fork(): a loader here would wait forever",
               "start processes that load data with the spawn or forkserver start method "
               "(multiprocessing.set_start_method(\"spawn\"); torch DataLoader: "
               "multiprocessing_context=\"spawn\"), or fork before creating any loader"};
}

ParallelismLease::ParallelismLease(size_t threads) : threads_(threads) {
  WatchForForks();
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mutex);
  r.requests.insert(threads_);
  r.UpdateLocked();
}

ParallelismLease::~ParallelismLease() {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mutex);
  r.requests.erase(r.requests.find(threads_));
  r.UpdateLocked();
}

size_t ParallelismLease::CurrentLimit() {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mutex);
  return r.limit;
}

}  // namespace sluice::runtime
