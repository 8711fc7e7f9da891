#include "runtime/sources/tar/remote_reader.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <utility>

#include "common/pread_full.h"
#include "runtime/sources/tar/tar_format.h"

namespace sluice::runtime::tar {
namespace {

Status CancelledError() {
  return MakeError(ErrorCode::kIo, "cancelled (the loader is shutting down)");
}

}  // namespace

// A planned coalesced range request (kRandom).
struct RemoteShardReader::Group {
  size_t shard = 0;
  uint64_t offset = 0, length = 0;
  std::vector<uint64_t> members;  // dataset indices still planned on it
  enum State { kIdle, kLoading, kDone, kFailed } state = kIdle;
  ByteBuffer bytes;        // [offset, offset + length) once kDone
  int remaining = 0;       // members not yet read
  bool coalesced = false;  // planned for two or more samples
  bool queued = false;     // in prefetch_queue_ (once)
  int readers = 0;         // reads waiting for `bytes` (the lock released)
  bool dropped = false;    // unplanned: `bytes` is recycled once readers is 0
};

// A whole shard in memory (kShardStream).
struct RemoteShardReader::Resident {
  size_t shard = 0;
  ByteBuffer bytes;       // allocated before streaming starts
  uint64_t received = 0;  // bytes [0, received) are final
  enum State { kQueued, kLoading, kDone, kFailed } state = kQueued;
  Error error;
  uint64_t charged = 0;  // bytes counted in resident_bytes_
  uint64_t last_use = 0;
  int readers = 0;
  std::optional<remote::CachedShard> cached;  // with a cache: the pinned entry
  bool ahead = false;    // started by the read-ahead (not by a read that needed it)
  bool stalled = false;  // a read already waited for it (counted once)
};

RemoteShardReader::RemoteShardReader(std::shared_ptr<remote::ObjectStore> store,
                                     std::vector<Shard> shards, uint64_t num_samples,
                                     RemoteReadOptions options)
    : store_(std::move(store)),
      shards_(std::move(shards)),
      num_samples_(num_samples),
      options_(options) {
  options_.read_ahead = std::max(0, options_.read_ahead);
  options_.max_read_ahead = std::max(options_.read_ahead, options_.max_read_ahead);
  read_ahead_ = options_.read_ahead;
  options_.prefetch_requests = std::clamp(options_.prefetch_requests, 0, 32);
  resident_.resize(shards_.size());
  pending_.assign(shards_.size(), 0);
  wanted_flag_.assign(shards_.size(), false);
  seen_.assign(num_samples_, false);
}

RemoteShardReader::~RemoteShardReader() {
  Cancel();
  for (std::thread& t : fetchers_) t.join();
  for (std::thread& t : prefetchers_) t.join();
}

void RemoteShardReader::SetPattern(ReadPattern pattern) {
  std::lock_guard lock(mutex_);
  pattern_ = pattern;
  whole_shards_ = pattern == ReadPattern::kShardStream || options_.cache != nullptr;
  if (whole_shards_ && fetchers_.empty()) {
    const int n = std::min(options_.max_read_ahead + 1, 8);
    for (int i = 0; i < n; ++i) fetchers_.emplace_back([this] { FetchLoop(); });
  }
}

uint64_t RemoteShardReader::HintWindow() const {
  if (pattern_ != ReadPattern::kShardStream || shards_.empty()) return 0;
  const uint64_t per_shard = (num_samples_ + shards_.size() - 1) / shards_.size();
  return per_shard * static_cast<uint64_t>(read_ahead_.load() + 1);
}

void RemoteShardReader::Cancel() {
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  ready_.notify_all();
  work_.notify_all();
  prefetch_work_.notify_all();
  store_->Cancel();
  if (options_.cache != nullptr) options_.cache->Cancel();  // a wait for another process
}

remote::ShardCacheStats RemoteShardReader::cache_stats() const {
  return options_.cache != nullptr ? options_.cache->stats() : remote::ShardCacheStats{};
}

RemoteReadCounters RemoteShardReader::counters() const {
  std::lock_guard lock(mutex_);
  RemoteReadCounters c = counters_;
  c.read_ahead = read_ahead_.load();
  return c;
}

Status RemoteShardReader::ReadDirect(const Range& r, uint8_t* out) {
  {
    std::lock_guard lock(mutex_);
    ++counters_.direct_reads;
  }
  return store_->ReadRange(shards_[r.shard].url, r.offset, r.length, out);
}

Status RemoteShardReader::Read(const Range& r, uint8_t* out) {
  return whole_shards_ ? ReadStream(r, out) : ReadRandom(r, out);
}

void RemoteShardReader::ReleaseGroupLocked(const std::shared_ptr<Group>& g) {
  if (--g->readers == 0 && g->dropped) RecycleGroupBufferLocked(g);
}

std::optional<Status> RemoteShardReader::ReadIfReady(const Range& range, uint8_t* out) {
  std::lock_guard lock(mutex_);
  if (cancelled_) return std::nullopt;  // Read says so
  if (!whole_shards_) {
    auto it = planned_.find(range.index);
    if (it == planned_.end() || it->second->state != Group::kDone) return std::nullopt;
    std::shared_ptr<Group> g = it->second;
    planned_.erase(it);
    std::erase(g->members, range.index);
    if (g->coalesced) ++counters_.coalesced_samples;
    std::memcpy(out, g->bytes.data.get() + (range.offset - g->offset), range.length);
    if (--g->remaining <= 0) DropGroupLocked(g);
    return Ok();
  }
  // A shard in memory (not a cached file: reading that may touch the disk).
  const std::shared_ptr<Resident>& r = resident_[range.shard];
  if (r == nullptr || r->cached || r->received < range.offset + range.length) return std::nullopt;
  if (pending_[range.shard] > 0) --pending_[range.shard];
  ++counters_.stream_reads;
  std::memcpy(out, r->bytes.data.get() + range.offset, range.length);  // final bytes
  r->last_use = ++tick_;
  ScheduleLocked();
  return Ok();
}

void RemoteShardReader::WillRead(std::span<const Range> ranges) {
  std::lock_guard lock(mutex_);
  if (cancelled_) return;
  if (!whole_shards_) {
    if (prefetchers_.empty()) {
      for (int i = 0; i < options_.prefetch_requests; ++i) {
        prefetchers_.emplace_back([this] { PrefetchLoop(); });
      }
    }
    PlanLocked(ranges);
    return;
  }
  hinted_ = true;
  for (const Range& r : ranges) {
    NotePassLocked(r);
    ++pending_[r.shard];
    if (resident_[r.shard] == nullptr && !wanted_flag_[r.shard]) {
      wanted_flag_[r.shard] = true;
      wanted_.push_back(r.shard);
    }
  }
  ScheduleLocked();
}

// ---- kRandom: coalesced range requests ----

void RemoteShardReader::DropGroupLocked(std::shared_ptr<Group> g) {
  for (uint64_t i : g->members) {
    auto it = planned_.find(i);
    if (it != planned_.end() && it->second == g) planned_.erase(it);
  }
  g->members.clear();
  auto it = std::find(groups_.begin(), groups_.end(), g);
  if (it != groups_.end()) {
    groups_.erase(it);
    planned_bytes_ -= g->length;
  }
  g->dropped = true;
  if (g->readers == 0) RecycleGroupBufferLocked(g);
}

void RemoteShardReader::RecycleGroupBufferLocked(const std::shared_ptr<Group>& g) {
  // No read holds the bytes: keep the buffer for a later group. (A load in
  // flight holds its buffer itself until it ends; LoadGroup recycles it then
  // when the group was dropped meanwhile.)
  if (g->bytes.size > 0 && spare_buffers_.size() < 64 &&
      spare_bytes_ + g->bytes.size <= kMaxSpareBytes) {
    spare_bytes_ += g->bytes.size;
    spare_buffers_.push_back(std::move(g->bytes));
  }
  g->bytes = {};
}

void RemoteShardReader::PlanLocked(std::span<const Range> ranges) {
  std::vector<const Range*> todo;
  todo.reserve(ranges.size());
  for (const Range& r : ranges) {
    if (!planned_.contains(r.index)) todo.push_back(&r);
  }
  std::sort(todo.begin(), todo.end(), [](const Range* a, const Range* b) {
    return a->shard != b->shard ? a->shard < b->shard : a->offset < b->offset;
  });
  size_t i = 0;
  while (i < todo.size()) {
    // The run [i, j): same shard, small gaps, bounded length.
    const uint64_t begin = todo[i]->offset;
    uint64_t end = begin + todo[i]->length;
    size_t j = i + 1;
    size_t distinct = 1;
    for (; j < todo.size(); ++j) {
      const Range& n = *todo[j];
      const uint64_t n_end = std::max(end, n.offset + n.length);
      if (n.shard != todo[i]->shard || n.offset > end + options_.coalesce_gap ||
          n_end - begin > options_.coalesce_max) {
        break;
      }
      if (n.index != todo[j - 1]->index) ++distinct;
      end = n_end;
    }
    if (distinct >= 2 || options_.prefetch_requests > 0) {
      const uint64_t length = end - begin;
      while (planned_bytes_ + length > options_.coalesce_budget && !groups_.empty() &&
             groups_.front()->state != Group::kLoading) {
        DropGroupLocked(groups_.front());
      }
      if (planned_bytes_ + length <= options_.coalesce_budget) {
        auto g = std::make_shared<Group>();
        g->shard = todo[i]->shard;
        g->offset = begin;
        g->length = length;
        for (size_t k = i; k < j; ++k) {
          if (planned_.emplace(todo[k]->index, g).second) g->members.push_back(todo[k]->index);
        }
        g->remaining = static_cast<int>(g->members.size());
        g->coalesced = g->remaining >= 2;
        groups_.push_back(g);
        planned_bytes_ += length;
      }
    }
    i = j;
  }
  if (options_.prefetch_requests == 0) return;
  // Requests start in the order the loader will read their first sample.
  for (const Range& r : ranges) {
    auto it = planned_.find(r.index);
    if (it == planned_.end() || it->second->queued) continue;
    it->second->queued = true;
    prefetch_queue_.push_back(it->second);
  }
  prefetch_work_.notify_all();
}

Status RemoteShardReader::ReadRandom(const Range& r, uint8_t* out) {
  std::unique_lock lock(mutex_);
  auto it = planned_.find(r.index);
  if (it == planned_.end()) {
    lock.unlock();
    return ReadDirect(r, out);
  }
  std::shared_ptr<Group> g = it->second;
  planned_.erase(it);
  std::erase(g->members, r.index);
  // Held from here: a budget that drops g (PlanLocked) while this read waits
  // for it must not recycle its buffer.
  ++g->readers;
  if (g->state == Group::kIdle) {
    g->state = Group::kLoading;
    LoadGroup(g, lock);
  }
  ready_.wait(lock, [&] { return g->state != Group::kLoading || cancelled_; });
  const bool done = g->state == Group::kDone;
  if (done && g->coalesced) ++counters_.coalesced_samples;
  // Under the lock: the buffer is recycled once the group is dropped and
  // no read holds it.
  if (done) std::memcpy(out, g->bytes.data.get() + (r.offset - g->offset), r.length);
  ReleaseGroupLocked(g);
  if (--g->remaining <= 0 || !done) DropGroupLocked(g);
  if (g->state == Group::kLoading) return CancelledError();
  lock.unlock();
  if (!done) return ReadDirect(r, out);  // the sample's own request gives its own error
  return Ok();
}

void RemoteShardReader::LoadGroup(const std::shared_ptr<Group>& g,
                                  std::unique_lock<std::mutex>& lock) {
  if (g->coalesced) ++counters_.coalesced_requests;
  // The smallest spare that fits, else a new buffer rounded up to a power of
  // two so that later groups can reuse it: no zero-filling and no fresh pages
  // per request.
  ByteBuffer bytes;
  auto fit = spare_buffers_.end();
  for (auto it = spare_buffers_.begin(); it != spare_buffers_.end(); ++it) {
    if (it->size >= g->length && (fit == spare_buffers_.end() || it->size < fit->size)) fit = it;
  }
  if (fit != spare_buffers_.end()) {
    bytes = std::move(*fit);
    spare_buffers_.erase(fit);
    spare_bytes_ -= bytes.size;
  }
  lock.unlock();
  if (bytes.size < g->length) {
    bytes = ByteBuffer::Allocate(std::bit_ceil(std::max<uint64_t>(g->length, 128 << 10)));
  }
  Status st = store_->ReadRange(shards_[g->shard].url, g->offset, g->length, bytes.data.get());
  lock.lock();
  g->bytes = std::move(bytes);
  g->state = st ? Group::kDone : Group::kFailed;
  // Dropped by a budget while loading, and no read waits for it: nobody can
  // find it any more, so its buffer goes back to the spares now.
  if (g->dropped && g->readers == 0) RecycleGroupBufferLocked(g);
  ready_.notify_all();
}

void RemoteShardReader::PrefetchLoop() {
  std::unique_lock lock(mutex_);
  while (true) {
    prefetch_work_.wait(lock, [&] { return cancelled_ || !prefetch_queue_.empty(); });
    if (cancelled_) return;
    std::shared_ptr<Group> g = prefetch_queue_.front().lock();
    prefetch_queue_.pop_front();
    // Dropped (expired or no members left) or already requested by a Read.
    if (g == nullptr || g->state != Group::kIdle || g->members.empty()) continue;
    g->state = Group::kLoading;
    ++counters_.prefetched_requests;
    LoadGroup(g, lock);
  }
}

// ---- kShardStream: whole shards with read-ahead ----

bool RemoteShardReader::MakeRoomLocked(uint64_t bytes, bool force) {
  while (resident_bytes_ + bytes > options_.max_resident_bytes) {
    std::shared_ptr<Resident> victim;
    for (const auto& r : resident_) {
      if (r == nullptr || r->readers > 0 ||
          (r->state != Resident::kDone && r->state != Resident::kFailed)) {
        continue;
      }
      if (!force && pending_[r->shard] > 0) continue;
      const bool idle = pending_[r->shard] <= 0;
      if (victim == nullptr) {
        victim = r;
        continue;
      }
      const bool victim_idle = pending_[victim->shard] <= 0;
      if (idle != victim_idle ? idle : r->last_use < victim->last_use) victim = r;
    }
    if (victim == nullptr) return false;
    resident_bytes_ -= victim->charged;
    resident_[victim->shard] = nullptr;
  }
  return true;
}

void RemoteShardReader::NotePassLocked(const Range& r) {
  if (r.index >= seen_.size() || r.shard >= shards_.size()) return;
  if (seen_[r.index]) {
    // The shard's next pass (the loader announces each sample once per
    // epoch): its failure belonged to the last one.
    const uint64_t end = r.shard + 1 < shards_.size() ? shards_[r.shard + 1].start : num_samples_;
    for (uint64_t i = shards_[r.shard].start; i < std::min<uint64_t>(end, seen_.size()); ++i) {
      seen_[i] = false;
    }
    const std::shared_ptr<Resident>& failed = resident_[r.shard];
    if (failed != nullptr && failed->state == Resident::kFailed) {
      // A read still holding it keeps its own reference.
      resident_bytes_ -= failed->charged;
      resident_[r.shard] = nullptr;
    }
  }
  seen_[r.index] = true;
}

bool RemoteShardReader::FinishingStreamLocked() const {
  for (const auto& r : resident_) {
    if (r != nullptr && r->state == Resident::kLoading && r->received == shards_[r->shard].size) {
      return true;
    }
  }
  return false;
}

std::shared_ptr<RemoteShardReader::Resident> RemoteShardReader::StartFetchLocked(size_t shard,
                                                                                 bool urgent) {
  auto r = std::make_shared<Resident>();
  r->shard = shard;
  r->charged = shards_[shard].size;
  r->last_use = ++tick_;
  resident_bytes_ += r->charged;
  resident_[shard] = r;
  ++in_flight_;
  if (counters_.shards_streamed++ == 0) first_streamed_ = shard;
  r->ahead = !urgent;
  if (urgent) {
    fetch_queue_.push_front(r);
  } else {
    fetch_queue_.push_back(r);
  }
  work_.notify_one();
  return r;
}

void RemoteShardReader::ScheduleLocked() {
  while (!wanted_.empty() && !cancelled_) {
    const size_t k = wanted_.front();
    if (resident_[k] != nullptr || shards_[k].size > options_.max_resident_bytes) {
      wanted_flag_[k] = false;
      wanted_.pop_front();
      continue;
    }
    if (in_flight_ >= read_ahead_.load() + 1) return;
    if (!MakeRoomLocked(shards_[k].size, /*force=*/false)) return;
    wanted_flag_[k] = false;
    wanted_.pop_front();
    StartFetchLocked(k, /*urgent=*/false);
  }
}

Status RemoteShardReader::ReadStream(const Range& range, uint8_t* out) {
  std::unique_lock lock(mutex_);
  if (cancelled_) return CancelledError();
  if (pending_[range.shard] > 0) --pending_[range.shard];
  if (!hinted_) NotePassLocked(range);  // no announcements: the reads mark the passes
  std::shared_ptr<Resident> r = resident_[range.shard];
  if (r == nullptr) {
    const uint64_t size = shards_[range.shard].size;
    const bool fits = size <= options_.max_resident_bytes;
    bool room = fits && MakeRoomLocked(size, /*force=*/true);
    // When the budget is held by streams that have delivered all their bytes
    // and are only finishing, wait for them (Fetch notifies) rather than read
    // this shard sample by sample.
    while (!room && fits && !cancelled_ && FinishingStreamLocked()) {
      ready_.wait(lock);
      if ((r = resident_[range.shard]) != nullptr) break;  // another read started it
      room = MakeRoomLocked(size, /*force=*/true);
    }
    if (cancelled_) return CancelledError();
    if (r == nullptr && !room) {
      lock.unlock();
      return ReadDirect(range, out);
    }
  }
  if (r == nullptr) {
    r = StartFetchLocked(range.shard, /*urgent=*/true);
    if (!hinted_) {
      // No announcements (a caller other than the loader): guess sequential.
      for (int a = 1; a <= read_ahead_.load(); ++a) {
        const size_t next = range.shard + static_cast<size_t>(a);
        if (next < shards_.size() && resident_[next] == nullptr && !wanted_flag_[next]) {
          wanted_flag_[next] = true;
          wanted_.push_back(next);
        }
      }
    }
  }
  ++r->readers;
  const uint64_t end = range.offset + range.length;
  if (r->ahead && !r->stalled && r->shard != first_streamed_ && r->received < end &&
      r->state != Resident::kFailed && r->state != Resident::kDone) {
    // The read-ahead started this shard but it has not arrived: it runs too
    // close behind the reads (the first shard streamed is not counted: every
    // start waits for it). Auto read-ahead adds a shard (within its max).
    r->stalled = true;
    ++counters_.read_ahead_stalls;
    if (read_ahead_.load() < options_.max_read_ahead) {
      read_ahead_.store(read_ahead_.load() + 1);
      ScheduleLocked();
    }
  }
  ready_.wait(lock, [&] {
    return r->received >= end || r->state == Resident::kFailed || r->state == Resident::kDone ||
           cancelled_;
  });
  Status st = Ok();
  if (r->received >= end) {
    ++counters_.stream_reads;
    lock.unlock();
    if (r->cached) {  // pinned while this reader counts in r->readers
      const int64_t got = PreadFull(r->cached->fd(), out, range.length, range.offset);
      if (got != static_cast<int64_t>(range.length)) {
        st = MakeError(ErrorCode::kIo, "'" + remote::RedactUrl(shards_[range.shard].url) +
                                           "': cannot read its cached copy");
      }
    } else {
      std::memcpy(out, r->bytes.data.get() + range.offset, range.length);  // final bytes
    }
    lock.lock();
  } else if (cancelled_) {
    st = CancelledError();
  } else if (r->state == Resident::kFailed) {
    st = std::unexpected(r->error);
  } else {
    st = MakeError(ErrorCode::kCorruptData, "'" + remote::RedactUrl(shards_[range.shard].url) +
                                                "' ends at byte " + std::to_string(r->received) +
                                                ", inside the member at byte " +
                                                std::to_string(range.offset));
  }
  --r->readers;
  r->last_use = ++tick_;
  ScheduleLocked();
  return st;
}

void RemoteShardReader::FetchLoop() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [&] { return cancelled_ || !fetch_queue_.empty(); });
    if (cancelled_) return;
    std::shared_ptr<Resident> r = fetch_queue_.front();
    fetch_queue_.pop_front();
    r->state = Resident::kLoading;
    lock.unlock();
    Fetch(r);
    lock.lock();
    --in_flight_;
    ScheduleLocked();
  }
}

