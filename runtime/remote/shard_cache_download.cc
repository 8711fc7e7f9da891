// ShardCache's downloads: making room (eviction), partial files, pass-through
// files, streaming and verifying a shard, and renaming it into place
// (runtime/remote/shard_cache.h states the contracts).
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "runtime/remote/shard_cache.h"
#include "runtime/remote/shard_cache_internal.h"

namespace sluice::runtime::remote {
namespace {

using shard_cache_internal::DirEntry;
using shard_cache_internal::Flock;
using shard_cache_internal::HexDigest;
using shard_cache_internal::IoError;
using shard_cache_internal::kPartialPrefix;
using shard_cache_internal::ScanDir;

// Removes `path` if no process holds it (LOCK_EX without waiting) and it is
// still the file that was scanned. True when removed.
bool TryEvict(const std::string& path, ino_t inode) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool removed = false;
  struct stat st;
  if (Flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &st) == 0 && st.st_ino == inode) {
    removed = ::unlink(path.c_str()) == 0;
  }
  ::close(fd);  // releases the lock; a reader waiting for LOCK_SH sees the path gone
  return removed;
}

// pwrite(2) of all `size` bytes at `offset`, retrying on EINTR: 0 or errno.
int WriteAll(int fd, const uint8_t* data, size_t size, uint64_t offset) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return 0;
}

// Copies bytes [0, size) of `from` to `to` at the same offsets. Returns 0 or
// errno (EIO for a file shorter than `size`).
int CopyBytes(int from, int to, uint64_t size) {
  std::vector<uint8_t> buffer(std::min<uint64_t>(size, uint64_t{1} << 20));
  for (uint64_t at = 0; at < size;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - at));
    const ssize_t n = ::pread(from, buffer.data(), want, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    if (const int err = WriteAll(to, buffer.data(), static_cast<size_t>(n), at)) return err;
    at += static_cast<uint64_t>(n);
  }
  return 0;
}

// An anonymous file in memory, for a shard the disk cannot hold.
Result<int> MemoryFile() {
  const int fd = ::memfd_create("sluice-shard", MFD_CLOEXEC);
  if (fd < 0) {
    return std::unexpected(IoError("cannot create a pass-through file in memory", errno).error());
  }
  return fd;
}

// Errors that mean the cache's disk cannot take a shard now (full, over
// quota, over the file size limit, read-only): the shard is read without it.
bool IsNoSpace(int err) { return err == ENOSPC || err == EDQUOT || err == EFBIG || err == EROFS; }

std::atomic<int> fail_reservations{0};  // ShardCache::FailReservationsForTest
std::atomic<int> fail_disk_writes{0};   // ShardCache::FailDiskWritesForTest
std::atomic<uint64_t> fail_disk_writes_from{0};

// The error FailDiskWritesForTest gives a disk write ending at `end`, or 0.
int InjectedWriteError(uint64_t end) {
  const int err = fail_disk_writes.load();
  return err != 0 && end > fail_disk_writes_from.load() ? err : 0;
}

// Allocates `size` bytes of `fd` on disk (so that writing them cannot run out
// of space). Returns 0 or an errno value.
int Reserve(int fd, uint64_t size) {
  if (const int err = fail_reservations.load()) return err;
  if (size == 0) return 0;
  int err;
  do {
    err = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  } while (err == EINTR);
  return err;
}

}  // namespace

void ShardCache::FailReservationsForTest(int err) { fail_reservations.store(err); }

void ShardCache::FailDiskWritesForTest(int err, uint64_t from) {
  fail_disk_writes_from.store(from);
  fail_disk_writes.store(err);
}

