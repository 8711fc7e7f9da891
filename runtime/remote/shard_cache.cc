#include "runtime/remote/shard_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "common/log.h"

namespace sluice::runtime::remote {
namespace {

constexpr std::string_view kEntrySuffix = ".shard";
constexpr std::string_view kPartialPrefix = ".partial-";

// What a wait returns once the cache is cancelled (the loader shutting down).
std::unexpected<Error> CancelledError() {
  return MakeError(ErrorCode::kIo, "shard cache: cancelled (the loader is shutting down)");
}

Status IoError(const std::string& what, int err) {
  return MakeError(ErrorCode::kIo, "shard cache: " + what + ": " + std::strerror(err));
}

// flock(2) that retries on EINTR. Returns 0 or errno.
int Flock(int fd, int op) {
  while (::flock(fd, op) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

std::string HexDigest(const unsigned char* digest, unsigned length) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * length);
  for (unsigned i = 0; i < length; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

std::string Sha256Hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  return HexDigest(digest, length);
}

// True when no process is downloading into the partial file at `path`: its
// downloader holds LOCK_EX on it from creation to rename, and the kernel
// releases that lock when the downloader dies, whatever PID namespace it ran
// in (a PID in the name is for people only: containers sharing the directory
// may reuse each other's PIDs). Removes the file then.
bool RemoveIfAbandoned(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  const bool abandoned = Flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (abandoned) ::unlink(path.c_str());
  ::close(fd);
  return abandoned;
}

struct DirEntry {
  std::string name;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  ino_t inode = 0;
};

// The cache directory's entries (*.shard) and the bytes of live partial
// downloads; with clean_partials, removes partial files no process holds.
Result<std::vector<DirEntry>> ScanDir(const std::string& dir, uint64_t* partial_bytes,
                                      bool clean_partials) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return std::unexpected(IoError("cannot list '" + dir + "'", errno).error());
  std::vector<DirEntry> entries;
  *partial_bytes = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    const bool is_entry = name.size() > kEntrySuffix.size() && name.ends_with(kEntrySuffix);
    const bool is_partial = name.starts_with(kPartialPrefix);
    if (!is_entry && !is_partial) continue;
    const std::string path = dir + "/" + std::string(name);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (is_partial) {
      if (!clean_partials || !RemoveIfAbandoned(path)) {
        *partial_bytes += static_cast<uint64_t>(st.st_size);
      }
      continue;
    }
    entries.push_back(DirEntry{
        std::string(name), static_cast<uint64_t>(st.st_size),
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, st.st_ino});
  }
  ::closedir(d);
  return entries;
}

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

// True for a query parameter name that only authenticates a request (see
// ShardCache::KeyOf), compared ignoring case.
bool IsAuthParam(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.starts_with("x-amz-") || lower.starts_with("x-goog-")) return true;
  static constexpr std::string_view kNames =
      " signature expires awsaccesskeyid key-pair-id policy googleaccessid token"
      " sv ss srt sp se st spr sig sr skoid sktid skt ske sks skv sdd ";
  return !lower.empty() && lower.find(' ') == std::string::npos &&
         kNames.find(" " + lower + " ") != std::string_view::npos;
}

std::string RandomTag() {
  std::random_device random;
  char text[9];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(random()));
  return text;
}

}  // namespace

void ShardCache::FailReservationsForTest(int err) { fail_reservations.store(err); }

void ShardCache::FailDiskWritesForTest(int err, uint64_t from) {
  fail_disk_writes_from.store(from);
  fail_disk_writes.store(err);
}

ShardCache::ShardCache(std::string dir, uint64_t max_bytes, double lock_wait_s)
    : dir_(std::move(dir)),
      max_bytes_(max_bytes),
      lock_wait_s_(lock_wait_s),
      partial_tag_(RandomTag()) {}

CachedShard::CachedShard(CachedShard&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      size_(other.size_),
      kept_(other.kept_) {}

CachedShard& CachedShard::operator=(CachedShard&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    size_ = other.size_;
    kept_ = other.kept_;
  }
  return *this;
}

CachedShard::~CachedShard() {
  if (fd_ >= 0) ::close(fd_);
}

