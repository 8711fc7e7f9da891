#include "runtime/sources/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

}  // namespace

Result<size_t> ReadWholeFile(const std::string& path, std::vector<uint8_t>& buffer) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError(errno, "cannot open", path);
  FdCloser closer(fd);

  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kIo, "not a regular file: '" + path + "'");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (buffer.size() < size) buffer.resize(size);

  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, buffer.data() + done, size - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "cannot read", path);
    }
    if (n == 0) break;  // the file shrank after fstat: return what is there
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace sluice::runtime
