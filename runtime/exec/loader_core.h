// The engine behind sluice::Loader (include/sluice/loader.h): the scheduler.
// It owns the batch pool, schedules the per-sample worker over epochs, hands
// out batches, restores and keeps the statistics. The parts it drives live
// beside it:
//   loader_config.h  the configuration, resolved once from plan + options +
//                    environment (the only reader of the plan's settings);
//   sample_worker.h  read -> decode (the plan's decoder) -> kernels -> slot;
//   gpu_stage.h      pinned buffers, host-to-device copies, batch kernels.
//
// Scheduling: samples are numbered by their position in the current epoch
// (rank-local). A worker task takes the next position under the lock; the
// first position of a batch claims a free pool buffer (no free buffer = no work
// until the consumer releases one). Each of the W = min(threads, in_flight)
// workers owns one Scratch (read buffer + decoded image, grown only when a
// larger file or image arrives, never per sample) and loops take -> process ->
// complete until no work is left, then goes idle; Pump() re-launches idle
// workers (tbb::task_arena::enqueue) when work appears (a buffer freed, a new
// epoch, Restore). Only one epoch is scheduled at a time.
//
// Buffer states: kFree -> kFilling (claimed by a batch's first sample) ->
// kReady (its last sample completed; on the GPU path kTransferring until the
// completing worker has launched its device work) -> kHeld (a Batch refers to
// it) -> kFree (the Batch is destroyed: Release). On the GPU path a buffer is
// refilled only after its event was waited on (GpuStage::WaitBuffer).
//
// Shutdown: stopping_ stops new work and the read pool is cancelled (a worker
// waiting on a read, even a stuck one, returns at once: read_pool.h); the
// destructor of Loader waits until every worker task that has started has
// returned, so it takes at most the workers' non-read work on the samples they
// hold (with source.read_timeout 0, also a stuck read). It does not wait for
// worker tasks that are queued but not started: TBB runs them only when a
// thread is free, and another loader in the process (a validation loader next
// to the training one) may hold every TBB thread in its own long worker tasks.
// Such a task runs after the loader is gone; it checks the shared TaskGate
// first and returns without touching the loader. Batches still held
// keep the core (and its buffers) alive through shared_ptr; their release is
// then a no-op besides freeing memory with the last reference.
//
// No exception escapes a worker: its body is wrapped, and an exception becomes
// a fatal kInternal error returned by the next Next().
//
// Bad samples: a completing job appends its bad reads to its buffer (the bad
// path's only allocation: the reason text); DeliverLocked hands them, sorted
// by (slot, attempt), to the BadSampleLedger when the batch is handed out or
// failed on, and checks on_error.max_fraction there. Counting at delivery
// makes every count independent of threads, prefetch and timing.
//
// Warnings (GPU fallback, reference fields; LoaderConfig::warnings) are kept
// in Stats().warnings and printed to stderr once per process.
#pragma once

#include <tbb/task_arena.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/decode/decoder.h"
#include "runtime/exec/bad_sample_ledger.h"
#include "runtime/exec/gpu_stage.h"
#include "runtime/exec/loader_config.h"
#include "runtime/exec/online_tuner.h"
#include "runtime/exec/read_pool.h"
#include "runtime/exec/sample_worker.h"
#include "runtime/exec/tbb_parallelism.h"
#include "runtime/metrics/latency_recorder.h"
#include "runtime/sampling/epoch_sampler.h"
#include "runtime/sources/source.h"
#include "runtime/trace/trace_recorder.h"
#include "sluice/loader.h"

namespace sluice::runtime {

class LoaderCore : public std::enable_shared_from_this<LoaderCore> {
 public:
  static Result<std::shared_ptr<LoaderCore>> Create(const Plan& plan, const LoaderOptions& options);
  ~LoaderCore();
  LoaderCore(const LoaderCore&) = delete;
  LoaderCore& operator=(const LoaderCore&) = delete;

  // Stops scheduling and waits until every worker task has returned.
  void Shutdown();

  // Loader::Next; with `until`, Loader::NextWithin (returns an empty optional
  // with *timed_out set when nothing was ready by then).
  Result<std::optional<Batch>> Next(
      std::optional<std::chrono::steady_clock::time_point> until = std::nullopt,
      bool* timed_out = nullptr);
  LoaderState State() const;
  Status Restore(const LoaderState& state);
  LoaderStats Stats() const;
  Result<std::vector<BadSample>> BadSamples(uint64_t epoch) const;
  // Every batch of a non-empty epoch handed out, its end not yet reported by
  // Next() (Loader::epoch_end_pending).
  bool EpochEndPending() const;
  // Called by ~Batch: the buffer goes back to the pool.
  void Release(int buffer);

