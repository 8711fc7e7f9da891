#include "runtime/remote/shard_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
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
#include "runtime/remote/shard_cache_internal.h"

namespace sluice::runtime::remote {

namespace shard_cache_internal {

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

}  // namespace shard_cache_internal

namespace {

using shard_cache_internal::CancelledError;
using shard_cache_internal::DirEntry;
using shard_cache_internal::Flock;
using shard_cache_internal::HexDigest;
using shard_cache_internal::IoError;
using shard_cache_internal::kEntrySuffix;
using shard_cache_internal::kPartialPrefix;
using shard_cache_internal::ScanDir;

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

Result<std::vector<DirEntry>> shard_cache_internal::ScanDir(const std::string& dir,
                                                            uint64_t* partial_bytes,
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

std::string ShardCache::EntryName(const std::string& key, const std::string& version) {
  std::string name = Sha256Hex(KeyOf(key)).substr(0, shard_cache_internal::kKeyHashDigits);
  if (!version.empty()) name += "-" + Sha256Hex(version).substr(0, 16);
  return name + std::string(kEntrySuffix);
}

std::string ShardCache::KeyLockName(const std::string& key) {
  return Sha256Hex(KeyOf(key)).substr(0, shard_cache_internal::kKeyHashDigits) + ".lock";
}

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
Result<CachedShard> ShardCache::Acquire(const std::string& key, uint64_t expected_size,
                                        const std::string& expected_sha256, const Fetch& fetch,
                                        const std::string& version) {
  const std::string name = EntryName(key, version);
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
                         no_space_.load(),
                         stale_removed_.load()};
}

}  // namespace sluice::runtime::remote
