#include "runtime/exec/tbb_parallelism.h"

#include <tbb/global_control.h>

#include <memory>
#include <mutex>
#include <set>

namespace sluice::runtime {
namespace {

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

ParallelismLease::ParallelismLease(size_t threads) : threads_(threads) {
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
