// ReadPool: see read_pool.h for the deadline, ownership and shutdown contract.
#include "runtime/exec/read_pool.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

namespace sluice::runtime {

// One read handed to an I/O thread. Fields other than `buffer` are guarded by
// ReadPoolState::mu; `buffer` belongs to the I/O thread from kQueued until it
// sets kDone, and to the slot's owner otherwise (an abandoned request's buffer
// is never read again).
struct ReadRequest {
  enum class State { kIdle, kQueued, kRunning, kDone, kAbandoned };
  State state = State::kIdle;
  size_t index = 0;
  std::vector<uint8_t> buffer;
  Result<size_t> result = size_t{0};
  std::condition_variable done;  // signalled when state becomes kDone
};

// Shared by the pool and its (detached) I/O threads; the last one frees it.
struct ReadPoolState {
  std::shared_ptr<const Source> source;
  int target = 1;  // healthy (not stuck) threads to keep
  std::mutex mu;
  std::condition_variable work;    // I/O threads wait here for requests
  std::condition_variable exited;  // the destructor waits here for idle threads
  // Queued requests, oldest first. At most one per slot (a request that times
  // out while queued is erased), so the capacity reserved up front suffices.
  std::vector<std::shared_ptr<ReadRequest>> queue;
  // Requests an I/O thread is reading (each kept alive by that thread), so
  // Cancel() can wake their workers.
  std::vector<ReadRequest*> running;
  int alive = 0;  // I/O threads started and not yet exited
  int stuck = 0;  // of them, inside an abandoned read
  bool cancelled = false;
  bool paused = false;  // between Pause() and Resume()
};

namespace {

// What a Read returns once the pool is cancelled (the loader shutting down).
std::unexpected<Error> ShuttingDownError() {
  return MakeError(ErrorCode::kIo, "read abandoned: the loader is shutting down");
}

// What a Read returns while the pool is paused (the loader restarting).
std::unexpected<Error> RestartingError() {
  return MakeError(ErrorCode::kIo, "read abandoned: the loader is restarting elsewhere");
}

using Clock = std::chrono::steady_clock;

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", s);
  return text;
}

// source.Read, with an exception turned into a kInternal error (none may
// escape a thread).
Result<size_t> ReadGuarded(const Source& source, size_t index, std::vector<uint8_t>& buffer) {
  try {
    return source.Read(index, buffer);
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, std::string("source read threw: ") + e.what());
  } catch (...) {
    return MakeError(ErrorCode::kInternal, "source read threw a non-standard exception");
  }
}

// source.ReadIfReady, guarded like ReadGuarded.
std::optional<Result<size_t>> ReadIfReadyGuarded(const Source& source, size_t index,
                                                 std::vector<uint8_t>& buffer) {
  try {
    return source.ReadIfReady(index, buffer);
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, std::string("source read threw: ") + e.what());
  } catch (...) {
    return MakeError(ErrorCode::kInternal, "source read threw a non-standard exception");
  }
}

// An I/O thread: runs queued reads until the pool is cancelled (then exits,
// taking no new request). After an abandoned read returns, it exits when the pool has
// enough healthy threads without it.
void IoLoop(std::shared_ptr<ReadPoolState> s) {
  std::unique_lock lock(s->mu);
  while (true) {
    s->work.wait(lock, [&] { return s->cancelled || !s->queue.empty(); });
    if (s->cancelled) break;  // queued requests are erased by their waiting Read
    std::shared_ptr<ReadRequest> r = std::move(s->queue.front());
    s->queue.erase(s->queue.begin());
    r->state = ReadRequest::State::kRunning;
    s->running.push_back(r.get());
    lock.unlock();
    Result<size_t> result = ReadGuarded(*s->source, r->index, r->buffer);
    lock.lock();
    s->running.erase(std::find(s->running.begin(), s->running.end(), r.get()));
    if (r->state == ReadRequest::State::kAbandoned) {
      --s->stuck;
      r.reset();  // the worker has moved on to a fresh request: free this one
      if (s->cancelled || s->alive - s->stuck > s->target) break;
      continue;
    }
    r->result = std::move(result);
    r->state = ReadRequest::State::kDone;
    r->done.notify_one();
  }
  --s->alive;
  s->exited.notify_all();
}

// Starts one detached I/O thread; false when the system refuses a thread.
// Called with s->mu held.
bool StartThreadLocked(const std::shared_ptr<ReadPoolState>& s) {
  try {
    std::thread(IoLoop, s).detach();
  } catch (const std::system_error&) {
    return false;
  }
  ++s->alive;
  return true;
}

}  // namespace

ReadSlot::ReadSlot() : request_(std::make_shared<ReadRequest>()) {}