std::string ShardCache::KeyOf(std::string_view url) {
  const size_t colon = url.find("://");
  if (colon == std::string_view::npos) return std::string(url);
  std::string scheme(url.substr(0, colon));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "http" && scheme != "https") return std::string(url);
  const size_t query = std::min(url.find('?'), url.size());
  std::string out(url.substr(0, query));
  // User info (user:password@) authenticates too.
  const size_t host = colon + 3;
  const size_t at = out.rfind('@', std::min(out.find('/', host), out.size()));
  if (at != std::string::npos && at >= host) out.erase(host, at + 1 - host);
  char sep = '?';
  std::string_view rest = url.substr(std::min(query + 1, url.size()));
  rest = rest.substr(0, std::min(rest.find('#'), rest.size()));
  while (!rest.empty()) {
    const size_t amp = std::min(rest.find('&'), rest.size());
    const std::string_view param = rest.substr(0, amp);
    rest.remove_prefix(std::min(amp + 1, rest.size()));
    if (param.empty() || IsAuthParam(param.substr(0, param.find('=')))) continue;
    out += sep;
    out += param;
    sep = '&';
  }
  return out;
}

std::string ShardCache::EntryName(const std::string& key) {
  return Sha256Hex(KeyOf(key)).substr(0, 32) + std::string(kEntrySuffix);
}

std::string ShardCache::KeyLockName(const std::string& key) {
  return Sha256Hex(KeyOf(key)).substr(0, 32) + ".lock";
}

// An exclusive flock, held for the object's life (released by close).
class ShardCache::LockFile {
 public:
  explicit LockFile(int fd) : fd_(fd) {}
  LockFile(LockFile&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;
  ~LockFile() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_;
};

int ShardCache::FlockWithin(int fd, int op, double wait_s) const {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::clamp(wait_s, 0.0, 1e6)));
  // Polled with a growing pause (1 ms to 50 ms): flock itself cannot time out
  // or be interrupted by another thread.
  std::chrono::microseconds pause(1000);
  for (;;) {
    const int err = Flock(fd, op | LOCK_NB);
    if (err != EWOULDBLOCK) return err;
    if (cancelled_.load()) return ECANCELED;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return EWOULDBLOCK;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::microseconds(50000));
  }
}

Result<std::optional<ShardCache::LockFile>> ShardCache::Lock(const std::string& path) const {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return std::unexpected(IoError("cannot open lock '" + path + "'", errno).error());
  LockFile held(fd);  // closes fd on every return but the first
  bool timed_out_before;
  {
    std::lock_guard lock(held_mutex_);
    timed_out_before = held_too_long_.contains(path);
  }
  const int err = FlockWithin(fd, LOCK_EX, timed_out_before ? 0.0 : lock_wait_s_);
  if (err == 0) {
    if (timed_out_before) {
      std::lock_guard lock(held_mutex_);
      held_too_long_.erase(path);
    }
    return std::optional<LockFile>(std::move(held));
  }
  if (err == ECANCELED) {
    return CancelledError();
  }
  if (err != EWOULDBLOCK) {
    return std::unexpected(IoError("cannot lock '" + path + "'", err).error());
  }
  {
    std::lock_guard lock(held_mutex_);
    held_too_long_.insert(path);
  }
  if (lock_timeouts_.fetch_add(1) == 0) {
    log::Warn("shard cache", "'" + path + "' was held by another process for more than " +
                                 SecondsText(lock_wait_s_) +
                                 ": reading shards without the cache while it stays held");
  }
  return std::optional<LockFile>();
}

Result<std::unique_ptr<ShardCache>> ShardCache::Open(const std::string& dir, uint64_t max_bytes,
                                                     double lock_wait_s) {
  if (dir.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "shard cache: no directory given",
                     "set source.cache.dir");
  }
  if (max_bytes == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "shard cache: max_bytes is 0",
                     "give cache.max_bytes, e.g. 50GB");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return std::unexpected(IoError("cannot create '" + dir + "'", ec.value()).error());
  std::unique_ptr<ShardCache> cache(new ShardCache(dir, max_bytes, lock_wait_s));
  if (::access(dir.c_str(), W_OK) != 0) {
    if (errno != EROFS && errno != EACCES && errno != EPERM) {
      return std::unexpected(IoError("cannot write to '" + dir + "'", errno).error());
    }
    // Shards already there are still read; the others pass through.
    log::Warn("shard cache", "cannot write to '" + dir + "': " + std::strerror(errno) +
                                 ": using only the shards already there, reading the others "
                                 "without the cache");
    cache->writable_ = false;
    return cache;
  }
  auto lock = cache->Lock(dir + "/.lock");
  if (!lock) return std::unexpected(lock.error());
  uint64_t partial_bytes = 0;
  if (!*lock) return cache;  // leftovers are cleaned by a later eviction
  if (auto scan = ScanDir(dir, &partial_bytes, /*clean_partials=*/true); !scan) {
    return std::unexpected(scan.error());
  }
  return cache;
}

