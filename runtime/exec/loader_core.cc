// LoaderCore, the scheduler: see loader_core.h for the scheduling and
// shutdown contract.
#include "runtime/exec/loader_core.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>

#include "common/log.h"
#include "runtime/kernels/kernel_library.h"
#include "runtime/plan/plan_internal.h"
#include "runtime/sources/source_registry.h"

namespace sluice::runtime {
namespace {

Error Err(ErrorCode code, std::string message, std::string hint = {}) {
  Error e;
  e.code = code;
  e.message = std::move(message);
  e.hint = std::move(hint);
  return e;
}

void PrintWarningsOnce(const std::vector<std::string>& warnings) {
  if (warnings.empty()) return;
  static std::atomic<bool> printed{false};
  if (printed.exchange(true)) return;
  for (const std::string& w : warnings) log::Warn("", w);
}

}  // namespace

// ---- Create and shutdown ----

Result<std::shared_ptr<LoaderCore>> LoaderCore::Create(const Plan& plan,
                                                       const LoaderOptions& options) {
  std::shared_ptr<LoaderCore> core(new LoaderCore());
  core->plan_ = std::make_unique<Plan>(plan);
  std::shared_ptr<cuda::CudaDevice> device;
  const LoaderEnvironment env = LoaderEnvironment::FromProcess([&device](int ordinal) -> Status {
    auto opened = cuda::CudaDevice::Open(ordinal);
    if (!opened) return std::unexpected(opened.error());
    device = std::move(*opened);
    return Ok();
  });
  auto config = ResolveLoaderConfig(*core->plan_, options, env);
  if (!config) return std::unexpected(config.error());
  core->config_ = std::move(*config);
  const LoaderConfig& c = core->config_;
  PrintWarningsOnce(c.warnings);
  SLUICE_RETURN_IF_ERROR(core->OpenInputs());
  core->worker_cap_ = c.workers;
  core->prefetch_cap_ = c.prefetch;
  if (c.online_tuning) {
    // Starts at the maxima (all workers, full prefetch) and gives back what the
    // trainer does not need; never above what the pools below allocate.
    core->online_.emplace(OnlineTuner::Limits{.max_workers = c.workers, .max_prefetch = c.prefetch},
                          c.workers, c.prefetch);
  }
  SLUICE_RETURN_IF_ERROR(core->AllocatePools(std::move(device)));
  if (!options.trace_path.empty()) SLUICE_RETURN_IF_ERROR(core->StartTrace(options.trace_path, 0));
  std::unique_lock lock(core->mutex_);
  core->StartEpochLocked(c.first_epoch);
  core->PumpLocked();
  return core;
}

Status LoaderCore::OpenInputs() {
  auto source = OpenSource(config_.source_format, config_.source_params);
  if (!source) return std::unexpected(source.error());
  (*source)->SetAccessPattern(config_.sampler.order == SampleOrder::kShuffle
                                  ? Source::AccessPattern::kRandomAccess
                                  : Source::AccessPattern::kShardSequential);
  source_ = std::shared_ptr<const Source>(std::move(*source));
  hint_window_ = source_->ReadHintWindow();
  wants_hints_ = source_->WantsReadHints();
  config_.sampler.num_samples = source_->size();
  if (config_.sampler.order == SampleOrder::kShardShuffle) {
    config_.sampler.shard_starts = source_->ShardStarts();
    if (config_.sampler.shard_starts.empty() && source_->size() > 0) {
      return std::unexpected(
          Err(ErrorCode::kInvalidSpec,
              config_.where + ": order: shard_shuffle needs a sharded source, and " +
                  config_.source_format + " has no shards",
              "use order: shuffle (a global shuffle with random access), or pack the data "
              "into shards with `sluice pack` and read them with the tar_shards source"));
    }
  }
  auto sampler = EpochSampler::Create(config_.sampler);
  if (!sampler) return std::unexpected(sampler.error());
  sampler_.emplace(std::move(*sampler));
  ledger_.emplace(source_->size(), config_.first_epoch);
  auto decoder = MakeDecoder(config_.decode_op, config_.decode_params);
  if (!decoder) {
    Error e = decoder.error();
    e.message = config_.where + ": " + e.message;
    return std::unexpected(std::move(e));
  }
  decoder_ = std::move(*decoder);
  // One I/O thread per worker that may read at once (config_.workers loops).
  reads_ = std::make_unique<ReadPool>(
      source_, ReadPool::Options{.timeout_s = config_.read_timeout,
                                 .threads = config_.workers,
                                 .max_stuck = ReadPool::DefaultMaxStuck(config_.workers)});
  trace_ = std::make_unique<TraceRecorder>(
      config_.workers, [source = source_](uint64_t index) { return source->SampleName(index); });
  worker_.emplace(config_, *source_, *decoder_, *reads_, trace_.get());
  return Ok();
}

Status LoaderCore::AllocatePools(std::shared_ptr<cuda::CudaDevice> device) {
  const LoaderConfig& c = config_;
  scratch_.resize(static_cast<size_t>(c.workers));
  buffers_.resize(static_cast<size_t>(c.pool_buffers()));
  if (c.gpu.use) {
    auto stage = GpuStage::Create(std::move(device), c, plan_->kernels());
    if (!stage) return std::unexpected(stage.error());
    gpu_ = std::move(*stage);
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    PoolBuffer& b = buffers_[i];
    if (gpu_) {
      b.data = gpu_->host(static_cast<int>(i));
    } else {
      b.data = static_cast<uint8_t*>(std::aligned_alloc(64, c.buffer_bytes));
      if (b.data == nullptr) {
        return MakeError(ErrorCode::kInternal, "cannot allocate a batch buffer of " +
                                                   std::to_string(c.buffer_bytes) + " bytes");
      }
    }
    b.samples.assign(static_cast<size_t>(c.batch_size), 0);
    b.bad.reserve(static_cast<size_t>(c.batch_size));
  }
  for (int w = c.workers - 1; w >= 0; --w) idle_workers_.push_back(w);
  parallelism_ = std::make_unique<ParallelismLease>(static_cast<size_t>(c.threads) + 1);
  arena_ = std::make_unique<tbb::task_arena>(c.threads, 0);
  created_ = Clock::now();
  last_bad_.reserve(8);
  return Ok();
}

LoaderCore::~LoaderCore() {
  // On the GPU path the stage owns the (pinned) buffers and waits for its
  // stream before freeing them.
  if (gpu_) return;
  for (PoolBuffer& b : buffers_) std::free(b.data);
}

void LoaderCore::Shutdown() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  if (reads_) reads_->Cancel();         // never takes mutex_
  if (source_) source_->CancelReads();  // remote requests in flight return promptly
  lock.unlock();
  // Started tasks see stopping_ and return after their current sample; queued
  // ones find the gate closed whenever TBB runs them (the file comment).
  {
    std::unique_lock gate(gate_->mutex);
    gate_->closed = true;
    gate_->cv.wait(gate, [&] { return gate_->running == 0; });
  }
  if (trace_ && trace_->running()) {
    if (auto stopped = trace_->Stop(); !stopped) {
      std::cerr << "sluice: warning: " << stopped.error().ToString() << "\n";
    }
  }
}

