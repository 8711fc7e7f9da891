// How much of a remote shard stream runs ahead of the reads (order:
// shard_shuffle or sequential over URLs; docs/remote.md "Tuning"), when the
// spec leaves `read_ahead` / `read_ahead_bytes` to Sluice (-1, the default).
//
//  - bytes: the spec's read_ahead_bytes; else, for a plan tuned with
//    `sluice tune --memory-budget`, what that budget leaves after the
//    loader's (prefetch + 1) batch buffers; else 1/8 of the machine's memory,
//    at most 1 GiB: whole shards held in memory at once (streaming into,
//    being read, or waiting to be read). A shard larger than this is read
//    sample by sample instead.
//  - shards: the spec's read_ahead (fixed), else "auto": it starts at
//    min(2, max) and the reader adds one each time a read had to wait for a
//    shard that was already being read ahead (the read-ahead did not hide
//    the store's latency), up to max = the shards beyond the one being read
//    that fit in `bytes` at the largest shard size (at most 16).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::runtime::tar {

struct ReadAheadChoice {
  int start = 2;        // shards streamed ahead at first
  int max = 2;          // the most it may grow to (== start when fixed)
  uint64_t bytes = 0;   // RemoteReadOptions::max_resident_bytes
  std::string summary;  // one line for the log: what, and why
};

// user_read_ahead / user_bytes: the spec's values, -1 = auto. tuned_budget:
// the bytes a tuned memory budget leaves (-1 = none). physical_memory: bytes
// of RAM (0 = unknown: the 1 GiB cap applies).
ReadAheadChoice ChooseReadAhead(const std::vector<uint64_t>& shard_sizes, int user_read_ahead,
                                int64_t user_bytes, int64_t tuned_budget, uint64_t physical_memory);

// Bytes of physical memory (sysconf), or 0 when unknown.
uint64_t PhysicalMemoryBytes();

}  // namespace sluice::runtime::tar
