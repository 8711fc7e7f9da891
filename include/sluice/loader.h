// Loader: runs a compiled plan on the CPU and yields batches.
//
//   auto plan = sluice::Plan::Load("train.plan", {{"DATA", "/data"}});
//   auto loader = sluice::Loader::Create(*plan, {});
//   while (true) {
//     auto batch = loader->Next();          // Result<std::optional<Batch>>
//     if (!batch) { /* error: path and reason */ }
//     if (!*batch) break;                   // end of epoch; the next Next() starts the next one
//     const sluice::TensorView* image = (*batch)->field("image");
//   }
//
// Execution (runtime/exec/: loader_config.h resolves the settings,
// loader_core.h schedules, sample_worker.h fills a slot, gpu_stage.h runs GPU
// stages): a tbb::task_arena of `threads` workers; each worker owns a fixed
// scratch (read buffer + decoded image) and runs fetch -> decode (the decoder
// the plan's decode step names; region of interest when that decoder can) ->
// fused kernel for one sample at a time, writing straight into the sample's
// slot of a batch buffer; at most
// min(threads, in_flight) samples are alive; batch buffers come from a fixed
// pool of prefetch + 1 buffers allocated at Create. Memory is bounded by
// construction: nothing grows with the dataset or the number of batches.
//
// Determinism: a batch depends only on (plan, seed, epoch, rank, world_size,
// batch index, and for the rest of an epoch restored as a new segment, the
// restored consumed set: LoaderState) — not on the thread count, the ordering
// mode or where the loader was restored. Random draws are keyed by (seed,
// epoch, dataset index, op id).
//
// Bad samples (unreadable, not decodable by the plan's decoder, truncated,
// absurd dimensions, too small for the chain) follow output.on_error:
//   skip:    the slot takes a replacement drawn from this rank's own order
//            (of the epoch, or of the segment a restore started: LoaderState)
//            at local position H(seed, epoch, position, k) mod N, for the
//            smallest attempt k = 1, 2, ... that decodes (at most 16 attempts).
//   replace: the slot takes dataset index (i + k) mod n for the smallest k >= 1
//            that decodes (at most 16 attempts).
//   fail:    Next() returns kCorruptData / kNotFound / kIo naming the path and
//            the reason, for the batch that holds the sample.
// Accounting (exact; see docs/reliability.md): Stats() and BadSamples()
// count what the batches Next() handed out or failed on met, in delivery
// order, so the counts do not depend on threads, prefetch or timing. A bad
// read is one failed read/decode (the same file met again, as a pad repeat
// or a replacement draw, is another bad read); a bad sample is a distinct
// dataset index found bad in an epoch (each file or member once per epoch).
// max_fraction (skip and replace): once an epoch's distinct bad samples
// exceed max_fraction * max(samples_per_rank, distinct samples read in the
// epoch), Next() returns kCorruptData instead of the batch that crossed it
// and keeps returning it until Restore(). Distinct bad samples never exceed
// the distinct samples read, so max_fraction 1.0 never fails.
// fail: Next() returns the error of the lowest slot of the first batch (in
// delivery order) holding a bad sample; the bad samples counted are those of
// the batches handed out up to and including that one.
//
// Epochs: Next() returns an empty optional once after the last batch of an
// epoch; the following call starts the next epoch. An epoch with no batches
// (fewer samples than world_size * batch_size with remainder: drop) yields
// only the empty optional.
//
// Thread safety: Next, State, Restore and Stats are called from one consumer
// thread (Stats may also be called from another thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/batch.h"
#include "sluice/plan.h"
#include "sluice/result.h"