Status LoaderCore::StartTrace(const std::string& path, size_t max_events_per_track) {
  return trace_->Start(path, max_events_per_track);
}

Result<uint64_t> LoaderCore::StopTrace() {
  {
    std::unique_lock lock(mutex_);
    CloseOpenWaitLocked();  // a sliced wait the caller gave up: its span so far
  }
  return trace_->Stop();
}

void LoaderCore::CloseOpenWaitLocked() {
  if (!open_wait_begin_) return;
  trace_->Span(TraceRecorder::kConsumerTrack, "next", *open_wait_begin_, open_wait_end_);
  open_wait_begin_.reset();
}

std::vector<double> LoaderCore::BatchLatencies() const {
  std::unique_lock lock(mutex_);
  return latency_.Values();
}

void LoaderCore::TraceCountersLocked(Clock::time_point now) {
  if (!trace_->on()) return;
  int64_t filling = 0, ready = 0;
  for (const PoolBuffer& b : buffers_) {
    filling += b.state == BufferState::kFilling || b.state == BufferState::kTransferring;
    ready += b.state == BufferState::kReady;
  }
  trace_->Counter("in-flight samples", now, in_flight_samples_);
  trace_->Counter("batches filling", now, filling);
  trace_->Counter("batches ready (queue)", now, ready);
}