Result<CachedShard> ShardCache::OpenEntry(const std::string& name, uint64_t size, bool* found) {
  *found = false;
  const std::string path = dir_ + "/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return CachedShard();
    return std::unexpected(IoError("cannot open '" + path + "'", errno).error());
  }
  CachedShard held(fd, path, size, /*kept=*/true);  // closes fd on every early return
  // Another process evicting this entry holds it exclusively for a moment;
  // one stopped right then must not stall us: past lock_wait_s it is a miss.
  if (const int err = FlockWithin(fd, LOCK_SH, lock_wait_s_); err != 0) {
    if (err == EWOULDBLOCK) return CachedShard();
    if (err == ECANCELED) {
      return CancelledError();
    }
    return std::unexpected(IoError("cannot lock '" + path + "'", err).error());
  }
  struct stat opened, current;
  if (::fstat(fd, &opened) != 0 || ::stat(path.c_str(), &current) != 0 ||
      opened.st_ino != current.st_ino || static_cast<uint64_t>(opened.st_size) != size) {
    return CachedShard();  // evicted or replaced while pinning, or stale: download again
  }
  ::futimens(fd, nullptr);  // recency for LRU (best effort)
  *found = true;
  return held;
}

Status ShardCache::ReserveAndCreate(uint64_t need, int* fd, std::string* partial) {
  *fd = -1;
  if (need > max_bytes_) return {};
  auto lock = Lock(dir_ + "/.lock");
  if (!lock) return std::unexpected(lock.error());
  if (!*lock) return {};  // held too long by another process: pass-through
  uint64_t used = 0;
  auto entries = ScanDir(dir_, &used, /*clean_partials=*/true);
  if (!entries) return std::unexpected(entries.error());
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
  if (auto st = keep ? ReserveAndCreate(expected_size, &fd, &partial) : Status{}; !st) {
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

Result<CachedShard> ShardCache::Acquire(const std::string& key, uint64_t expected_size,
                                        const std::string& expected_sha256, const Fetch& fetch) {
  const std::string name = EntryName(key);
  bool found = false;
  auto held = OpenEntry(name, expected_size, &found);
  if (!held || found) {
    if (found) hits_.fetch_add(1, std::memory_order_relaxed);
    return held;
  }
  if (!writable_) {  // a read-only directory: hits only
    misses_.fetch_add(1, std::memory_order_relaxed);
    return Download(key, name, expected_size, expected_sha256, fetch, /*keep=*/false);
  }
  // One download per key across processes: the lock holder downloads, the
  // others wait here and then find its entry.
  // A holder that takes longer than lock_wait_s (stopped, hung, or on a far
  // slower link) is not waited for: this process reads the shard itself.
  auto key_lock = Lock(dir_ + "/" + KeyLockName(key));
  if (!key_lock) return std::unexpected(key_lock.error());
  if (*key_lock) {
    held = OpenEntry(name, expected_size, &found);
    if (!held || found) {
      if (found) hits_.fetch_add(1, std::memory_order_relaxed);
      return held;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  return Download(key, name, expected_size, expected_sha256, fetch, /*keep=*/key_lock->has_value());
}

Result<uint64_t> ShardCache::UsedBytes() const {
  std::optional<LockFile> held;  // none in a read-only directory: nothing changes there
  if (writable_) {
    auto lock = Lock(dir_ + "/.lock");
    if (!lock) return std::unexpected(lock.error());
    if (!*lock) {
      return MakeError(ErrorCode::kIo, "shard cache: '" + dir_ +
                                           "/.lock' was held by another process for more than " +
                                           SecondsText(lock_wait_s_));
    }
    held.emplace(std::move(**lock));
  }
  uint64_t used = 0;
  auto entries = ScanDir(dir_, &used, /*clean_partials=*/false);
  if (!entries) return std::unexpected(entries.error());
  for (const DirEntry& e : *entries) used += e.size;
  return used;
}

ShardCacheStats ShardCache::stats() const {
  return ShardCacheStats{hits_.load(),
                         misses_.load(),
                         bytes_written_.load(),
                         evictions_.load(),
                         checksum_failures_.load(),
                         passthrough_.load(),
                         lock_timeouts_.load(),
                         no_space_.load()};
}

}  // namespace sluice::runtime::remote
