// LoaderCore's state, restore and stats: what a caller saves, restores and
// reads about a running loader (see loader_core.h for the contracts). The
// scheduler itself is in loader_core.cc.
#include "runtime/exec/loader_core.h"

namespace sluice::runtime {

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

bool LoaderCore::EpochEndPending() const {
  std::unique_lock lock(mutex_);
  return seg_batches_ > 0 && delivered_in_epoch_ >= seg_batches_;
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
      if (!config_.relaxed && world > 1 && k != count) return std::nullopt;  // not a prefix
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
  if (reads_) reads_->Pause();  // a stuck read does not hold the drain (read_pool.h)
  WaitIdleLocked(lock);
  if (reads_) reads_->Resume();
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
    s.cache_passthrough = io->cache_passthrough;
    s.cache_no_space = io->cache_no_space;
    s.coalesced_requests = io->coalesced_requests;
    s.coalesced_samples = io->coalesced_samples;
    s.shards_streamed = io->shards_streamed;
    s.read_ahead = io->read_ahead;
    s.read_ahead_stalls = io->read_ahead_stalls;
  }
  return s;
}

}  // namespace sluice::runtime