  // Of a fresh epoch (the current one may be a shorter segment after a
  // restore: LoaderState).
  uint64_t batches_per_epoch() const { return sampler_->batches_per_rank(); }
  int64_t batch_size() const { return config_.batch_size; }
  size_t dataset_size() const { return source_->size(); }
  // Tracing (trace_recorder.h; called by the consumer thread). Shutdown stops
  // a running trace and writes its file.
  Status StartTrace(const std::string& path, size_t max_events_per_track);
  Result<uint64_t> StopTrace();
  std::vector<double> BatchLatencies() const;

  static constexpr int kMaxAttempts = Outcome::kMaxAttempts;
  // Seconds of Next() calls between two observations of the online tuner.
  static constexpr double kTuneInterval = 0.5;
  // A Next() that begins at most this long after a timed-out NextWithin
  // continues its wait: one "next" trace span.
  static constexpr std::chrono::milliseconds kSliceGap{50};

 private:
  using Clock = std::chrono::steady_clock;
  enum class BufferState { kFree, kFilling, kTransferring, kReady, kHeld };
  // One failed read/decode met while filling a slot.
  struct BadRead {
    int64_t slot = 0;
    int attempt = 0;  // order within the slot
    uint64_t index = 0;
    std::string reason;  // without the sample's name in front
  };
  struct PoolBuffer {
    uint8_t* data = nullptr;  // 64-byte aligned, config_.buffer_bytes
    BufferState state = BufferState::kFree;
    uint64_t epoch = 0, index = 0;
    int64_t remaining = 0;
    Clock::time_point start;
    // The lowest failing slot's error (fail, or attempts exhausted).
    std::optional<Error> error;
    int64_t error_slot = -1;
    std::vector<BadRead> bad;       // its slots' bad reads, in completion order
    std::vector<uint64_t> samples;  // dataset index per slot (sized once)
  };

  LoaderCore() = default;
  // Opens the source, the sampler and the decoder the config names.
  Status OpenInputs();
  // Allocates the pool (pinned through the GPU stage on the GPU path), the
  // scratches and the task arena.
  Status AllocatePools(std::shared_ptr<cuda::CudaDevice> device);
  void PumpLocked();
  bool WorkAvailableLocked() const;
  // Feeds the online tuner one interval's images/s and consumer wait (every
  // kTuneInterval seconds) and applies its caps.
  void ObserveLocked(Clock::time_point now);
  bool TakeJobLocked(Job& job);
  // Claims free buffer for the batch starting at sched_pos_; false (and
  // fatal_ set) when waiting for its pending device work failed.
  bool ClaimBufferLocked();
  // Source::WillRead for the batch being claimed and hint_window_ beyond.
  void HintReadsLocked();
  void WorkerLoop(int worker);
  // Runs one job outside the lock; exceptions become outcome.fatal.
  void ProcessGuarded(const Job& job, Scratch& scratch, Outcome& outcome) const;
  // Completes the job under the lock and, when it completed a batch bound for
  // the GPU, launches it outside the lock.
  void CompleteAndLaunch(const Job& job, Outcome& outcome, std::unique_lock<std::mutex>& lock);
  // Records the job's outcome; true when it completed a batch that must now
  // be launched on the GPU (outside the lock).
  bool CompleteLocked(const Job& job, Outcome& outcome);
  // Appends the job's bad reads to its buffer.
  void AddBadReadsLocked(const Job& job, const Outcome& outcome);
  // Counts buffer `b`'s bad reads and reads (Next() hands it out or fails
  // on it); an error when the epoch's distinct bad samples now exceed
  // on_error.max_fraction (skip and replace).
  Status AccountLocked(PoolBuffer& b);
  // Next() once a ready buffer of the epoch was picked.
  Result<std::optional<Batch>> DeliverLocked(int pick, std::unique_lock<std::mutex>& lock);
  // The ready buffer Next() hands out next (strict: the next batch index;
  // relaxed: the lowest ready one), or -1.
  int PickReadyLocked() const;
  // Starts the segment of `epoch` after `consumed` (empty: the whole epoch);
  // its batches [0, first_batches) and `ahead` (checked by Restore) count as
  // delivered and are not produced again. Batch::index() = segment batch +
  // index_offset.
  void StartEpochLocked(uint64_t epoch, const ConsumedSet& consumed = {},
                        uint64_t first_batches = 0, const std::vector<uint64_t>& ahead = {},
                        uint64_t index_offset = 0);
  // Moves sched_pos_ past batches already delivered (only a restored relaxed
  // state has any ahead of it). Call at a batch boundary.
  void SkipDeliveredBatchesLocked();
  Status CheckRestoreState(const LoaderState& state) const;
  // The consumed set a complete or rank state names (checked to lie in the epoch).
  Result<ConsumedSet> StateConsumed(const LoaderState& state) const;
  // When `consumed` is whole batches of a fresh epoch on this world size,
  // the same number on every rank: this rank's delivered batches there, so
  // the epoch goes on exactly as if never interrupted. With strict ordering
  // on several ranks, only when they are every rank's first batches: a
  // strict State() names the other ranks' batches by that prefix alone, so
  // batches delivered out of order (a merged relaxed job's) start a new
  // segment instead. Every rank decides alike, from the same state.
  std::optional<std::vector<uint64_t>> FreshEpochBatches(const ConsumedSet& consumed) const;
  void WaitIdleLocked(std::unique_lock<std::mutex>& lock);
  Batch MakeBatchLocked(int buffer);
  // Trace counters: in-flight samples and batches filling / ready (only when
  // tracing is on).
  // Records the "next" span a timed-out NextWithin left open, if any.
  void CloseOpenWaitLocked();
  void TraceCountersLocked(Clock::time_point now);

