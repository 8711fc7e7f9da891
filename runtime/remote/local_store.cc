#include "runtime/remote/local_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/pread_full.h"

namespace sluice::runtime::remote {
namespace {

using Clock = std::chrono::steady_clock;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

Error IoError(int err, const std::string& what, const std::string& url) {
  Error e;
  e.code = err == ENOENT || err == ENOTDIR ? ErrorCode::kNotFound : ErrorCode::kIo;
  e.message = what + " '" + url + "': " + std::strerror(err);
  return e;
}

// Opens url's file; -errno on failure.
int OpenFile(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd < 0 ? -errno : fd;
}

// ObjectInfo::version of a local file: its modification time.
std::string MtimeVersion(const struct stat& st) {
  return "mtime " + std::to_string(int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec);
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<std::string> LocalPathOf(std::string_view url) {
  if (!StartsWithNoCase(url, "file:")) return std::string(url);
  std::string_view rest = url.substr(5);
  if (!rest.starts_with("//")) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'" + std::string(url) + "' is not a file:// URL with an absolute path",
                     "write file:///absolute/path");
  }
  rest.remove_prefix(2);
  const size_t slash = rest.find('/');
  const std::string_view host = rest.substr(0, slash);
  if (slash == std::string_view::npos || (!host.empty() && host != "localhost")) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'" + std::string(url) + "' names a file on host '" + std::string(host) +
                         "'; only local files are read through file://",
                     "write file:///absolute/path");
  }
  rest.remove_prefix(slash);
  std::string out;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size() && HexValue(rest[i + 1]) >= 0 &&
        HexValue(rest[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(rest[i + 1]) * 16 + HexValue(rest[i + 2]));
      i += 2;
    } else {
      out += rest[i];
    }
  }
  return out;
}

Status LocalStore::Cancelled(const std::string& url) const {
  return MakeError(ErrorCode::kIo, "'" + url + "': cancelled (the loader is shutting down)");
}

void LocalStore::Record(uint64_t bytes, double seconds, bool ok) {
  std::lock_guard lock(mutex_);
  ++stats_.requests;
  stats_.bytes_fetched += bytes;
  if (!ok) {
    ++stats_.failures;
    return;
  }
  latency_.Add(seconds);
}

RequestStats LocalStore::stats() const {
  std::lock_guard lock(mutex_);
  RequestStats s = stats_;
  s.latency_p50_s = latency_.Quantile(0.5);
  s.latency_p99_s = latency_.Quantile(0.99);
  return s;
}

Result<ObjectInfo> LocalStore::Stat(const std::string& url) {
  if (cancelled_.load()) return std::unexpected(Cancelled(url).error());
  auto path = LocalPathOf(url);
  if (!path) return std::unexpected(path.error());
  struct stat st;
  if (::stat(path->c_str(), &st) != 0) return std::unexpected(IoError(errno, "cannot stat", url));
  if (!S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kNotFound, "'" + url + "' is not a regular file");
  }
  return ObjectInfo{url, static_cast<uint64_t>(st.st_size), MtimeVersion(st)};
}

Result<std::vector<ObjectInfo>> LocalStore::List(const std::string& prefix) {
  if (cancelled_.load()) return std::unexpected(Cancelled(prefix).error());
  auto path = LocalPathOf(prefix);
  if (!path) return std::unexpected(path.error());
  const size_t cut = path->rfind('/');
  const std::string dir = cut == std::string::npos ? "." : cut == 0 ? "/" : path->substr(0, cut);
  const std::string name_prefix = cut == std::string::npos ? *path : path->substr(cut + 1);
  const size_t url_cut = prefix.rfind('/');
  const std::string url_dir = url_cut == std::string::npos ? "" : prefix.substr(0, url_cut + 1);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return std::unexpected(IoError(errno, "cannot list", prefix));
  std::vector<ObjectInfo> out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || !name.starts_with(name_prefix)) continue;
    struct stat st;
    const std::string full = (dir == "/" ? "" : dir) + "/" + name;
    if (::stat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back(ObjectInfo{url_dir + name, static_cast<uint64_t>(st.st_size), MtimeVersion(st)});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.url < b.url; });
  return out;
}

Status LocalStore::ReadRange(const std::string& url, uint64_t offset, uint64_t length,
                             uint8_t* out) {
  if (cancelled_.load()) return Cancelled(url);
  const auto t0 = Clock::now();
  auto path = LocalPathOf(url);
  if (!path) return std::unexpected(path.error());
  Fd f{OpenFile(*path)};
  if (f.fd < 0) {
    Record(0, 0, false);
    return std::unexpected(IoError(-f.fd, "cannot open", url));
  }
  const int64_t read = PreadFull(f.fd, out, length, offset);
  if (read < 0) {
    Record(0, 0, false);
    return std::unexpected(IoError(static_cast<int>(-read), "cannot read", url));
  }
  const uint64_t got = static_cast<uint64_t>(read);
  if (got < length) {
    Record(got, 0, false);
    return MakeError(ErrorCode::kCorruptData, "'" + url + "': the object ends at byte " +
                                                  std::to_string(offset + got) +
                                                  ", inside the range [" + std::to_string(offset) +
                                                  ", " + std::to_string(offset + length) + ")");
  }
  Record(got, std::chrono::duration<double>(Clock::now() - t0).count(), true);
  return Ok();
}

Status LocalStore::Stream(const std::string& url, const Sink& sink) {
  if (cancelled_.load()) return Cancelled(url);
  const auto t0 = Clock::now();
  auto path = LocalPathOf(url);
  if (!path) return std::unexpected(path.error());
  Fd f{OpenFile(*path)};
  if (f.fd < 0) {
    Record(0, 0, false);
    return std::unexpected(IoError(-f.fd, "cannot open", url));
  }
  constexpr size_t kChunk = 4 << 20;
  std::vector<uint8_t> chunk(kChunk);
  uint64_t total = 0;
  while (true) {
    if (cancelled_.load()) {
      Record(total, 0, false);
      return Cancelled(url);
    }
    const ssize_t n = ::read(f.fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Record(total, 0, false);
      return std::unexpected(IoError(errno, "cannot read", url));
    }
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
    if (Status st = sink(chunk.data(), static_cast<size_t>(n)); !st) {
      Record(total, 0, false);
      return st;
    }
  }
  Record(total, std::chrono::duration<double>(Clock::now() - t0).count(), true);
  return Ok();
}

}  // namespace sluice::runtime::remote