void LoaderCore::WaitIdleLocked(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [&] { return active_workers_ == 0; });
}

// ---- Epochs ----

void LoaderCore::StartEpochLocked(uint64_t epoch, const ConsumedSet& consumed,
                                  uint64_t first_batches, const std::vector<uint64_t>& ahead,
                                  uint64_t index_offset) {
  epoch_ = epoch;
  order_.emplace(sampler_->Segment(epoch, consumed));
  const uint64_t b = static_cast<uint64_t>(config_.batch_size);
  seg_batches_ = order_->size() / b;
  index_offset_ = index_offset;
  fill_buffer_ = -1;
  delivered_.assign(seg_batches_, false);
  deliver_next_ = std::min(first_batches, seg_batches_);
  delivered_in_epoch_ = deliver_next_;
  for (uint64_t k = 0; k < deliver_next_; ++k) delivered_[k] = true;
  for (uint64_t k : ahead) {
    if (k < seg_batches_ && !delivered_[k]) {
      delivered_[k] = true;
      ++delivered_in_epoch_;
    }
  }
  while (deliver_next_ < seg_batches_ && delivered_[deliver_next_]) ++deliver_next_;
  sched_pos_ = deliver_next_ * b;
  hinted_until_ = sched_pos_;
  SkipDeliveredBatchesLocked();
  ledger_->StartEpoch(epoch);
}

void LoaderCore::SkipDeliveredBatchesLocked() {
  const uint64_t b = static_cast<uint64_t>(config_.batch_size);
  // Stops at samples_per_rank() at the latest (delivered_ has one entry per batch).
  while (sched_pos_ / b < delivered_.size() && delivered_[sched_pos_ / b]) sched_pos_ += b;
}

// ---- Scheduling ----

bool LoaderCore::WorkAvailableLocked() const {
  if (stopping_ || fatal_) return false;
  if (sched_pos_ >= order_->size()) return false;
  if (sched_pos_ % static_cast<uint64_t>(config_.batch_size) != 0) return true;
  // A new batch needs a free buffer, and at most prefetch_cap_ + 1 buffers in
  // the loader's hands (filling, transferring or ready; the pool has
  // prefetch + 1, so with the cap at prefetch this is no limit).
  int loader_owned = 0;
  bool any_free = false;
  for (const PoolBuffer& b : buffers_) {
    if (b.state == BufferState::kFree) any_free = true;
    if (b.state == BufferState::kFilling || b.state == BufferState::kTransferring ||
        b.state == BufferState::kReady) {
      ++loader_owned;
    }
  }
  return any_free && loader_owned < prefetch_cap_ + 1;
}

bool LoaderCore::ClaimBufferLocked() {
  int free = -1;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].state == BufferState::kFree) {
      free = static_cast<int>(i);
      break;
    }
  }
  PoolBuffer& buf = buffers_[static_cast<size_t>(free)];
  if (gpu_) {
    // A copy from this buffer may still be pending (async hand-off, or a
    // batch abandoned by Restore): wait before its slots are rewritten.
    if (Status st = gpu_->WaitBuffer(free); !st && !fatal_) {
      fatal_ = st.error();
      cv_.notify_all();
      return false;
    }
  }
  buf.state = BufferState::kFilling;
  buf.epoch = epoch_;
  buf.index = sched_pos_ / static_cast<uint64_t>(config_.batch_size);
  buf.remaining = config_.batch_size;
  buf.start = Clock::now();
  trace_->Async(true, "batch", buf.start, buf.epoch * batches_per_epoch() + buf.index,
                static_cast<int64_t>(buf.epoch), static_cast<int64_t>(buf.index));
  buf.error.reset();
  buf.error_slot = -1;
  buf.bad.clear();
  fill_buffer_ = free;
  if (wants_hints_) HintReadsLocked();
  return true;
}

