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
  parallelism_ = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                       static_cast<size_t>(c.threads) + 1);
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
  WaitIdleLocked(lock);
  lock.unlock();
  if (trace_ && trace_->running()) {
    if (auto stopped = trace_->Stop(); !stopped) {
      std::cerr << "sluice: warning: " << stopped.error().ToString() << "\n";
    }
  }
}

Status LoaderCore::StartTrace(const std::string& path, size_t max_events_per_track) {
  return trace_->Start(path, max_events_per_track);
}

Result<uint64_t> LoaderCore::StopTrace() { return trace_->Stop(); }

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
    arena_->enqueue([this, w] { WorkerLoop(w); });
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
      const uint64_t b = static_cast<uint64_t>(config_.batch_size);
      trace_->Span(job.track, "sample", begin, Clock::now(), outcome.used_index,
                   static_cast<int64_t>(job.position / b), job.slot);
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

Result<std::optional<Batch>> LoaderCore::Next() {
  auto t0 = Clock::now();
  std::unique_lock lock(mutex_);
  int64_t traced_batch = -1;  // the "next" span's argument
  auto done_waiting = [&] {
    const Clock::time_point now = Clock::now();
    wait_seconds_ += std::chrono::duration<double>(now - t0).count();
    trace_->Span(TraceRecorder::kConsumerTrack, "next", t0, now, TraceRecorder::kNoIndex,
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
    const bool traced = trace_->on();
    const Clock::time_point wait_begin = traced ? Clock::now() : Clock::time_point{};
    cv_.wait(lock);
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

// ---- State, restore and stats ----

Result<std::vector<BadSample>> LoaderCore::BadSamples(uint64_t epoch) const {
  std::unique_lock lock(mutex_);
  auto records = ledger_->Records(epoch);
  if (!records) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the loader keeps the bad samples of its current epoch " +
                         std::to_string(ledger_->epoch()) +
                         " and the one before it, not of epoch " + std::to_string(epoch),
                     "read an epoch's list before the loader moves two epochs past it");
  }
  std::vector<BadSample> out;
  out.reserve(records->size());
  for (BadSampleLedger::Record& r : *records) {
    out.push_back(BadSample{source_->SampleName(r.index), std::move(r.reason), epoch, r.index});
  }
  return out;
}

LoaderState LoaderCore::State() const {
  std::unique_lock lock(mutex_);
  LoaderState s;
  s.spec_hash = config_.spec_hash;
  s.samples = source_->size();
  s.batch_size = static_cast<uint64_t>(config_.batch_size);
  if (delivered_in_epoch_ >= seg_batches_) {
    s.epoch = epoch_ + 1;  // nothing of it consumed: any world size
    return s;
  }
  s.epoch = epoch_;
  const ConsumedSet& base = order_->base();
  const SegmentLayout& layout = order_->layout();
  const int world = config_.sampler.world_size, rank = config_.sampler.rank;
  // shard_shuffle's O is built for the segment's order_world, or this world
  // size in a fresh epoch.
  const int order_world = !layout.contiguous ? 0 : base.order_world() ? base.order_world() : world;
  std::vector<uint64_t> ahead;
  for (uint64_t k = deliver_next_ + 1; k < delivered_.size(); ++k) {
    if (delivered_[k]) ahead.push_back(k);
  }
  auto put = [&s](const ConsumedSet& c, int w) {
    s.position = c.prefix();
    for (const PosRange& r : c.ranges()) s.consumed.push_back({r.begin, r.end});
    s.order_world_size = c.empty() ? 0 : w;
  };
  if (!config_.relaxed || world == 1) {
    ConsumedSet c = base;
    if (!config_.relaxed) AddLockstep(c, base, layout, deliver_next_);  // ranks in lockstep
    AddRankBatches(c, base, layout, rank, deliver_next_, ahead);
    put(c, order_world);
    return s;
  }
  put(base, order_world);
  s.order_world_size = order_world;  // a rank state always names it
  s.world_size = world;
  s.rank = rank;
  s.rank_position = deliver_next_ * static_cast<uint64_t>(config_.batch_size);
  s.rank_ahead = std::move(ahead);
  return s;
}

Result<ConsumedSet> LoaderCore::StateConsumed(const LoaderState& state) const {
  const uint64_t n = source_->size();
  uint64_t after = state.position;
  for (const PositionRange& r : state.consumed) {
    if (r.begin <= after || r.end <= r.begin || r.end > n) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "loader state's consumed range " + std::to_string(r.begin) + "-" +
                           std::to_string(r.end) + " is not ascending after position " +
                           std::to_string(state.position) + " within the epoch's " +
                           std::to_string(n) + " samples",
                       "restore a state saved by a loader of the same plan and data");
    }
    after = r.end;
  }
  if (state.position > n) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "loader state position " + std::to_string(state.position) +
                         " is past the epoch's " + std::to_string(n) + " samples");
  }
  std::vector<PosRange> ranges;
  for (const PositionRange& r : state.consumed) ranges.push_back({r.begin, r.end});
  ConsumedSet c(state.position, std::move(ranges), state.order_world_size);
  if (config_.sampler.order == SampleOrder::kShardShuffle && !c.empty() &&
      state.order_world_size <= 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "a shard_shuffle loader state with consumed samples must name "
                     "order_world_size (the world size the epoch's order was built for)");
  }
  if (config_.sampler.order != SampleOrder::kShardShuffle) c.set_order_world(0);
  return c;
}

