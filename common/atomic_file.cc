#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

namespace sluice {
namespace {

Status IoError(const std::string& what, const std::string& path, int err) {
  return MakeError(ErrorCode::kIo, "cannot " + what + " `" + path + "`: " + std::strerror(err));
}

// A name for the temporary file beside `path`: hidden, with the process id,
// a per-process counter and random bits, so that no two writers (threads or
// processes, even in other PID namespaces sharing the directory) pick the
// same one; O_EXCL catches what chance leaves.
std::string TempName(const std::filesystem::path& path) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp.%ld.%llu.%016llx", static_cast<long>(getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)),
                static_cast<unsigned long long>(rng()));
  return (path.parent_path() / ("." + path.filename().string() + suffix)).string();
}

// Writes all of `bytes` to `fd` and fsyncs it; 0 or an errno.
int WriteAndSync(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return ::fsync(fd) == 0 ? 0 : errno;
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = TempName(target);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) return IoError("create a temporary file for", path, errno);
  }
  if (fd < 0) return IoError("create a temporary file for", path, EEXIST);
  int err = WriteAndSync(fd, bytes);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return IoError("write", path, err);
  }
  // The rename is durable once the directory entry is on disk.
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return IoError("open the directory of", path, errno);
  err = ::fsync(dir_fd) == 0 ? 0 : errno;
  ::close(dir_fd);
  // Some file systems cannot fsync a directory (EINVAL); the file is written.
  if (err != 0 && err != EINVAL) return IoError("sync the directory of", path, err);
  return Ok();
}

}  // namespace sluice