Status ShardCache::ReserveAndCreate(const std::string& name, uint64_t need, int* fd,
                                    std::string* partial) {
  *fd = -1;
  if (need > max_bytes_) return {};
  auto lock = Lock(dir_ + "/.lock");
  if (!lock) return std::unexpected(lock.error());
  if (!*lock) return {};  // held too long by another process: pass-through
  uint64_t used = 0;
  auto entries = ScanDir(dir_, &used, /*clean_partials=*/true);
  if (!entries) return std::unexpected(entries.error());
  // The key's other versions go first, held or not: no lookup of this
  // version finds them, and a holder keeps its descriptor (POSIX unlink).
  // Under the directory lock, so no scan counts them after this one, and
  // under the key's download lock, so no process renames one into place.
  std::erase_if(*entries, [&](const DirEntry& e) {
    if (!shard_cache_internal::IsOtherVersion(e.name, name)) return false;
    if (::unlink((dir_ + "/" + e.name).c_str()) != 0) return false;
    stale_removed_.fetch_add(1, std::memory_order_relaxed);
    return true;
  });
  for (const DirEntry& e : *entries) used += e.size;
  if (used + need > max_bytes_) {
    std::sort(entries->begin(), entries->end(), [](const DirEntry& a, const DirEntry& b) {
      return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.name < b.name;
    });
    for (const DirEntry& e : *entries) {
      if (used + need <= max_bytes_) break;
      if (TryEvict(dir_ + "/" + e.name, e.inode)) {
        used -= e.size;
        evictions_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  if (used + need > max_bytes_) return {};  // held entries fill the budget: pass-through
  return CreatePartial(need, fd, partial);
}

Status ShardCache::CreatePartial(uint64_t need, int* fd, std::string* partial) {
  // Unique across processes even when they share PIDs (containers): the
  // name carries this cache's random tag, and O_EXCL catches the rest.
  int created = -1;
  std::string path;
  for (int attempt = 0; created < 0; ++attempt) {
    *partial = std::string(kPartialPrefix) + std::to_string(::getpid()) + "-" + partial_tag_ + "-" +
               std::to_string(partial_counter_.fetch_add(1));
    path = dir_ + "/" + *partial;
    created = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (created >= 0 || (errno == EEXIST && attempt < 100)) continue;
    if (IsNoSpace(errno)) {
      NoSpace("cannot create '" + path + "'", errno);
      return {};
    }
    return IoError("cannot create '" + path + "'", errno);
  }
  // Held from creation (under the directory lock, so no cleaner sees the file
  // unlocked) until the rename: a cleaner removes only partials it can lock.
  if (const int err = Flock(created, LOCK_EX | LOCK_NB); err != 0) {
    ::close(created);
    ::unlink(path.c_str());
    return IoError("cannot lock '" + path + "'", err);
  }
  if (const int err = Reserve(created, need); err != 0) {
    ::close(created);
    ::unlink(path.c_str());
    if (IsNoSpace(err)) {
      NoSpace("cannot reserve " + std::to_string(need) + " bytes in '" + dir_ + "'", err);
      return {};
    }
    return IoError("cannot reserve " + std::to_string(need) + " bytes in '" + path + "'", err);
  }
  *fd = created;
  return {};
}

void ShardCache::NoSpace(const std::string& what, int err, bool count) {
  if (count) no_space_.fetch_add(1, std::memory_order_relaxed);
  if (!space_warned_.exchange(true)) {
    log::Warn("shard cache", what + ": " + std::strerror(err) +
                                 ": reading such shards without the cache (counted in "
                                 "stats.no_space; warned once)");
  }
}

Result<int> ShardCache::PassThroughFile(uint64_t size, bool* on_disk) {
  // An unlinked file in the cache directory, its whole size reserved; where
  // the directory's disk refuses the space (or the file), memory instead.
  *on_disk = false;
  if (writable_) {
    const int fd = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    const int err = fd < 0 ? errno : Reserve(fd, size);
    if (err == 0) {
      *on_disk = true;
      return fd;
    }
    if (fd >= 0) ::close(fd);
    if (IsNoSpace(err)) {
      NoSpace("cannot reserve " + std::to_string(size) + " bytes in '" + dir_ + "'", err,
              /*count=*/false);  // the shard was counted when its cache file was refused
    }
  }
  return MemoryFile();
}

// Where a download's bytes go: the partial file that becomes the entry
// (kept), or a pass-through file on disk or in memory.
struct ShardCache::DownloadTarget {
  CachedShard out;           // the file written; its path is the entry's when kept
  bool kept = false;         // a partial file in the cache, renamed when complete
  bool on_disk = false;      // false: in memory (a write cannot run out of disk)
  std::string partial_path;  // when kept
};

Status ShardCache::SpillToMemory(DownloadTarget& t, uint64_t written, int err) {
  auto memory = MemoryFile();
  if (!memory) return std::unexpected(memory.error());
  CachedShard moved(*memory, "", t.out.size(), /*kept=*/false);
  if (const int copy_err = CopyBytes(t.out.fd(), moved.fd(), written); copy_err != 0) {
    return IoError("cannot move a download to memory", copy_err);
  }
  const std::string where = t.kept ? t.partial_path : "a pass-through file in '" + dir_ + "'";
  // The shard was counted (in no_space, and as a pass-through) when a cache
  // file of its own is refused, not when its pass-through file is.
  NoSpace("cannot write to " + where, err, /*count=*/t.kept);
  if (t.kept) {
    ::unlink(t.partial_path.c_str());
    passthrough_.fetch_add(1, std::memory_order_relaxed);
  }
  t.out = std::move(moved);  // closes the file on disk, which frees its space
  t.kept = false;
  t.on_disk = false;
  return {};
}

Result<std::string> ShardCache::Receive(const std::string& key, uint64_t expected_size,
                                        const Fetch& fetch, DownloadTarget& t) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  uint64_t written = 0;
  const ObjectStore::Sink sink = [&](const uint8_t* data, size_t size) -> Status {
    if (written + size > expected_size) {
      return MakeError(
          ErrorCode::kCorruptData,
          "'" + key + "' is longer than the " + std::to_string(expected_size) + " bytes expected",
          "the shard changed after its manifest was written");
    }
    int err = t.on_disk ? InjectedWriteError(written + size) : 0;
    if (err == 0) err = WriteAll(t.out.fd(), data, size, written);
    // A disk that took the reservation may still refuse the bytes (copy-on-
    // write file systems): the download goes on in memory.
    if (err != 0 && t.on_disk && IsNoSpace(err)) {
      SLUICE_RETURN_IF_ERROR(SpillToMemory(t, written, err));
      err = WriteAll(t.out.fd(), data, size, written);
    }
    if (err != 0) return IoError("cannot write a download", err);
    EVP_DigestUpdate(ctx.get(), data, size);
    written += size;
    return {};
  };
  if (auto st = fetch(sink); !st) {
    if (st.error().code == ErrorCode::kCorruptData) {
      checksum_failures_.fetch_add(1, std::memory_order_relaxed);
    }
    return std::unexpected(st.error());
  }
  if (written != expected_size) {
    checksum_failures_.fetch_add(1, std::memory_order_relaxed);
    return MakeError(ErrorCode::kCorruptData,
                     "'" + key + "' has " + std::to_string(written) + " bytes, expected " +
                         std::to_string(expected_size),
                     "the shard changed after its manifest was written");
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  return HexDigest(digest, length);
}

Result<CachedShard> ShardCache::Download(const std::string& key, const std::string& name,
                                         uint64_t expected_size, const std::string& expected_sha256,
                                         const Fetch& fetch, bool keep) {
  int fd = -1;
  std::string partial;
  if (auto st = keep ? ReserveAndCreate(name, expected_size, &fd, &partial) : Status{}; !st) {
    return std::unexpected(st.error());
  }
  DownloadTarget t;
  t.kept = t.on_disk = fd >= 0;
  if (!t.kept) {
    auto file = PassThroughFile(expected_size, &t.on_disk);
    if (!file) return std::unexpected(file.error());
    fd = *file;
    passthrough_.fetch_add(1, std::memory_order_relaxed);
  }
  t.partial_path = t.kept ? dir_ + "/" + partial : "";
  t.out = CachedShard(fd, t.kept ? dir_ + "/" + name : "", expected_size, t.kept);
  auto discard = [&](Status st) -> Result<CachedShard> {
    if (t.kept) ::unlink(t.partial_path.c_str());
    return std::unexpected(st.error());
  };

  auto sha = Receive(key, expected_size, fetch, t);
  if (!sha) return discard(std::unexpected(sha.error()));
  if (!expected_sha256.empty() && *sha != expected_sha256) {
    checksum_failures_.fetch_add(1, std::memory_order_relaxed);
    return discard(MakeError(
        ErrorCode::kCorruptData,
        "'" + key + "': SHA-256 " + *sha + " does not match the manifest's " + expected_sha256,
        "the shard changed after its manifest was written, or was "
        "corrupted in transit"));
  }
  bytes_written_.fetch_add(expected_size, std::memory_order_relaxed);
  if (!t.kept) return std::move(t.out);
  if (::fdatasync(t.out.fd()) != 0) {
    return discard(IoError("cannot sync '" + t.partial_path + "'", errno));
  }
  // Under the directory lock, so that UsedBytes never sees the shard twice.
  auto lock = Lock(dir_ + "/.lock");
  if (!lock) return discard(std::unexpected(lock.error()));
  if (!*lock) {  // held too long by another process: keep the bytes to ourselves
    ::unlink(t.partial_path.c_str());
    passthrough_.fetch_add(1, std::memory_order_relaxed);
    return std::move(t.out).AsPassThrough();
  }
  // The exclusive lock becomes the shared one that pins the entry. flock
  // converts by unlocking first: safe here, as cleaners hold the directory lock.
  if (const int err = Flock(t.out.fd(), LOCK_SH); err != 0) {
    return discard(IoError("cannot lock '" + t.partial_path + "'", err));
  }
  if (::rename(t.partial_path.c_str(), t.out.path().c_str()) != 0) {
    return discard(IoError("cannot rename '" + t.partial_path + "'", errno));
  }
  return std::move(t.out);
}
}  // namespace sluice::runtime::remote
