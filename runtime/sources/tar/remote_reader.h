// How a tar_shards source reads shards named by URL through an ObjectStore
// (runtime/remote/object_store.h), in one of two patterns the loader picks
// from its order (Source::SetReadPattern):
//
// kRandom (order: shuffle): one range request per sample (its tar header and
// data, located by the index). The loader announces the samples it is about
// to read (WillRead: each batch's indices when the batch is scheduled); the
// samples of one shard that lie close together (gaps <= coalesce_gap, one
// range <= coalesce_max) are planned as one coalesced range request, and a
// sample without a neighbour as a request of its own. `prefetch_requests`
// threads issue the planned requests in announcement order, ahead of the
// workers, so that a Read usually finds its bytes in memory instead of
// waiting one round trip; a Read whose request has not started issues it
// itself, and one whose request is in flight waits for it. Planned ranges
// (requested or not, until all their samples are read) hold at most
// coalesce_budget bytes: when a new plan would exceed it, the oldest ranges
// not in flight are dropped (their samples are read alone). With
// prefetch_requests = 0 only coalesced ranges are planned and nothing is
// requested before its first Read. Samples never announced are read alone.
//
// kShardStream (order: shard_shuffle, sequential): whole shards are streamed
// (ObjectStore::Stream) into memory by `read_ahead + 1` fetch threads. The
// announced samples (a window of HintWindow() samples ahead of the loader)
// name the shards needed next, in order; up to read_ahead + 1 of them are in
// flight at once, and shards stay in memory while they have announced samples
// not yet read. A Read waits only until its member's bytes have arrived (not
// for the whole shard). Shards in memory (in flight included) hold at most
// max_resident_bytes; beyond that read-ahead waits, and a Read that finds no
// room (every shard in memory still being read) reads its sample alone (after
// waiting for any stream that has all its bytes to return). A
// shard larger than max_resident_bytes is read sample by sample. A shard
// whose stream fails stays failed for the rest of that pass over it: its
// samples fail fast with the stream's error (the store's message: URL and
// last HTTP status), and it is not fetched again (no retry storm). Its next
// pass (one of its samples announced again: the loader announces each
// sample once per epoch, so the next epoch; without announcements, one read
// again) drops the failure and streams the shard anew.
//
// Thread-safe. Cancel() wakes every waiting Read (kIo) and cancels the
// store; the destructor cancels and joins the fetch threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/remote/object_store.h"
#include "runtime/remote/shard_cache.h"
#include "sluice/result.h"

namespace sluice::runtime::tar {

enum class ReadPattern { kRandom, kShardStream };

struct RemoteReadOptions {
  // kShardStream: shards in flight beyond the one being read (`read_ahead`)
  // at first. When max_read_ahead is larger, the reader adds one each time a
  // read waits for a shard the read-ahead had already started (a stall), up
  // to max_read_ahead (read_ahead.h chooses both for "auto").
  int read_ahead = 2;
  int max_read_ahead = 0;  // < read_ahead: fixed at read_ahead
  // kShardStream: bytes of whole shards held in memory at once.
  uint64_t max_resident_bytes = uint64_t{1} << 30;
  // kRandom: coalescing limits (see the file comment).
  uint64_t coalesce_gap = 64 << 10;
  uint64_t coalesce_max = 8 << 20;
  uint64_t coalesce_budget = 64 << 20;
  // kRandom: planned range requests issued ahead of the reads, at most this
  // many at once (at most 32; tar_shards sets it to remote.max_connections).
  int prefetch_requests = 8;
  // A local cache of whole shards (`cache: {dir, max_bytes}`), or null. With a
  // cache every pattern reads whole shards through it (kShardStream's
  // machinery, the shard acquired from the cache or downloaded into it by a
  // fetch thread, then pread); max_resident_bytes bounds the shards held
  // open (pinned) in it.
  std::shared_ptr<remote::ShardCache> cache;
};

// What the reader did (cumulative).
struct RemoteReadCounters {
  uint64_t coalesced_requests = 0;   // range requests that served several samples
  uint64_t coalesced_samples = 0;    // samples read from such a request
  uint64_t direct_reads = 0;         // samples read with their own range request
  uint64_t prefetched_requests = 0;  // planned requests issued ahead of their first Read
  uint64_t shards_streamed = 0;      // whole-shard streams started
  uint64_t stream_reads = 0;         // samples read from a streamed shard
  uint64_t read_ahead_stalls = 0;    // read-ahead shards a read had to wait for
  int read_ahead = 0;                // shards streamed ahead now
};

class RemoteShardReader {
 public:
  struct Shard {
    std::string url;
    uint64_t size = 0;
    uint64_t start = 0;  // its first dataset index
    // The manifest's SHA-256 of the whole shard (hex), or "" (for a shard
    // cache that verifies what it keeps).
    std::string sha256;
    // ObjectInfo::version when the shards were resolved (a shard cache's
    // entries belong to a version), or "".
    std::string version;
  };
  const std::vector<Shard>& shards() const { return shards_; }
  RemoteShardReader(std::shared_ptr<remote::ObjectStore> store, std::vector<Shard> shards,
                    uint64_t num_samples, RemoteReadOptions options);
  ~RemoteShardReader();
  RemoteShardReader(const RemoteShardReader&) = delete;
  RemoteShardReader& operator=(const RemoteShardReader&) = delete;

