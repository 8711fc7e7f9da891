#include "runtime/sources/tar/read_ahead.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace sluice::runtime::tar {
namespace {

constexpr uint64_t kMaxAutoBytes = uint64_t{1} << 30;
constexpr int kMaxAutoShards = 16;

std::string Mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

ReadAheadChoice ChooseReadAhead(const std::vector<uint64_t>& shard_sizes, int user_read_ahead,
                                int64_t user_bytes, int64_t tuned_budget,
                                uint64_t physical_memory) {
  ReadAheadChoice c;
  std::string bytes_why;
  if (user_bytes >= 0) {
    c.bytes = static_cast<uint64_t>(user_bytes);
    bytes_why = "read_ahead_bytes";
  } else if (tuned_budget >= 0) {
    c.bytes = static_cast<uint64_t>(tuned_budget);
    bytes_why = "what the tuned memory budget leaves after the batch buffers";
  } else {
    c.bytes = physical_memory > 0 ? std::min(kMaxAutoBytes, physical_memory / 8) : kMaxAutoBytes;
    bytes_why = physical_memory > 0 && physical_memory / 8 < kMaxAutoBytes
                    ? "1/8 of the machine's memory"
                    : "the 1 GiB cap";
  }
  const uint64_t largest =
      shard_sizes.empty() ? 0 : *std::max_element(shard_sizes.begin(), shard_sizes.end());
  if (user_read_ahead >= 0) {
    c.start = c.max = user_read_ahead;
  } else {
    // The shard being read plus `max` more must fit in bytes.
    const uint64_t fit = largest == 0 ? kMaxAutoShards + 1 : c.bytes / largest;
    c.max = static_cast<int>(std::min<uint64_t>(fit > 0 ? fit - 1 : 0, kMaxAutoShards));
    c.start = std::min(2, c.max);
  }
  c.summary = "read-ahead " + std::to_string(c.start) + " shard(s)" +
              (user_read_ahead >= 0 ? " (read_ahead)"
                                    : ", growing on stalls up to " + std::to_string(c.max)) +
              " within " + Mib(c.bytes) + " (" + bytes_why + "); largest shard " + Mib(largest);
  if (largest > c.bytes) c.summary += ": larger than the budget, read sample by sample";
  return c;
}

}  // namespace sluice::runtime::tar
