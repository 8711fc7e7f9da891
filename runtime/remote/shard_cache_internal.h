// Internals shared by shard_cache.cc (lookups, locks, the directory scan)
// and shard_cache_download.cc (room, partial files, downloads). Not an API.
#pragma once

#include <sys/file.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/remote/shard_cache.h"
#include "sluice/result.h"

namespace sluice::runtime::remote {
namespace shard_cache_internal {

inline constexpr std::string_view kEntrySuffix = ".shard";
inline constexpr std::string_view kPartialPrefix = ".partial-";
// Hex digits of the key's hash that start its entries' and lock's names.
inline constexpr size_t kKeyHashDigits = 32;

// True when `entry` is an entry of the same key as entry `name` at another
// version (or without one): HASH.shard and HASH-VER.shard share HASH.
inline bool IsOtherVersion(std::string_view entry, std::string_view name) {
  return entry != name && entry.size() > kKeyHashDigits && name.size() > kKeyHashDigits &&
         entry.substr(0, kKeyHashDigits) == name.substr(0, kKeyHashDigits) &&
         (entry[kKeyHashDigits] == '.' || entry[kKeyHashDigits] == '-') &&
         entry.ends_with(kEntrySuffix);
}

// What a wait returns once the cache is cancelled (the loader shutting down).
inline std::unexpected<Error> CancelledError() {
  return MakeError(ErrorCode::kIo, "shard cache: cancelled (the loader is shutting down)");
}

inline Status IoError(const std::string& what, int err) {
  return MakeError(ErrorCode::kIo, "shard cache: " + what + ": " + std::strerror(err));
}

// flock(2) that retries on EINTR. Returns 0 or errno.
inline int Flock(int fd, int op) {
  while (::flock(fd, op) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

// Lower-case hex of `length` bytes.
std::string HexDigest(const unsigned char* digest, unsigned length);

struct DirEntry {
  std::string name;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  ino_t inode = 0;
};

// The cache directory's entries (*.shard) and the bytes of live partial
// downloads; with clean_partials, removes partial files no process holds.
Result<std::vector<DirEntry>> ScanDir(const std::string& dir, uint64_t* partial_bytes,
                                      bool clean_partials);

}  // namespace shard_cache_internal

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

}  // namespace sluice::runtime::remote
