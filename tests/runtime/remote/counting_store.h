// A test ObjectStore over LocalStore that counts calls, can hold streams at a
// gate (to observe how many are in flight) and can fail chosen URLs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/remote/local_store.h"

namespace sluice::runtime::remote::testing {

class CountingStore final : public ObjectStore {
 public:
  Result<ObjectInfo> Stat(const std::string& url) override { return local_.Stat(url); }
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    return local_.List(prefix);
  }
  Status ReadRange(const std::string& url, uint64_t offset, uint64_t length,
                   uint8_t* out) override {
    ++range_reads;
    if (Failing(url)) return Fail(url);
    return local_.ReadRange(url, offset, length, out);
  }
  Status Stream(const std::string& url, const Sink& sink) override {
    {
      std::unique_lock lock(mutex_);
      ++streams;
      streamed.push_back(url);
      ++waiting_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return !gated_ || cancelled_; });
      --waiting_;
      if (cancelled_) return MakeError(ErrorCode::kIo, "'" + url + "': cancelled");
    }
    if (Failing(url)) return Fail(url);
    return local_.Stream(url, sink);
  }
  void Cancel() override {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    changed_.notify_all();
    local_.Cancel();
  }
  RequestStats stats() const override { return local_.stats(); }

  // Streams wait at the gate while it is closed.
  void CloseGate() {
    std::lock_guard lock(mutex_);
    gated_ = true;
  }
  void OpenGate() {
    std::lock_guard lock(mutex_);
    gated_ = false;
    changed_.notify_all();
  }
  // Waits until `n` streams wait at the gate.
  void WaitForWaiting(int n) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return waiting_ >= n; });
  }
  int waiting() {
    std::lock_guard lock(mutex_);
    return waiting_;
  }
  void FailUrlsContaining(std::string part) {
    std::lock_guard lock(mutex_);
    fail_part_ = std::move(part);
  }
  std::vector<std::string> Streamed() {
    std::lock_guard lock(mutex_);
    return streamed;
  }

  std::atomic<int> range_reads{0};
  std::atomic<int> streams{0};

 private:
  bool Failing(const std::string& url) {
    std::lock_guard lock(mutex_);
    return !fail_part_.empty() && url.find(fail_part_) != std::string::npos;
  }
  Status Fail(const std::string& url) {
    return MakeError(ErrorCode::kIo, "GET '" + url + "' failed after 5 retries: HTTP 503");
  }

  LocalStore local_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool gated_ = false, cancelled_ = false;
  int waiting_ = 0;
  std::string fail_part_;
  std::vector<std::string> streamed;
};

}  // namespace sluice::runtime::remote::testing