void LoaderCore::HintReadsLocked() {
  // Announces the positions from this batch to hint_window_ past its end,
  // each once per epoch (a remote source plans its requests from them).
  const uint64_t end = std::min<uint64_t>(
      order_->size(), sched_pos_ + static_cast<uint64_t>(config_.batch_size) + hint_window_);
  const uint64_t first = std::max(hinted_until_, sched_pos_);
  if (first >= end) return;
  hint_scratch_.resize(end - first);
  order_->Fill(first, hint_scratch_);
  source_->WillRead(hint_scratch_);
  hinted_until_ = end;
}

bool LoaderCore::TakeJobLocked(Job& job) {
  if (!WorkAvailableLocked()) return false;
  const uint64_t b = static_cast<uint64_t>(config_.batch_size);
  const int64_t slot = static_cast<int64_t>(sched_pos_ % b);
  if (slot == 0 && !ClaimBufferLocked()) return false;
  job.buffer = fill_buffer_;
  job.data = buffers_[static_cast<size_t>(fill_buffer_)].data;
  job.slot = slot;
  job.epoch = epoch_;
  job.position = sched_pos_;
  ++sched_pos_;
  ++in_flight_samples_;
  if (sched_pos_ % b == 0) SkipDeliveredBatchesLocked();
  return true;
}

void LoaderCore::PumpLocked() {
  while (!idle_workers_.empty() && active_workers_ < worker_cap_ && WorkAvailableLocked()) {
    int w = idle_workers_.back();
    idle_workers_.pop_back();
    ++active_workers_;
    arena_->enqueue([this, w, gate = gate_] {
      {
        std::lock_guard lock(gate->mutex);
        if (gate->closed) return;  // the loader may be gone: touch nothing of it
        ++gate->running;
      }
      WorkerLoop(w);
      std::lock_guard lock(gate->mutex);
      --gate->running;
      gate->cv.notify_all();
    });
  }
}

void LoaderCore::WorkerLoop(int worker) {
  // Never throws: anything thrown becomes a fatal error for Next().
  Scratch& scratch = scratch_[static_cast<size_t>(worker)];
  Outcome outcome;
  while (true) {
    Job job;
    job.track = TraceRecorder::kFirstWorkerTrack + worker;
    {
      std::unique_lock lock(mutex_);
      // Above the online tuner's cap, this worker goes idle first.
      if (active_workers_ > worker_cap_ || !TakeJobLocked(job)) {
        idle_workers_.push_back(worker);
        --active_workers_;
        cv_.notify_all();
        return;
      }
      TraceCountersLocked(Clock::now());
    }
    // The sample's spans are recorded only when its "sample" span is, so
    // every read/decode/kernel span in the file has its parent.
    job.traced = trace_->on();
    const Clock::time_point begin = job.traced ? Clock::now() : Clock::time_point{};
    ProcessGuarded(job, scratch, outcome);
    if (job.traced) {
      // The sample written to the slot (after a bad sample, its replacement);
      // a slot left unfilled has no index and is marked failed.
      const int64_t batch =
          static_cast<int64_t>(job.position / static_cast<uint64_t>(config_.batch_size));
      const std::optional<Error>& failed = outcome.fatal ? outcome.fatal : outcome.error;
      if (failed) {
        trace_->FailedSpan(job.track, "sample", begin, Clock::now(), failed->code, failed->message,
                           TraceRecorder::kNoIndex, batch, job.slot);
      } else {
        trace_->Span(job.track, "sample", begin, Clock::now(), outcome.used_index, batch, job.slot);
      }
    }
    std::unique_lock lock(mutex_);
    CompleteAndLaunch(job, outcome, lock);
  }
}

void LoaderCore::ProcessGuarded(const Job& job, Scratch& scratch, Outcome& outcome) const {
  try {
    outcome.Reset();
    worker_->Process(job, *order_, scratch, outcome);
  } catch (const std::exception& e) {
    outcome.fatal =
        Err(ErrorCode::kInternal, std::string("exception in a loader task: ") + e.what());
  } catch (...) {
    outcome.fatal = Err(ErrorCode::kInternal, "unknown exception in a loader task");
  }
}

