// A local cache of whole remote shards (`source: {cache: {dir, max_bytes}}`),
// shared safely by every loader on the machine (one per rank) through the
// file system alone: no daemon, no shared memory.
//
// Layout of the cache directory:
//   HASH.shard            a complete, verified shard (HASH = the first 32 hex
//                         digits of SHA-256 of the key: the shard's URL without
//                         its authentication, KeyOf; a URL or its query is never
//                         used as a path) whose server gave no version
//   HASH-VER.shard        the same for the shard's version (ObjectInfo::version:
//                         ETag, Last-Modified, mtime), VER = the first 16 hex
//                         digits of SHA-256 of the version
//   HASH.lock             per-key download lock (empty; flock)
//   .partial-PID-TAG-N    a download in progress (never under the final name;
//                         TAG is random per ShardCache, PID for people only)
//   .lock                 the directory lock (flock), held while making room
//
// Contracts:
//  - A shard becomes visible under HASH.shard only complete and verified: it
//    is written to a .partial file, its size and SHA-256 are checked in the
//    same pass as the write, it is fdatasync'ed and then renamed into place.
//  - One download per key at a time across processes: the HASH.lock holder
//    downloads; the others wait for it and then find the entry.
//  - The directory holds at most max_bytes of shards and partial downloads
//    (sizes as st_size; a partial download reserves its whole expected size
//    while the directory lock is held, so two processes cannot both take the
//    same room). Room is made by evicting the least recently used entries
//    (recency = the entry's mtime, set at every hit) that no process holds.
//  - A held entry (a live CachedShard in any process: flock LOCK_SH) is never
//    evicted (one of an old version is removed, see below). If the room
//    cannot be made because held entries fill the budget, or the shard alone
//    is larger than max_bytes, the shard is downloaded into an unlinked file
//    that no other process sees (a
//    pass-through: read once, never kept; counted in stats.passthrough).
//  - Partial files left by a process that died are removed by the next Open
//    or eviction in any process. A downloader holds flock LOCK_EX on its
//    partial file from creation to rename; a cleaner removes only a partial
//    it can lock (the kernel drops a dead process's lock), never judging by
//    the PID in the name (processes in other PID namespaces share PIDs).
//  - A disk that refuses the space (each download reserves its whole size
//    with posix_fallocate first: ENOSPC, EDQUOT, EFBIG; EROFS) makes that
//    shard a pass-through, with one warning (stats.no_space). So does a
//    write refused with one of those errors after the reservation succeeded
//    (copy-on-write file systems: btrfs, overlays): the bytes written so far
//    move to memory, the partial file is removed, the download goes on. Pass-through
//    files are unlinked files in the directory, or in memory (memfd) when the
//    directory's disk refuses them too. A directory that cannot be written at
//    Open (read-only, no permission) gives a cache that only reads the entries
//    already there: every miss is a pass-through (one warning).
//  - Hits trust the cached bytes (they were verified when written); an entry
//    whose size no longer matches the expected size is replaced.
//  - An entry belongs to a (key, version): a shard replaced on its server by
//    one of the same size (a new version) is a miss, downloaded anew, and
//    that download, when kept, removes the key's entries of other versions
//    (under the directory lock, while the key's download lock is held:
//    counted in stats.stale_removed). They are removed even when held: a holder reads on
//    through its descriptor (the bytes of the version it indexed), and the
//    file's space, out of the budget from then on, is freed when it closes.
//    Without a version (a server that sends neither ETag nor Last-Modified)
//    only the size tells versions apart: a shard replaced by one of the same
//    size is served from its cached copy until evicted.
//  - Waits for other processes are bounded: a lock (another process's
//    download of the same key, or the directory lock) still held after
//    lock_wait_s makes the shard a pass-through download (counted in
//    stats.lock_timeouts), so a stopped or hung peer never stalls this loader.
//    After such a timeout the same lock is only tried, not waited for, until
//    this cache gets it again: a peer stopped while holding the directory
//    lock costs one wait, not one per shard. The shared lock that pins an
//    entry is waited for the same bounded way (a miss when it times out).
//    Cancel() ends every wait at once (kIo).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/remote/object_store.h"
#include "sluice/result.h"

