#include "runtime/sources/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "common/pread_full.h"

namespace sluice::runtime {
namespace {

// Closes the descriptor on every return path.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

std::unexpected<Error> ErrnoError(int err, const std::string& what, const std::string& path) {
  ErrorCode code = (err == ENOENT || err == ENOTDIR) ? ErrorCode::kNotFound : ErrorCode::kIo;
  return MakeError(code, what + " '" + path + "': " + std::strerror(err));
}

// Reads the whole regular file open at `fd` (named `path` in messages).
Result<size_t> ReadOpenFile(int fd, const std::string& path, std::vector<uint8_t>& buffer) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kIo, "not a regular file: '" + path + "'");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (buffer.size() < size) buffer.resize(size);

  // Fewer bytes when the file shrank after fstat: what is there.
  const int64_t done = PreadFull(fd, buffer.data(), size, 0);
  if (done < 0) return ErrnoError(static_cast<int>(-done), "cannot read", path);
  return static_cast<size_t>(done);
}

std::unexpected<Error> Outside(const std::string& shown, const std::string& dir) {
  return MakeError(ErrorCode::kIo, "'" + shown + "' resolves outside the file list's root '" +
                                       (dir.empty() ? "." : dir) +
                                       "' (through '..' or a symlink); set allow_outside_root: "
                                       "true on file_list to read files outside it");
}

// openat2(dir_fd, rel, RESOLVE_BENEATH): the descriptor, or -1 with errno set
// (ENOSYS where this kernel or build has no openat2).
int OpenBeneath(int dir_fd, const char* rel) {
#ifdef SYS_openat2
  struct open_how how {};
  how.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;  // a FIFO fails fstat, never blocks
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  long fd;
  do {
    fd = ::syscall(SYS_openat2, dir_fd, rel, &how, sizeof(how));
  } while (fd < 0 && (errno == EINTR || errno == EAGAIN));  // EAGAIN: a concurrent rename
  return static_cast<int>(fd);
#else
  (void)dir_fd, (void)rel;
  errno = ENOSYS;
  return -1;
#endif
}

// Set once openat2 has failed with "not available" (ENOSYS, or EPERM from a
// seccomp filter): every later read takes the realpath fallback directly.
std::atomic<bool> g_no_openat2{false};

}  // namespace

Result<size_t> ReadWholeFile(const std::string& path, std::vector<uint8_t>& buffer) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError(errno, "cannot open", path);
  FdCloser closer(fd);
  return ReadOpenFile(fd, path, buffer);
}

Result<ConfinedDir> ConfinedDir::Open(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  int fd;
  do {
    fd = ::open(d.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError(errno, "cannot open the file list's root", d);
  char real[PATH_MAX];
  if (::realpath(d.c_str(), real) == nullptr) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, "cannot resolve the file list's root", d);
  }
  return ConfinedDir(fd, dir, real);
}

ConfinedDir::ConfinedDir(ConfinedDir&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      dir_(std::move(other.dir_)),
      real_(std::move(other.real_)) {}

ConfinedDir& ConfinedDir::operator=(ConfinedDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    dir_ = std::move(other.dir_);
    real_ = std::move(other.real_);
  }
  return *this;
}

ConfinedDir::~ConfinedDir() {
  if (fd_ >= 0) ::close(fd_);
}

Result<size_t> ConfinedDir::Read(const char* rel, const std::string& shown,
                                 std::vector<uint8_t>& buffer) const {
  if (!g_no_openat2.load(std::memory_order_relaxed)) {
    const int fd = OpenBeneath(fd_, rel);
    if (fd >= 0) {
      FdCloser closer(fd);
      return ReadOpenFile(fd, shown, buffer);
    }
    if (errno == EXDEV) return Outside(shown, dir_);
    if (errno != ENOSYS && errno != EPERM) return ErrnoError(errno, "cannot open", shown);
    g_no_openat2.store(true, std::memory_order_relaxed);
  }
  // Fallback: resolve, check the prefix, open what was resolved.
  const std::string path = real_ + "/" + rel;
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return ErrnoError(errno, "cannot open", shown);
  }
  const std::string_view r(resolved);
  if (!(r.size() > real_.size() && r.starts_with(real_) &&
        (real_ == "/" || r[real_.size()] == '/'))) {
    return Outside(shown, dir_);
  }
  int fd;
  do {
    fd = ::open(resolved, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError(errno, "cannot open", shown);
  FdCloser closer(fd);
  return ReadOpenFile(fd, shown, buffer);
}

void UseRealpathFallbackForTesting(bool on) { g_no_openat2.store(on); }

}  // namespace sluice::runtime