namespace sluice {

namespace runtime {
class LoaderCore;
}

struct LoaderOptions {
  // Sharding; -1 = the plan's explicit sampling.rank/world_size, else RANK and
  // WORLD_SIZE from the environment (torchrun), else rank 0 of 1. Ranks get
  // rank-interleaved batches of the epoch's global order (LoaderState).
  // LOCAL_RANK (torchrun: the rank on this machine) does not change the data;
  // LocalRankFromEnvironment() reads it for choosing a device.
  int rank = -1;
  int world_size = -1;
  uint64_t epoch = 0;            // first epoch
  std::optional<uint64_t> seed;  // overrides sampling.seed
  // Knob overrides; -1 = the plan's value, where "auto" means: threads =
  // cpu_budget or the CPUs this process may use (its CPU affinity, capped
  // by its cgroup's CPU quota: a container's CPU limit); in_flight = threads (each worker
  // holds one sample, so an in_flight above threads changes nothing and one
  // below it leaves workers idle); prefetch = 2.
  // When threads, in_flight and prefetch all come from the auto rule (no
  // override here, `auto` in the spec, nothing written by `sluice tune`), the
  // loader also adjusts them online (runtime/exec/online_tuner.h): every
  // 0.5 s of Next() calls it observes images/s and the time the consumer
  // waited, and changes how many of its `threads` workers run and how many
  // of its prefetch buffers are filled ahead — never above what Create
  // allocated. Samples and batch contents do not depend on these knobs.
  // At most kMaxThreads, kMaxPrefetch and kMaxInFlight, from whichever
  // source (here, the spec, `sluice tune`): more is an error at Create.
  int threads = -1;
  int prefetch = -1;
  int in_flight = -1;
  static constexpr int kMaxThreads = 4096;   // also bounds output.cpu_budget
  static constexpr int kMaxPrefetch = 1024;  // batch buffers are allocated up front
  static constexpr int kMaxInFlight = 65536;
  // Overrides output.ordering: false = strict, true = relaxed.
  std::optional<bool> relaxed_ordering;
  // DCT-scaled decode (1/2, 1/4, 1/8) when a sample's crop window is at least
  // twice the resampled size along both axes. Faster, but not bit-identical to
  // the unpushed path (see tests/runtime/exec/pushdown_test.cc for the measured
  // deviation). Off by default; region-of-interest decode at full scale is
  // always on and bit-identical.
  bool dct_scaling = false;
  // Where the plan's GPU stages run (docs/gpu.md): nullopt = the plan's
  // output.device ("auto": the GPU when the plan has a GPU stage and a device
  // is usable, else the CPU with a warning); "cpu" forces the whole-chain CPU
  // kernels; "cuda" / "cuda:N" forces the GPU (Create fails with kUnsupported
  // when it is not usable).
  std::optional<std::string> device;
  // GPU path: Next() waits (host sync) until the batch's device work is done.
  // false: Next() returns once it is enqueued; wait on Batch::cuda_event().
  bool wait_for_device = true;
  // Non-empty: StartTrace(trace_path) before the workers start, so the trace
  // holds the first batches too (a StartTrace after Create misses the samples
  // already under way). Stop it with StopTrace (or by destroying the loader).
  std::string trace_path;
};

// A range [begin, end) of positions in an epoch's global order (below).
struct PositionRange {
  uint64_t begin = 0, end = 0;
  bool operator==(const PositionRange&) const = default;
};

// Where a job is in its data; restores on any number of ranks (elastic
// resume; docs/distributed.md).
//
// Global order. Each epoch has one global order O of its n samples (positions
// 0..n-1): shuffle: a permutation keyed by (seed, epoch); sequential: the
// identity; shard_shuffle: the outputs of the shuffle buffers of the ranks the
// epoch was started on, rank 0's first (runtime/sampling/epoch_sampler.h), so
// O depends on that world size, kept in order_world_size.
//
// Consumed set. A state names the positions of O the job consumed: [0,
// position) plus the `consumed` ranges. Everything else is the rest of the
// epoch: its unconsumed positions U (in O order, R of them) are dealt to the
// M ranks that continue it — a "segment" (a fresh epoch is the segment with
// nothing consumed, so these rules are also the ordinary sharding):
//   shuffle, sequential: U is cut into batches of batch_size; batch j goes to
//     rank j mod M (rank-interleaved batches: ranks in lockstep consume a
//     prefix of U, so a strict state is `position` alone);
//   shard_shuffle: rank r takes the contiguous run U[floor(r R / M),
//     floor((r + 1) R / M)) in order, so each rank stays on its own shards.
//   remainder drop: each rank yields floor(R / (M b)) batches (b the batch
//     size); the fewer than M * b positions of U left over are not delivered.
//   remainder pad: each rank yields ceil(R / (M b)) batches; a slot past the
//     real positions is the segment's padding slot q and repeats O[q mod n].
// Every rank yields the same number of batches; within an epoch no position
// is delivered twice (pad's repeats aside), across any number of restores on
// any world sizes.
//
// Two kinds of state:
//   complete (world_size == 0): every rank's consumption. With strict ordering
//     State() returns it, assuming the ranks deliver in lockstep (the same
//     number of batches each, as a DDP loop does): every rank returns the same
//     state, so saving rank 0's is enough. A loader with one rank returns it
//     in both orderings. MergeStates() returns one.
//   rank (world_size = M > 0, relaxed ordering with M > 1): what rank `rank`
//     of M delivered: the segment's start (position, consumed,
//     order_world_size: what was consumed when the segment began) plus its
//     own progress: its first rank_position samples, and its batches
//     rank_ahead (ascending, after rank_position / b) delivered early.
//     MergeStates(the M ranks' states) makes the complete state.
// Restore(complete state) works on any rank of any world size; when the
// consumed set is whole batches of a fresh epoch on this world size with the
// same count left on every rank (a same-size resume), the loader continues
// that epoch exactly: the same batches with the same Batch::index(); else the
// rest is dealt as a new segment (Batch::index() then counts from
// floor(consumed / (M b))). Restore(rank state) works only on the same rank
// of the same world size.
//
// An epoch's end: a state taken after the last batch is {epoch + 1, nothing
// consumed}, which does not depend on the world size.
//
// Serializable: ToString() gives "sluice-state v2 epoch=E position=P
// spec=HASH samples=N batch=B", then " consumed=B1-E1,B2-E2,..." when
// consumed is not empty, " order_world=W" when order_world_size > 0, and for a
// rank state " rank=R/M rank_position=Q" and " rank_ahead=I,J,..." when not
// empty.
struct LoaderState {
  uint64_t epoch = 0;
  uint64_t position = 0;  // O positions [0, position) consumed
  std::string spec_hash;
  // Further consumed ranges of O: ascending, disjoint, not touching, each
  // begin > position.
  std::vector<PositionRange> consumed;
  // shard_shuffle: the world size O was built for; 0 while nothing is
  // consumed (the next segment's world size then builds it) and for shuffle
  // and sequential (their O does not depend on it).
  int order_world_size = 0;
  uint64_t samples = 0;     // n: samples in the epoch (checked by Restore)
  uint64_t batch_size = 0;  // b (checked by Restore)
  // Rank state only (see above); world_size 0 = complete.
  int world_size = 0;
  int rank = 0;
  uint64_t rank_position = 0;        // samples of the rank's segment order
  std::vector<uint64_t> rank_ahead;  // the rank's batch indices in its segment
  bool complete() const { return world_size == 0; }
  // Positions consumed: position + the lengths of `consumed` (a complete
  // state; a rank state's segment start).
  uint64_t consumed_count() const;
  std::string ToString() const;
  // Errors: kInvalidArgument for text not in the format above; kVersionMismatch
  // for "sluice-state v1" (rank-local positions of an older release).
  static Result<LoaderState> FromString(const std::string& text);
  bool operator==(const LoaderState&) const = default;
};

// The complete state of a job from its ranks' State()s: the union of what
// each delivered. Takes either complete states, which must be equal (a strict
// job in lockstep: every rank's is the same), or rank states of one segment
// (same epoch, world size M and segment start), exactly one of each rank
// 0..M-1. Errors: kInvalidArgument naming the first mismatch (another spec,
// epoch, samples or batch size; a rank missing or twice; complete states that
// differ, i.e. ranks not in lockstep).
Result<LoaderState> MergeStates(const std::vector<LoaderState>& states);

// torchrun's LOCAL_RANK (the process's rank on its machine, e.g. to pick
// cuda:LOCAL_RANK): 0 when unset; kInvalidArgument when not a non-negative
// integer.
Result<int> LocalRankFromEnvironment();

// One bad sample (or, in LoaderStats::last_bad, one bad read).
struct BadSample {
  std::string path;    // how the source names it: a file path, or SHARD:KEY
  std::string reason;  // the error message, without the path in front
  uint64_t epoch = 0;
  uint64_t index = 0;  // dataset index
};

struct LoaderStats {
  uint64_t samples = 0;  // samples written into delivered batches
  uint64_t batches = 0;  // batches delivered
  double seconds = 0;    // since Create
  double images_per_second = 0;
  // Batch latency: first sample started -> last sample written, seconds.
  double latency_p50 = 0, latency_p99 = 0, latency_max = 0;
  double consumer_wait_seconds = 0;  // time spent blocked inside Next()
  // Distinct bad samples: each dataset index once per epoch it was found bad
  // in, summed over epochs (see "Accounting" above).
  uint64_t bad_samples = 0;
  uint64_t bad_reads = 0;              // every failed read/decode (visits)
  uint64_t skipped = 0, replaced = 0;  // bad reads passed over under skip / replace
  std::vector<BadSample> last_bad;     // the most recent few bad reads (at most 8)
  // Per-stage busy time summed over workers, seconds.
  double read_seconds = 0, decode_seconds = 0, kernel_seconds = 0;
  int threads = 0, in_flight = 0, pool_buffers = 0;  // in_flight: samples alive at once
  int prefetch = 0;            // batches filled ahead (the online tuner's current value)
  bool online_tuning = false;  // knobs adjusted online (see LoaderOptions)
  int64_t tuner_moves = 0;     // knob changes the online tuner made
  int64_t batch_bytes = 0;     // one batch buffer
  // Where the fused GPU stages run: "cpu" or "cuda:N".
  std::string device = "cpu";
  // Conditions the loader worked around (e.g. a plan with GPU stages on a
  // machine without a CUDA device: the CPU path is used). Also printed once
  // to stderr.
  std::vector<std::string> warnings;
  // Remote sources (tar_shards over s3://, https://, http://, file://;
  // docs/remote.md); all 0 / false for local sources.
  bool remote = false;
  uint64_t remote_requests = 0;       // requests sent (attempts and hedges included)
  uint64_t remote_bytes_fetched = 0;  // body bytes received
  uint64_t remote_retries = 0, remote_hedges = 0, remote_hedge_wins = 0;
  uint64_t remote_timeouts = 0, remote_failures = 0;
  double remote_latency_p50 = 0, remote_latency_p99 = 0;  // per request, seconds
  uint64_t cache_hits = 0, cache_misses = 0;              // local shard cache
  // Waits for another process's download (or the cache's directory lock)
  // that ran past remote.deadline_s: the shard was read past the cache.
  uint64_t cache_lock_timeouts = 0;
  // Shards read once past the cache, not kept (no room beside the shards in
  // use, larger than max_bytes, a lock timeout, a full or read-only disk);
  // cache_no_space counts those the cache's disk refused (ENOSPC, EDQUOT...).
  uint64_t cache_passthrough = 0, cache_no_space = 0;
  uint64_t coalesced_requests = 0;  // range requests that served several samples
  uint64_t coalesced_samples = 0;   // samples read from them
  uint64_t shards_streamed = 0;     // whole-shard streams started (read-ahead)
  int read_ahead = 0;               // shards streamed ahead now (auto grows on stalls)
  uint64_t read_ahead_stalls = 0;   // reads that waited for a shard being read ahead
};

class Loader {
 public:
  // Opens the plan's source, builds the sampler and allocates the pools.
  // Errors: kInvalidArgument (bad options, a batch field no chain or label
  // writes), kUnsupported (a plan without a fused CPU kernel per image field;
  // a forced `cuda` device that is not usable: no driver, no such device),
  // kInvalidSpec (order: shard_shuffle with a source that has no shards),
  // and the source's errors (kNotFound for a missing dataset directory).
  static Result<Loader> Create(const Plan& plan, const LoaderOptions& options = {});

  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;
  // Cancels outstanding work, waits for running tasks, frees the pool once no
  // Batch refers to it.
  ~Loader();