namespace sluice::runtime::remote {

struct ShardCacheStats {
  uint64_t hits = 0;               // Acquire found the entry
  uint64_t misses = 0;             // Acquire downloaded it
  uint64_t bytes_written = 0;      // bytes downloaded into the cache
  uint64_t evictions = 0;          // entries this process removed to make room
  uint64_t checksum_failures = 0;  // downloads whose size or SHA-256 did not match
  uint64_t passthrough = 0;        // downloads that could not be kept (see above)
  uint64_t lock_timeouts = 0;      // waits for another process past lock_wait_s
  uint64_t no_space = 0;           // shards read past the cache because its disk refused their
                                   // file (ENOSPC, EDQUOT, EFBIG, EROFS); also in passthrough
  uint64_t stale_removed = 0;      // entries of a shard's other version removed by this
                                   // process when it downloaded the new one
};

// A shard held open for reading: the file stays readable through fd() for
// the life of this object, even if another process could evict it (it
// cannot while held: the shared lock pins it). Movable, not copyable.
class CachedShard {
 public:
  CachedShard() = default;
  CachedShard(int fd, std::string path, uint64_t size, bool kept)
      : fd_(fd), path_(std::move(path)), size_(size), kept_(kept) {}
  CachedShard(CachedShard&& other) noexcept;
  CachedShard& operator=(CachedShard&& other) noexcept;
  CachedShard(const CachedShard&) = delete;
  CachedShard& operator=(const CachedShard&) = delete;
  ~CachedShard();  // closes the descriptor, which releases the pin

  int fd() const { return fd_; }
  // The entry's path in the cache, or "" for a pass-through download.
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // False for a pass-through download (not kept in the cache).
  bool kept() const { return kept_; }
  // The same open file as a pass-through (path "", not kept).
  CachedShard AsPassThrough() && { return CachedShard(std::exchange(fd_, -1), "", size_, false); }

 private:
  int fd_ = -1;
  std::string path_;
  uint64_t size_ = 0;
  bool kept_ = false;
};

class ShardCache {
 public:
  // Creates `dir` (and its parents) when missing and removes partial files
  // left by dead processes. Errors: kInvalidArgument (max_bytes 0, empty
  // dir), kIo (cannot create the directory). A directory that exists but
  // cannot be written (EROFS, EACCES) is not an error: the cache then only
  // reads entries already there (see the file comment). lock_wait_s bounds
  // every wait for another process's lock (see the file comment).
  static Result<std::unique_ptr<ShardCache>> Open(const std::string& dir, uint64_t max_bytes,
                                                  double lock_wait_s = kDefaultLockWaitS);
  static constexpr double kDefaultLockWaitS = 60;

  // Ends every wait for another process's lock, now and later: those calls
  // return kIo ("cancelled"). For a loader shutting down.
  void Cancel() { cancelled_.store(true); }

  // Writes the shard's bytes, in order, through the sink (e.g. ObjectStore::Stream).
  using Fetch = std::function<Status(const ObjectStore::Sink& sink)>;

  // The shard `key` (its URL; entries are shared by the URLs with the same
  // KeyOf) at `version` (ObjectInfo::version, "" when the server gave none),
  // from the cache or downloaded through `fetch` into it; a download removes
  // the key's entries of other versions (see the file comment).
  // expected_size is the shard's size in bytes; expected_sha256 its
  // lower-case hex SHA-256, or "" to check the size only. The fetch is
  // trusted to stream `version` (a shard replaced again meanwhile is kept
  // under the version asked for). Thread-safe and
  // process-safe (see the file comment). Errors: kCorruptData naming the key
  // when the bytes fetched do not match the size or checksum (nothing is
  // kept); the fetch's own error; kIo for local file errors.
  Result<CachedShard> Acquire(const std::string& key, uint64_t expected_size,
                              const std::string& expected_sha256, const Fetch& fetch,
                              const std::string& version = "");

  // Bytes of entries and partial downloads in the directory now (all
  // processes; exact: read under the directory lock).
  Result<uint64_t> UsedBytes() const;

  ShardCacheStats stats() const;
  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }

  // What names `url`'s entry: for an http(s) URL, the URL without its user
  // info and without the query parameters that only authenticate the request
  // (they change with every presigned, SAS or token URL, the shard does not):
  // X-Amz-* (any case), Signature, Expires, AWSAccessKeyId, Key-Pair-Id,
  // Policy, X-Goog-*, GoogleAccessId, Azure SAS (sv ss srt sp se st spr sig sr
  // skoid sktid skt ske sks skv sdd) and token; names compared ignoring case.
  // Every other parameter is kept, in order (versionId, generation, ...: they
  // select the content). Other URLs as they are.
  static std::string KeyOf(std::string_view url);