const std::vector<uint8_t>& ReadSlot::buffer() const { return request_->buffer; }

ReadPool::ReadPool(std::shared_ptr<const Source> source, Options options)
    : options_(options), source_(std::move(source)), state_(std::make_shared<ReadPoolState>()) {
  options_.threads = std::max(options_.threads, 1);
  options_.max_stuck = std::max(options_.max_stuck, 1);
  if (options_.timeout_s <= 0) return;
  ReadPoolState& s = *state_;
  s.source = source_;
  s.target = options_.threads;
  s.queue.reserve(static_cast<size_t>(options_.threads + options_.max_stuck));
  s.running.reserve(static_cast<size_t>(options_.threads + options_.max_stuck + 1));
  std::lock_guard lock(s.mu);
  for (int i = 0; i < options_.threads; ++i) StartThreadLocked(state_);
}

ReadPool::~ReadPool() {
  Cancel();
  std::unique_lock lock(state_->mu);
  state_->exited.wait(lock, [&] { return state_->alive == state_->stuck; });
}

namespace {

// Wakes every Read waiting on a queued or running request (they then see
// cancelled or paused). Called with s.mu held.
void WakeWaitingReadsLocked(ReadPoolState& s) {
  for (const auto& r : s.queue) r->done.notify_one();
  for (ReadRequest* r : s.running) r->done.notify_one();
}

}  // namespace

void ReadPool::Cancel() {
  cancelled_ = true;
  std::lock_guard lock(state_->mu);
  state_->cancelled = true;
  state_->work.notify_all();
  WakeWaitingReadsLocked(*state_);
}

void ReadPool::Pause() {
  paused_ = true;
  std::lock_guard lock(state_->mu);
  state_->paused = true;
  WakeWaitingReadsLocked(*state_);
}

void ReadPool::Resume() {
  paused_ = false;
  std::lock_guard lock(state_->mu);
  state_->paused = false;
}

int ReadPool::stuck() const {
  std::lock_guard lock(state_->mu);
  return state_->stuck;
}

Result<size_t> ReadPool::Read(size_t index, ReadSlot& slot) {
  ReadRequest& r = *slot.request_;
  if (cancelled_.load(std::memory_order_relaxed)) {
    return ShuttingDownError();
  }
  if (paused_.load(std::memory_order_relaxed)) return RestartingError();
  if (options_.timeout_s <= 0) return source_->Read(index, r.buffer);
  // A read that cannot block needs no deadline: it runs here, without the
  // hand-off to an I/O thread (two thread switches, ~15% of a worker's time
  // for a page-cache read on a 2-core machine: bench/RESULTS.md).
  if (auto ready = ReadIfReadyGuarded(*source_, index, r.buffer)) return std::move(*ready);
  ReadPoolState& s = *state_;
  std::unique_lock lock(s.mu);
  if (s.cancelled) return ShuttingDownError();
  if (s.paused) return RestartingError();
  if (s.stuck >= options_.max_stuck) {
    return MakeError(ErrorCode::kIo,
                     std::to_string(s.stuck) + " reads are stuck past source.read_timeout (" +
                         Seconds(options_.timeout_s) +
                         ") and none has returned; not starting another (the storage seems to "
                         "hang)",
                     "check the storage; reads resume as the stuck ones return");
  }
  r.index = index;
  r.state = ReadRequest::State::kQueued;
  s.queue.push_back(slot.request_);
  s.work.notify_one();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.timeout_s));
  r.done.wait_until(lock, deadline,
                    [&] { return r.state == ReadRequest::State::kDone || s.cancelled || s.paused; });
  if (r.state == ReadRequest::State::kDone) {
    r.state = ReadRequest::State::kIdle;
    return std::move(r.result);
  }
  const bool cancelled = s.cancelled, paused = s.paused;
  if (r.state == ReadRequest::State::kQueued) {
    // No thread took it: nothing is stuck, the request stays the slot's.
    s.queue.erase(std::find(s.queue.begin(), s.queue.end(), slot.request_));
    r.state = ReadRequest::State::kIdle;
  } else {
    // Running: abandon it to its thread and keep `threads` threads available.
    r.state = ReadRequest::State::kAbandoned;
    ++s.stuck;
    if (!cancelled && s.alive - s.stuck < s.target) StartThreadLocked(state_);
    lock.unlock();
    slot.request_ = std::make_shared<ReadRequest>();
  }
  if (cancelled) return ShuttingDownError();
  if (paused) return RestartingError();
  return MakeError(ErrorCode::kIo,
                   "read did not finish within source.read_timeout (" +
                       Seconds(options_.timeout_s) + "); abandoned (the storage may be stalled)",
                   "raise source.read_timeout in the spec if such slow reads are expected");
}

}  // namespace sluice::runtime