void LoaderCore::CompleteAndLaunch(const Job& job, Outcome& outcome,
                                   std::unique_lock<std::mutex>& lock) {
  bool launch = false;
  try {
    launch = CompleteLocked(job, outcome);
  } catch (...) {
    fatal_ = Err(ErrorCode::kInternal, "exception while completing a sample");
    cv_.notify_all();
  }
  if (!launch) return;
  lock.unlock();
  Status st = Ok();
  try {
    // Enqueues the host-to-device copies and the batch kernels (asynchronous:
    // the span is the host's enqueue time; "device sync" on the consumer's
    // track is where the host waits for the device).
    ScopedSpan span(*trace_, job.track, "device copy", TraceRecorder::kNoIndex,
                    static_cast<int64_t>(buffers_[static_cast<size_t>(job.buffer)].index));
    st = gpu_->Launch(job.buffer);
  } catch (...) {
    st = MakeError(ErrorCode::kInternal, "exception while launching a GPU batch");
  }
  lock.lock();
  if (!st && !fatal_) fatal_ = st.error();
  buffers_[static_cast<size_t>(job.buffer)].state = BufferState::kReady;
  cv_.notify_all();
}

void LoaderCore::AddBadReadsLocked(const Job& job, const Outcome& o) {
  PoolBuffer& b = buffers_[static_cast<size_t>(job.buffer)];
  for (int i = 0; i < o.bad_count; ++i) {
    // The bad path: naming the sample and copying its reason allocate.
    const std::string name = source_->SampleName(o.bad_index[i]);
    std::string reason = o.bad_error[i]->message;
    if (reason.starts_with(name + ": ")) reason.erase(0, name.size() + 2);
    b.bad.push_back(BadRead{job.slot, i, o.bad_index[i], std::move(reason)});
  }
}

Status LoaderCore::AccountLocked(PoolBuffer& b) {
  std::sort(b.bad.begin(), b.bad.end(), [](const BadRead& x, const BadRead& y) {
    return x.slot != y.slot ? x.slot < y.slot : x.attempt < y.attempt;
  });
  for (const BadRead& r : b.bad) {
    ++bad_reads_;
    if (config_.policy == ErrorPolicy::kSkip) ++skipped_;
    if (config_.policy == ErrorPolicy::kReplace) ++replaced_;
    ledger_->AddBad(r.index, r.reason);
    if (last_bad_.size() == 8) last_bad_.erase(last_bad_.begin());
    last_bad_.push_back(BadSample{source_->SampleName(r.index), r.reason, b.epoch, r.index});
  }
  // A failed slot has no sample; the fraction below needs only good batches.
  if (!b.error) {
    for (uint64_t index : b.samples) ledger_->AddRead(index);
  }
  if (config_.policy == ErrorPolicy::kFail || b.bad.empty()) return Ok();
  const uint64_t per_rank = sampler_->samples_per_rank();
  const uint64_t base = std::max(per_rank, ledger_->epoch_read());
  const double allowed = config_.max_fraction * static_cast<double>(base);
  if (static_cast<double>(ledger_->epoch_bad()) <= allowed) return Ok();
  const BadSample& last = last_bad_.back();
  return MakeError(ErrorCode::kCorruptData,
                   std::to_string(ledger_->epoch_bad()) + " distinct bad samples in epoch " +
                       std::to_string(b.epoch) + " exceed on_error.max_fraction " +
                       std::to_string(config_.max_fraction) + " of " + std::to_string(base) +
                       " samples (the larger of the epoch's " + std::to_string(per_rank) +
                       " and the " + std::to_string(ledger_->epoch_read()) +
                       " distinct samples read); last: " + last.path + ": " + last.reason,
                   "fix or remove the bad files, or raise output.on_error.max_fraction");
}

bool LoaderCore::CompleteLocked(const Job& job, Outcome& o) {
  PoolBuffer& b = buffers_[static_cast<size_t>(job.buffer)];
  read_ns_ += o.read_ns;
  decode_ns_ += o.decode_ns;
  kernel_ns_ += o.kernel_ns;
  if (o.fatal && !fatal_) fatal_ = o.fatal;
  AddBadReadsLocked(job, o);
  if (o.error && (!b.error || job.slot < b.error_slot)) {
    b.error = o.error;  // the lowest failing slot's: independent of timing
    b.error_slot = job.slot;
  }
  b.samples[static_cast<size_t>(job.slot)] = o.used_index;
  --in_flight_samples_;
  bool launch = false;
  if (--b.remaining == 0) {
    const Clock::time_point now = Clock::now();
    latency_.Add(std::chrono::duration<double>(now - b.start).count());
    trace_->Async(false, "batch", now, b.epoch * batches_per_epoch() + b.index,
                  static_cast<int64_t>(b.epoch), static_cast<int64_t>(b.index));
    if (gpu_ && !b.error && !fatal_ && !stopping_) {
      b.state = BufferState::kTransferring;
      launch = true;
    } else {
      b.state = BufferState::kReady;
    }
    cv_.notify_all();
  }
  if (fatal_) cv_.notify_all();
  TraceCountersLocked(Clock::now());
  return launch;
}