  // The entry file name for `key` at `version` (HASH.shard, HASH of
  // KeyOf(key), or HASH-VER.shard; see the file comment), and the key's
  // download lock's (HASH.lock, one for all versions). For tests and tools.
  static std::string EntryName(const std::string& key, const std::string& version = "");
  static std::string KeyLockName(const std::string& key);

  // Tests only: every later space reservation (posix_fallocate) in any
  // ShardCache of this process fails with `err` (0 restores the real call).
  static void FailReservationsForTest(int err);
  // Tests only: every later write of a download's bytes at or past byte
  // `from` into a file on disk (not in memory) in any ShardCache of this
  // process fails with `err` (0 restores the real calls).
  static void FailDiskWritesForTest(int err, uint64_t from = 0);

 private:
  ShardCache(std::string dir, uint64_t max_bytes, double lock_wait_s);
  // Opens and pins entry `name` when it exists with `size` bytes; an empty
  // result when it does not (or was replaced while pinning).
  Result<CachedShard> OpenEntry(const std::string& name, uint64_t size, bool* found);
  // Under the directory lock: removes the entries of the other versions of
  // entry `name`'s key, evicts until `need` more bytes fit, then creates a
  // partial file reserving them. Returns its descriptor and name, or fd -1
  // when the room cannot be made (pass-through).
  Status ReserveAndCreate(const std::string& name, uint64_t need, int* fd, std::string* partial);
  // Creates, locks (LOCK_EX) and reserves a partial file of `need` bytes;
  // fd -1 when the disk refuses the space (counted, warned once).
  Status CreatePartial(uint64_t need, int* fd, std::string* partial);
  // A file for a pass-through download of `size` bytes (see the file
  // comment); on_disk: false when it is in memory.
  Result<int> PassThroughFile(uint64_t size, bool* on_disk);
  struct DownloadTarget;
  // Moves a download whose disk refused a write (`err`) to memory: the bytes
  // [0, written) are copied, a partial file is removed (the shard is then a
  // pass-through, counted in no_space), one warning.
  Status SpillToMemory(DownloadTarget& t, uint64_t written, int err);
  // Streams the shard through `fetch` into t (spilling to memory when the
  // disk refuses a write) and checks its size. Returns its SHA-256 (hex).
  Result<std::string> Receive(const std::string& key, uint64_t expected_size, const Fetch& fetch,
                              DownloadTarget& t);
  // Warns the first time the disk refuses space; `count`: in stats.no_space.
  void NoSpace(const std::string& what, int err, bool count = true);
  // keep = false downloads a pass-through without trying to reserve room.
  Result<CachedShard> Download(const std::string& key, const std::string& name,
                               uint64_t expected_size, const std::string& expected_sha256,
                               const Fetch& fetch, bool keep);
  class LockFile;
  // An exclusive flock on `path`, waiting at most lock_wait_s (not at all
  // while `path` is in held_too_long_): nullopt when another process held it
  // all that time (counted), kIo when cancelled or the file cannot be opened.
  Result<std::optional<LockFile>> Lock(const std::string& path) const;
  // Polls flock(fd, op | LOCK_NB) until it succeeds (0), `wait_s` passes
  // (EWOULDBLOCK), the cache is cancelled (ECANCELED) or flock fails (errno).
  int FlockWithin(int fd, int op, double wait_s) const;

  std::string dir_;
  uint64_t max_bytes_;
  double lock_wait_s_;
  std::string partial_tag_;  // random, in this cache's partial file names
  bool writable_ = true;     // false: a read-only directory (hits only)
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> space_warned_{false};
  std::atomic<uint64_t> hits_{0}, misses_{0}, bytes_written_{0}, evictions_{0},
      checksum_failures_{0}, passthrough_{0}, no_space_{0}, stale_removed_{0};
  mutable std::atomic<uint64_t> lock_timeouts_{0};
  // Lock paths whose last wait timed out (tried without waiting until got).
  mutable std::mutex held_mutex_;
  mutable std::set<std::string> held_too_long_;
  std::atomic<uint64_t> partial_counter_{0};
};

}  // namespace sluice::runtime::remote