std::optional<std::vector<uint64_t>> LoaderCore::FreshEpochBatches(
    const ConsumedSet& consumed) const {
  const int world = config_.sampler.world_size;
  if (consumed.order_world() != 0 && consumed.order_world() != world) return std::nullopt;
  const ConsumedSet none;
  const SegmentLayout layout = sampler_->Layout(none);
  const uint64_t batches = layout.batches_per_rank();
  std::vector<uint64_t> mine;
  uint64_t covered = 0, count0 = 0;
  for (int r = 0; r < world; ++r) {
    uint64_t count = 0;
    for (uint64_t k = 0; k < batches; ++k) {
      const PosRange u = layout.BatchU(r, k);
      if (u.begin == u.end || !consumed.Contains(u.begin, u.end)) continue;
      covered += u.end - u.begin;
      ++count;
      if (r == config_.sampler.rank) mine.push_back(k);
    }
    if (r == 0) count0 = count;
    if (count != count0) return std::nullopt;
  }
  if (covered != consumed.count()) return std::nullopt;
  return mine;
}

Status LoaderCore::CheckRestoreState(const LoaderState& state) const {
  if (state.spec_hash != config_.spec_hash) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "loader state is for spec " + state.spec_hash + ", this plan's is " + config_.spec_hash,
        "restore a state saved by a loader of the same plan");
  }
  const uint64_t b = static_cast<uint64_t>(config_.batch_size);
  if (state.samples != source_->size() || state.batch_size != b) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "loader state is for " + std::to_string(state.samples) +
                         " samples in batches of " + std::to_string(state.batch_size) +
                         ", this loader has " + std::to_string(source_->size()) +
                         " in batches of " + std::to_string(b),
                     "restore a state saved by a loader of the same plan and data");
  }
  if (state.complete()) return Ok();
  const int world = config_.sampler.world_size, rank = config_.sampler.rank;
  if (state.world_size != world || state.rank != rank) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "loader state is rank " + std::to_string(state.rank) + "'s of " +
                         std::to_string(state.world_size) +
                         " (relaxed ordering); this loader is rank " + std::to_string(rank) +
                         " of " + std::to_string(world),
                     "merge every rank's state with MergeStates (Python: sluice.merge_states) and "
                     "restore the result, which works on any world size");
  }
  if (state.rank_position % b != 0) {
    return MakeError(ErrorCode::kInvalidArgument, "loader state rank_position " +
                                                      std::to_string(state.rank_position) +
                                                      " is not a batch boundary");
  }
  uint64_t after = state.rank_position / b;  // each index must exceed the one before
  for (uint64_t k : state.rank_ahead) {
    if (k <= after) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "loader state's delivered batch " + std::to_string(k) +
                           " is not after batch " + std::to_string(state.rank_position / b) +
                           " in ascending order",
                       "restore a state saved by a loader of the same plan");
    }
    after = k;
  }
  return Ok();
}

