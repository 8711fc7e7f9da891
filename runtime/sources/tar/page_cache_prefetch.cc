#include "runtime/sources/tar/page_cache_prefetch.h"

#include <fcntl.h>

#include <algorithm>

namespace sluice::runtime::tar {

PageCachePrefetcher::PageCachePrefetcher(size_t capacity)
    : ring_(std::max<size_t>(capacity, 1)), thread_([this] { Run(); }) {}

PageCachePrefetcher::~PageCachePrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    queued_ = 0;
  }
  wake_.notify_all();
  thread_.join();
}

void PageCachePrefetcher::Announce(std::span<const Range> ranges) {
  if (ranges.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return;
    for (const Range& r : ranges) {
      if (r.fd < 0 || r.length == 0) continue;
      if (queued_ > 0) {
        Range& last = ring_[(head_ + queued_ - 1) % ring_.size()];
        if (last.fd == r.fd && last.offset + last.length == r.offset) {
          last.length += r.length;
          continue;
        }
      }
      if (queued_ == ring_.size()) {
        ++counters_.dropped;
        continue;
      }
      ring_[(head_ + queued_) % ring_.size()] = r;
      ++queued_;
    }
  }
  wake_.notify_one();
}

void PageCachePrefetcher::Cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  stop_ = true;
  queued_ = 0;
}

PageCachePrefetcher::Counters PageCachePrefetcher::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

void PageCachePrefetcher::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || queued_ > 0; });
    if (queued_ == 0) return;  // stopped, nothing left
    const Range r = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    --queued_;
    ++counters_.advised;
    lock.unlock();
    // Starts the reads and returns; may wait for a slot in the device's
    // queue, which is why it runs here and not on the loader's thread.
    (void)::posix_fadvise(r.fd, static_cast<off_t>(r.offset), static_cast<off_t>(r.length),
                          POSIX_FADV_WILLNEED);
    lock.lock();
  }
}

}  // namespace sluice::runtime::tar