  // Before the first read (kRandom until then). kShardStream starts the
  // fetch threads.
  void SetPattern(ReadPattern pattern);
  ReadPattern pattern() const { return pattern_; }
  // Samples to announce ahead of the current batch (kShardStream: about
  // read_ahead + 1 shards' worth; kRandom: 0).
  uint64_t HintWindow() const;
  // The loader will read these dataset indices, in this order. Never blocks
  // on I/O. `offsets` gives each index's member range (header + data) as
  // {shard, offset, length}; see tar_shards_source.cc.
  struct Range {
    uint64_t index;
    size_t shard;
    uint64_t offset, length;
  };
  void WillRead(std::span<const Range> ranges);
  // Reads `range` into out[0, range.length). Errors: the store's (they name
  // the URL), kIo when cancelled, kCorruptData when a streamed shard is
  // shorter or longer than indexed.
  Status Read(const Range& range, uint8_t* out);
  // Read, but only when the bytes have arrived: a planned range request that
  // is done (order: shuffle), or a shard streamed into memory up to the
  // range's end (shard_shuffle / sequential). nullopt when the caller would
  // have to wait: nothing was consumed; call Read. Never blocks on the store.
  std::optional<Status> ReadIfReady(const Range& range, uint8_t* out);

  void Cancel();
  RemoteReadCounters counters() const;
  // The cache's counters (zeros without a cache).
  remote::ShardCacheStats cache_stats() const;
  remote::ObjectStore& store() const { return *store_; }

 private:
  // Heap bytes that are not zero-filled when allocated: every byte is written
  // (by a response body or a shard stream) before it is read.
  struct ByteBuffer {
    std::unique_ptr<uint8_t[]> data;
    uint64_t size = 0;
    static ByteBuffer Allocate(uint64_t n) {
      return {std::unique_ptr<uint8_t[]>(new uint8_t[n]), n};
    }
  };
  struct Group;
  struct Resident;
  Status ReadDirect(const Range& r, uint8_t* out);
  Status ReadRandom(const Range& r, uint8_t* out);
  Status ReadStream(const Range& r, uint8_t* out);
  void PlanLocked(std::span<const Range> ranges);
  // Unplans g; its buffer goes back to the spares once it has no reader.
  // By value: the caller may pass groups_'s own element, which this erases.
  void DropGroupLocked(std::shared_ptr<Group> g);
  void RecycleGroupBufferLocked(const std::shared_ptr<Group>& g);
  // A read waiting for g's bytes holds g (++g->readers): the buffer is kept
  // until the read lets go here, even when the group is dropped meanwhile
  // (by the budget).
  void ReleaseGroupLocked(const std::shared_ptr<Group>& g);
  // Frees memory until `bytes` more fit; `force` may evict shards that still
  // have announced reads. False when not possible.
  bool MakeRoomLocked(uint64_t bytes, bool force);
  // Whether a stream has delivered all its shard's bytes but not returned
  // yet (its shard cannot be evicted until it does).
  bool FinishingStreamLocked() const;
  // Marks r's sample as read in its shard's current pass; a sample seen
  // before starts the shard's next pass, which drops a failed stream.
  void NotePassLocked(const Range& r);
  void ScheduleLocked();
  // kRandom: loads planned groups in announcement order (a prefetch thread).
  void PrefetchLoop();
  // Issues g's request (the caller set g->state to kLoading) and publishes
  // the outcome; `lock` is released while the request runs.
  void LoadGroup(const std::shared_ptr<Group>& g, std::unique_lock<std::mutex>& lock);
  std::shared_ptr<Resident> StartFetchLocked(size_t shard, bool urgent);
  void FetchLoop();
  void Fetch(const std::shared_ptr<Resident>& r);

  std::shared_ptr<remote::ObjectStore> store_;
  std::vector<Shard> shards_;
  uint64_t num_samples_;
  RemoteReadOptions options_;
  ReadPattern pattern_ = ReadPattern::kRandom;
  bool whole_shards_ = false;  // kShardStream, or any pattern with a cache

  mutable std::mutex mutex_;
  std::condition_variable ready_;  // a group or shard made progress
  std::condition_variable work_;   // a shard was queued for fetching
  bool cancelled_ = false;
  RemoteReadCounters counters_;
  // kRandom.
  std::unordered_map<uint64_t, std::shared_ptr<Group>> planned_;
  std::deque<std::shared_ptr<Group>> groups_;
  uint64_t planned_bytes_ = 0;
  std::deque<std::weak_ptr<Group>> prefetch_queue_;  // planned, not yet requested
  std::condition_variable prefetch_work_;            // prefetch_queue_ grew
  std::vector<std::thread> prefetchers_;
  // Dropped groups' buffers (each at least its group's length, rounded up to
  // a power of two), reused by later groups that fit; at most kMaxSpareBytes
  // in all.
  static constexpr uint64_t kMaxSpareBytes = 32 << 20;
  std::vector<ByteBuffer> spare_buffers_;
  uint64_t spare_bytes_ = 0;
  // kShardStream.
  std::vector<std::shared_ptr<Resident>> resident_;  // per shard, or null
  std::vector<int64_t> pending_;                     // announced reads not yet done
  std::vector<bool> wanted_flag_;
  std::deque<size_t> wanted_;  // announced shards not in memory, in order
  std::vector<bool> seen_;     // per sample: announced in its shard's current pass
  std::deque<std::shared_ptr<Resident>> fetch_queue_;
  uint64_t resident_bytes_ = 0;
  int in_flight_ = 0;  // residents queued or loading
  // Shards streamed ahead now (options_.read_ahead, grown on stalls up to
  // options_.max_read_ahead); written under mutex_, read by HintWindow too.
  std::atomic<int> read_ahead_{0};
  size_t first_streamed_ = SIZE_MAX;  // the first shard streamed (its wait is no stall)
  uint64_t tick_ = 0;
  bool hinted_ = false;
  std::vector<std::thread> fetchers_;
};

}  // namespace sluice::runtime::tar