void RemoteShardReader::Fetch(const std::shared_ptr<Resident>& r) {
  const Shard& shard = shards_[r->shard];
  if (options_.cache != nullptr) {
    auto held = options_.cache->Acquire(
        shard.url, shard.size, shard.sha256,
        [&](const remote::ObjectStore::Sink& sink) { return store_->Stream(shard.url, sink); },
        shard.version);
    std::lock_guard lock(mutex_);
    if (held) {
      r->cached.emplace(std::move(*held));
      r->received = shard.size;
      r->state = Resident::kDone;
    } else {
      r->error = held.error();
      r->state = Resident::kFailed;
    }
    ready_.notify_all();
    return;
  }
  r->bytes = ByteBuffer::Allocate(shard.size);  // only this thread touches bytes past received
  uint64_t at = 0;
  uint64_t published = 0;
  Status st = store_->Stream(shard.url, [&](const uint8_t* data, size_t size) -> Status {
    if (at + size > shard.size) {
      return MakeError(ErrorCode::kCorruptData,
                       "'" + remote::RedactUrl(shard.url) + "' is longer than the " +
                           std::to_string(shard.size) + " bytes indexed: it changed");
    }
    std::memcpy(r->bytes.data.get() + at, data, size);
    at += size;
    // Publishes progress every 256 KiB (and at the end) to waiting readers.
    if (at - published >= (256 << 10) || at == shard.size) {
      std::lock_guard lock(mutex_);
      r->received = at;
      published = at;
      ready_.notify_all();
    }
    return Ok();
  });
  std::lock_guard lock(mutex_);
  if (st && at == shard.size) {
    r->received = at;
    r->state = Resident::kDone;
  } else {
    r->state = Resident::kFailed;
    r->error =
        st ? Error{ErrorCode::kCorruptData,
                   "'" + remote::RedactUrl(shard.url) + "' ends at byte " + std::to_string(at) +
                       " but the index lists " + std::to_string(shard.size) + " bytes",
                   ""}
           : st.error();
    // Bytes that arrived stay readable (a reader may be copying them); the
    // samples past them fail with the stream's error.
    r->received = published;
  }
  ready_.notify_all();
}

}  // namespace sluice::runtime::tar
