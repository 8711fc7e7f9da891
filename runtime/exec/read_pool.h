// Source reads with a deadline (`source: {read_timeout: S}`): the loader's
// workers hand each read to a small pool of I/O threads and wait at most S
// seconds for it. A read that has not returned by then is abandoned: the
// worker gets a kIo error (a bad sample under the error policy) and goes on;
// the I/O thread stays inside the stuck read until it returns.
//
// Reads that cannot block skip the hand-off: Read first asks the source's
// ReadIfReady (runtime/sources/source.h), which reads on the caller's thread
// only when the bytes are already in memory (a tar shard's member in the page
// cache, a remote range already fetched); only the others go to the pool.
//
// Ownership. Each worker owns one ReadSlot; a slot owns a shared ReadRequest
// holding the read buffer, reused sample after sample (no allocation on the
// normal path: the hand-off is a queue push, a notify and a wait on the
// request's own condition variable). The I/O thread running a read holds a
// second reference to the request. When the worker abandons a running read,
// the slot takes a fresh request (the one allocation, on the timeout path
// only), so the stuck thread writes into a buffer no worker reads any more.
// The I/O threads are detached and hold the pool's shared state and the
// Source by shared_ptr, so destroying the pool (or the loader) while a read is
// stuck leaves nothing dangling: the stuck thread frees them when its read
// returns (if it never does, they live until the process exits).
//
// Threads. `threads` I/O threads (one per worker that may read at once) are
// started with the pool. Each abandoned read keeps its thread; a replacement
// is started so `threads` stay available, up to `max_stuck` stuck at once.
// While `max_stuck` reads are stuck, Read fails at once with a kIo error that
// says so (storage that hangs this much makes every sample bad quickly, and
// on_error.max_fraction then stops the loader) instead of queueing behind
// them. A stuck read that returns frees its thread (it exits if the pool has
// enough without it) and lowers the count.
//
// Timeout 0 turns the deadline off: Read runs source.Read on the caller's
// thread, as without a pool, and a stuck read stalls that worker (and the
// loader's shutdown) until it returns.
//
// Shutdown bound: Cancel() (called by the loader's Shutdown) makes every
// waiting Read return at once ("the loader is shutting down") and every later
// one fail fast; the destructor then waits only for the idle I/O threads to
// exit, never for a stuck one. So destroying a loader with a stuck read takes
// no longer than the workers' non-read work on their current samples.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/sources/source.h"
#include "sluice/result.h"

namespace sluice::runtime {

struct ReadRequest;  // read_pool.cc
struct ReadPoolState;

// One worker's read handle: its request and buffer, reused from read to read.
// Used by one thread at a time.
class ReadSlot {
 public:
  ReadSlot();
  // The bytes of the last successful Read through this slot: buffer()[0, n).
  const std::vector<uint8_t>& buffer() const;

 private:
  friend class ReadPool;
  std::shared_ptr<ReadRequest> request_;
};

class ReadPool {
 public:
  struct Options {
    double timeout_s = 30;  // > 0: the deadline; 0: no deadline (inline reads)
    int threads = 1;        // I/O threads kept available: the number of workers
    int max_stuck = 4;      // abandoned reads at once before reads fail fast
  };
  // The default spares for `workers` readers: max(workers, 4).
  static int DefaultMaxStuck(int workers) { return workers > 4 ? workers : 4; }

  // Starts options.threads I/O threads (none when timeout_s == 0).
  ReadPool(std::shared_ptr<const Source> source, Options options);
  // Cancels, then waits for the idle I/O threads to exit; stuck ones are left
  // behind (see the file comment). No Read may be in progress.
  ~ReadPool();
  ReadPool(const ReadPool&) = delete;
  ReadPool& operator=(const ReadPool&) = delete;

  // Reads sample `index` into slot.buffer() and returns its byte count, or the
  // source's error, or kIo when the read passed the deadline ("did not finish
  // within source.read_timeout ..."), when max_stuck reads are stuck, or when
  // the pool was cancelled. Thread-safe across slots; one call per slot at a
  // time. Messages do not name the sample (the caller adds Source::SampleName).
  Result<size_t> Read(size_t index, ReadSlot& slot);

  // Wakes every waiting Read (it returns kIo at once) and makes later ones
  // fail fast, inline reads (timeout 0) included: a worker trying replacement
  // samples after shutdown began stops reading at once. Idempotent.
  void Cancel();

  // Pause() is Cancel() until Resume(): waiting Reads return kIo at once
  // ("the loader is restarting") and later ones fail fast, a running read
  // being abandoned to its thread as past a deadline. The loader pauses while
  // Restore drains its workers, whose samples are then discarded, so a read
  // stuck in stalled storage does not hold set_epoch / load_state_dict for
  // the whole read_timeout. Inline reads (timeout 0) cannot be interrupted.
  void Pause();
  void Resume();

  // Reads abandoned past their deadline that have not returned yet.
  int stuck() const;
  const Options& options() const { return options_; }

 private:
  Options options_;
  std::shared_ptr<const Source> source_;
  std::shared_ptr<ReadPoolState> state_;
  std::atomic<bool> cancelled_{false};  // read without the lock by inline reads
  std::atomic<bool> paused_{false};     // likewise
};

}  // namespace sluice::runtime