  // The next batch; empty optional at the end of an epoch (see above).
  Result<std::optional<Batch>> Next();
  // Next(), waiting at most `wait`: when no batch is ready by then, an empty
  // optional with *timed_out set (not an epoch's end; call again). For a
  // consumer that must notice something else while it waits (the Python
  // module checks for Ctrl-C between calls).
  Result<std::optional<Batch>> NextWithin(std::chrono::milliseconds wait, bool* timed_out);
  // True when every batch of the current epoch has been handed out and Next()
  // has not yet reported the epoch's end (its next call will, once). State()
  // already names the following epoch then. A loop that stops after exactly
  // batches_per_epoch() batches (zip with a step counter) leaves it so.
  bool epoch_end_pending() const;

  // Where the loader is (LoaderState: complete with strict ordering or one
  // rank, else this rank's state).
  LoaderState State() const;
  // Continues from `state` (see LoaderState): cancels in-flight work and
  // restarts there. Errors: kInvalidArgument when the spec hash, sample count
  // or batch size differ, the consumed set is not within the epoch, or a rank
  // state is for another rank or world size.
  Status Restore(const LoaderState& state);

  LoaderStats Stats() const;
  // The distinct bad samples of `epoch` found so far (all of them once the
  // epoch ended), each once with the reason it was first found bad, sorted by
  // dataset index. Available for the loader's current epoch and the one
  // before it (so an epoch's list can be read after Next() returned its end);
  // kInvalidArgument for any other epoch. After Restore() into an epoch the
  // list keeps what was found and adds what the batches handed out since meet.
  // Not for the hot path: it copies the list and names each sample.
  Result<std::vector<BadSample>> BadSamples(uint64_t epoch) const;