// ---- Delivery ----

Batch LoaderCore::MakeBatchLocked(int buffer) {
  PoolBuffer& b = buffers_[static_cast<size_t>(buffer)];
  b.state = BufferState::kHeld;
  Batch batch;
  batch.core_ = shared_from_this();
  batch.buffer_ = buffer;
  batch.size_ = config_.batch_size;
  batch.epoch_ = b.epoch;
  batch.index_ = b.index + index_offset_;
  batch.samples_ = b.samples;
  if (gpu_) batch.cuda_event_ = gpu_->event(buffer);
  for (const FieldLayout& f : config_.fields) {
    TensorView v;
    v.name = f.name;
    v.dtype = f.dtype;
    v.shape.push_back(config_.batch_size);
    v.shape.insert(v.shape.end(), f.sample_shape.begin(), f.sample_shape.end());
    v.strides.assign(v.shape.size(), 1);
    for (int i = static_cast<int>(v.shape.size()) - 2; i >= 0; --i) {
      v.strides[i] = v.strides[i + 1] * v.shape[i + 1];
    }
    v.data = b.data + f.offset;
    v.bytes = f.sample_bytes * static_cast<size_t>(config_.batch_size);
    if (f.gpu) {
      v.data = gpu_->device_output(buffer, f);
      v.device_type = DeviceType::kCUDA;
      v.device_id = gpu_->device_ordinal();
    }
    batch.fields_.push_back(std::move(v));
  }
  return batch;
}

int LoaderCore::PickReadyLocked() const {
  int pick = -1;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const PoolBuffer& b = buffers_[i];
    if (b.state != BufferState::kReady || b.epoch != epoch_) continue;
    if (config_.relaxed ? (pick < 0 || b.index < buffers_[pick].index) : b.index == deliver_next_) {
      pick = static_cast<int>(i);
    }
  }
  return pick;
}

Result<std::optional<Batch>> LoaderCore::DeliverLocked(int pick,
                                                       std::unique_lock<std::mutex>& lock) {
  PoolBuffer& b = buffers_[static_cast<size_t>(pick)];
  delivered_[b.index] = true;
  ++delivered_in_epoch_;
  while (deliver_next_ < delivered_.size() && delivered_[deliver_next_]) ++deliver_next_;
  Status counted = AccountLocked(b);
  if (!counted && !fatal_) fatal_ = counted.error();  // returned until Restore()
  if (b.error || !counted) {
    Error e = b.error ? *b.error : counted.error();
    b.state = BufferState::kFree;
    PumpLocked();
    cv_.notify_all();
    return std::unexpected(std::move(e));
  }
  ++batches_;
  samples_ += static_cast<uint64_t>(config_.batch_size);
  Batch batch = MakeBatchLocked(pick);
  TraceCountersLocked(Clock::now());
  if (gpu_ && gpu_->wait()) {
    lock.unlock();
    ScopedSpan span(*trace_, TraceRecorder::kConsumerTrack, "device sync", TraceRecorder::kNoIndex,
                    static_cast<int64_t>(b.index));
    Status st = gpu_->WaitBuffer(pick);
    if (!st) {
      { Batch drop = std::move(batch); }  // its release takes the lock
      lock.lock();
      return std::unexpected(st.error());
    }
    lock.lock();
  }
  return std::optional<Batch>(std::move(batch));
}