Status LoaderCore::Restore(const LoaderState& state) {
  SLUICE_RETURN_IF_ERROR(CheckRestoreState(state));
  auto consumed = StateConsumed(state);
  if (!consumed) return std::unexpected(consumed.error());
  std::optional<std::vector<uint64_t>> fresh;
  if (state.complete()) fresh = FreshEpochBatches(*consumed);
  std::unique_lock lock(mutex_);
  const bool was_stopping = stopping_;
  stopping_ = true;  // no new jobs while draining
  WaitIdleLocked(lock);
  stopping_ = was_stopping;
  for (PoolBuffer& buf : buffers_) {
    if (buf.state != BufferState::kHeld) buf.state = BufferState::kFree;
  }
  fatal_.reset();
  const uint64_t per_step =
      static_cast<uint64_t>(config_.sampler.world_size) * static_cast<uint64_t>(config_.batch_size);
  if (!state.complete()) {
    StartEpochLocked(state.epoch, *consumed,
                     state.rank_position / static_cast<uint64_t>(config_.batch_size),
                     state.rank_ahead, consumed->count() / per_step);
  } else if (fresh) {
    StartEpochLocked(state.epoch, {}, 0, *fresh, 0);  // the same epoch, exactly
  } else {
    StartEpochLocked(state.epoch, *consumed, 0, {}, consumed->count() / per_step);
  }
  PumpLocked();
  return Ok();
}

LoaderStats LoaderCore::Stats() const {
  std::unique_lock lock(mutex_);
  LoaderStats s;
  s.samples = samples_;
  s.batches = batches_;
  s.seconds = std::chrono::duration<double>(Clock::now() - created_).count();
  s.images_per_second = s.seconds > 0 ? static_cast<double>(samples_) / s.seconds : 0;
  s.latency_p50 = latency_.Quantile(0.5);
  s.latency_p99 = latency_.Quantile(0.99);
  s.latency_max = latency_.max();
  s.consumer_wait_seconds = wait_seconds_;
  s.bad_samples = ledger_->total_bad();
  s.bad_reads = bad_reads_;
  s.skipped = skipped_;
  s.replaced = replaced_;
  s.last_bad = last_bad_;
  s.read_seconds = static_cast<double>(read_ns_) * 1e-9;
  s.decode_seconds = static_cast<double>(decode_ns_) * 1e-9;
  s.kernel_seconds = static_cast<double>(kernel_ns_) * 1e-9;
  s.threads = config_.threads;
  s.in_flight = worker_cap_;
  s.prefetch = prefetch_cap_;
  s.online_tuning = online_.has_value();
  s.tuner_moves = online_ ? online_->moves() : 0;
  s.pool_buffers = static_cast<int>(buffers_.size());
  s.batch_bytes = static_cast<int64_t>(config_.buffer_bytes);
  s.device = config_.device;
  s.warnings = config_.warnings;
  if (std::optional<SourceIoStats> io = source_->IoStats()) {
    s.remote = true;
    s.remote_requests = io->requests.requests;
    s.remote_bytes_fetched = io->requests.bytes_fetched;
    s.remote_retries = io->requests.retries;
    s.remote_hedges = io->requests.hedges;
    s.remote_hedge_wins = io->requests.hedge_wins;
    s.remote_timeouts = io->requests.timeouts;
    s.remote_failures = io->requests.failures;
    s.remote_latency_p50 = io->requests.latency_p50_s;
    s.remote_latency_p99 = io->requests.latency_p99_s;
    s.cache_hits = io->cache_hits;
    s.cache_misses = io->cache_misses;
    s.cache_lock_timeouts = io->cache_lock_timeouts;
    s.coalesced_requests = io->coalesced_requests;
    s.coalesced_samples = io->coalesced_samples;
    s.shards_streamed = io->shards_streamed;
    s.read_ahead = io->read_ahead;
    s.read_ahead_stalls = io->read_ahead_stalls;
  }
  return s;
}

}  // namespace sluice::runtime
