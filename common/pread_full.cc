#include "common/pread_full.h"

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>

namespace sluice {

int64_t PreadFull(int fd, void* buf, uint64_t n, uint64_t offset) {
  auto* out = static_cast<uint8_t*>(buf);
  uint64_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, out + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    if (r == 0) break;
    got += static_cast<uint64_t>(r);
  }
  return static_cast<int64_t>(got);
}

}  // namespace sluice