  // Immutable after Create.
  std::unique_ptr<Plan> plan_;  // the config's fields point into it
  LoaderConfig config_;
  // Shared with the read pool's I/O threads: a read stuck past the loader's
  // life keeps the source alive (read_pool.h).
  std::shared_ptr<const Source> source_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<ReadPool> reads_;  // every source read, with its deadline
  std::optional<EpochSampler> sampler_;
  std::optional<SampleWorker> worker_;
  // TBB sizes its worker pool for hardware_concurrency - 1 workers (it expects
  // the calling thread to join); our workers are all TBB workers, so the
  // loader raises the process-wide limit to threads + 1 while it lives; with
  // several loaders alive the largest request holds (tbb_parallelism.h).
  std::unique_ptr<ParallelismLease> parallelism_;
  std::unique_ptr<tbb::task_arena> arena_;
  // Shared with every queued worker task: lets Shutdown wait for the started
  // ones only (see the file comment).
  struct TaskGate {
    std::mutex mutex;
    std::condition_variable cv;
    bool closed = false;  // set by Shutdown; a task starting later returns at once
    int running = 0;      // tasks inside WorkerLoop
  };
  std::shared_ptr<TaskGate> gate_ = std::make_shared<TaskGate>();
  std::vector<Scratch> scratch_;  // one per worker
  Clock::time_point created_;
  std::unique_ptr<GpuStage> gpu_;         // GPU path, else null
  std::unique_ptr<TraceRecorder> trace_;  // always present; records only when started

  // Guarded by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<PoolBuffer> buffers_;
  std::vector<int> idle_workers_;
  int active_workers_ = 0;
  bool stopping_ = false;
  std::optional<Error> fatal_;
  uint64_t epoch_ = 0;
  std::optional<EpochOrder> order_;  // of epoch_; read by workers only while they hold jobs
  uint64_t sched_pos_ = 0;           // next position to schedule
  uint64_t hinted_until_ = 0;        // positions before it were announced (WillRead)
  uint64_t hint_window_ = 0;         // Source::ReadHintWindow()
  bool wants_hints_ = false;         // Source::WantsReadHints()
  std::vector<uint64_t> hint_scratch_;
  int fill_buffer_ = -1;
  uint64_t seg_batches_ = 0;   // batches of the current segment (order_)
  uint64_t index_offset_ = 0;  // added to segment batch numbers for Batch::index()
  uint64_t deliver_next_ = 0;  // strict: next batch index to hand out
  uint64_t delivered_in_epoch_ = 0;
  std::vector<bool> delivered_;  // relaxed: which batches of the epoch were handed out
  // Created with the sampler.
  std::optional<BadSampleLedger> ledger_;
  // Stats.
  uint64_t samples_ = 0, batches_ = 0, bad_reads_ = 0, skipped_ = 0, replaced_ = 0;
  int64_t read_ns_ = 0, decode_ns_ = 0, kernel_ns_ = 0;
  int64_t in_flight_samples_ = 0;  // jobs taken and not yet completed (trace counter)
  double wait_seconds_ = 0;
  // The consumer's wait that a timed-out NextWithin left open (its "next"
  // span continues in the call that follows within kSliceGap; Next()).
  std::optional<Clock::time_point> open_wait_begin_;
  Clock::time_point open_wait_end_;
  // Online tuning (auto knobs only): the caps the workers and the buffer
  // claims obey; equal to config_.workers / config_.prefetch when tuning is off.
  std::optional<OnlineTuner> online_;
  int worker_cap_ = 1, prefetch_cap_ = 1;
  Clock::time_point tune_since_;
  uint64_t tune_samples_ = 0;
  double tune_wait_ = 0;
  LatencyRecorder latency_;
  std::vector<BadSample> last_bad_;
};

}  // namespace sluice::runtime
