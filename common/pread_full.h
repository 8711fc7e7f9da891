// Positional reads that retry until done: the one pread loop every reader of
// local files (image files, tar members, file:// objects) shares.
#pragma once

#include <cstdint>

namespace sluice {

// Reads `n` bytes at `offset` of `fd` into `buf`, retrying short reads and
// EINTR. Returns the bytes read (fewer than n only at end of file) or -errno.
int64_t PreadFull(int fd, void* buf, uint64_t n, uint64_t offset);

}  // namespace sluice