Result<std::optional<Batch>> LoaderCore::Next(std::optional<Clock::time_point> until,
                                              bool* timed_out) {
  if (timed_out != nullptr) *timed_out = false;
  if (ForkedAfterThreadsStarted()) return std::unexpected(ForkedError());
  auto t0 = Clock::now();
  std::unique_lock lock(mutex_);
  int64_t traced_batch = -1;  // the "next" span's argument
  // One consumer wait is one "next" span: a NextWithin that timed out (a
  // caller waiting in slices, as Python and `sluice run` do to see signals)
  // leaves its span open, and a call that follows within kSliceGap continues
  // it; a later call (a caller that polled, then did other work) closes it
  // where that call ended and starts anew.
  const bool continues = open_wait_begin_ && t0 - open_wait_end_ <= kSliceGap;
  const Clock::time_point span_begin = continues ? *open_wait_begin_ : t0;
  if (continues) open_wait_begin_.reset();
  CloseOpenWaitLocked();
  bool slice_ended = false;  // NextWithin's time ran out
  auto done_waiting = [&] {
    const Clock::time_point now = Clock::now();
    wait_seconds_ += std::chrono::duration<double>(now - t0).count();
    if (slice_ended) {
      open_wait_begin_ = span_begin;
      open_wait_end_ = now;
      return;
    }
    trace_->Span(TraceRecorder::kConsumerTrack, "next", span_begin, now, TraceRecorder::kNoIndex,
                 traced_batch);
  };
  if (online_) ObserveLocked(t0);
  while (true) {
    if (fatal_) {
      done_waiting();
      return std::unexpected(*fatal_);
    }
    if (delivered_in_epoch_ >= seg_batches_) {
      // End of epoch: report it once, then start the next.
      StartEpochLocked(epoch_ + 1);
      PumpLocked();
      done_waiting();
      return std::optional<Batch>();
    }
    if (const int pick = PickReadyLocked(); pick >= 0) {
      traced_batch = static_cast<int64_t>(buffers_[static_cast<size_t>(pick)].index);
      auto result = DeliverLocked(pick, lock);
      done_waiting();
      return result;
    }
    // Nothing ready: is anything coming?
    const bool producing = std::any_of(buffers_.begin(), buffers_.end(), [](const PoolBuffer& b) {
      return b.state == BufferState::kFilling || b.state == BufferState::kTransferring ||
             b.state == BufferState::kReady;
    });
    if (!producing && !WorkAvailableLocked()) {
      done_waiting();
      return MakeError(ErrorCode::kInvalidArgument,
                       "every batch buffer (" + std::to_string(buffers_.size()) +
                           ") is held by the caller; the loader cannot fill another",
                       "destroy batches you no longer need, or raise output.prefetch");
    }
    PumpLocked();
    if (until && Clock::now() >= *until) {  // checked after a last look for a batch
      if (timed_out != nullptr) *timed_out = true;
      slice_ended = true;
      done_waiting();
      return std::optional<Batch>();
    }
    const bool traced = trace_->on();
    const Clock::time_point wait_begin = traced ? Clock::now() : Clock::time_point{};
    if (until) {
      cv_.wait_until(lock, *until);
    } else {
      cv_.wait(lock);
    }
    if (traced) trace_->Span(TraceRecorder::kConsumerTrack, "wait", wait_begin, Clock::now());
  }
}

void LoaderCore::ObserveLocked(Clock::time_point now) {
  const double dt = std::chrono::duration<double>(now - tune_since_).count();
  if (tune_since_ == Clock::time_point{} || dt > 60.0) {  // first call, or a long pause
    tune_since_ = now;
    tune_samples_ = samples_;
    tune_wait_ = wait_seconds_;
    return;
  }
  if (dt < kTuneInterval) return;
  const double images_per_second = static_cast<double>(samples_ - tune_samples_) / dt;
  const double wait_fraction = std::clamp((wait_seconds_ - tune_wait_) / dt, 0.0, 1.0);
  tune_since_ = now;
  tune_samples_ = samples_;
  tune_wait_ = wait_seconds_;
  if (online_->Observe(images_per_second, wait_fraction)) {
    worker_cap_ = online_->workers();
    prefetch_cap_ = online_->prefetch();
    PumpLocked();
  }
}

void LoaderCore::Release(int buffer) {
  std::unique_lock lock(mutex_);
  buffers_[static_cast<size_t>(buffer)].state = BufferState::kFree;
  PumpLocked();
  cv_.notify_all();
}

}  // namespace sluice::runtime