  uint64_t batches_per_epoch() const;
  int64_t batch_size() const;
  size_t dataset_size() const;

  // Tracing (docs/observability.md): from StartTrace until StopTrace the
  // loader records Chrome trace-event JSON (Perfetto UI, chrome://tracing):
  // one track per worker loop (sample, read, decode, kernel spans with the
  // dataset index and path; device copy on the GPU path), the consumer's
  // track (next, wait, device sync), batch spans from the first sample
  // claimed to the last written, and counters (in-flight samples, batches
  // filling and ready). StopTrace writes the file. Each track keeps at most
  // `max_events_per_thread` events (0 = 65536, 56 bytes each, allocated at
  // StartTrace; the scheduler's counter track 4 times that); later events of a full track are
  // dropped, and StopTrace returns how many were. Off, the loader pays one relaxed atomic load per
  // span. Destroying the loader stops a running trace and writes the file.
  // Errors: kIo (the file cannot be opened or written), kInvalidArgument
  // (StartTrace while tracing, StopTrace while not). Call from the consumer
  // thread.
  Status StartTrace(const std::string& path, size_t max_events_per_thread = 0);
  Result<uint64_t> StopTrace();
  // The most recent batch latencies (seconds, first sample started -> last
  // sample written; at most 4096, oldest first is not guaranteed), for
  // histograms. Not for the hot path (copies).
  std::vector<double> BatchLatencies() const;

  // Range-for over the rest of the current epoch; iteration stops at the end
  // of the epoch or at the first error (see error()). Begun when the epoch's
  // end is pending (epoch_end_pending()), it runs over the next epoch instead
  // of over nothing.
  class Iterator;
  Iterator begin();
  Iterator end();
  const std::optional<Error>& error() const { return iter_error_; }

 private:
  explicit Loader(std::shared_ptr<runtime::LoaderCore> core);
  std::shared_ptr<runtime::LoaderCore> core_;
  std::optional<Error> iter_error_;
};

class Loader::Iterator {
 public:
  Batch& operator*() { return *current_; }
  Batch* operator->() { return &*current_; }
  Iterator& operator++() {
    Advance();
    return *this;
  }
  bool operator==(const Iterator& other) const { return done() == other.done(); }

 private:
  friend class Loader;
  Iterator(Loader* loader) : loader_(loader) {}
  bool done() const { return loader_ == nullptr || !current_.has_value(); }
  void Advance();
  Loader* loader_ = nullptr;
  std::optional<Batch> current_;
};

}  // namespace sluice
