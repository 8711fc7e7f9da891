// libFuzzer harness: the tar shard reader and the shard index reader
// (runtime/sources/tar/).
//
// The input is used whole, three ways:
//  1. as a tar shard: ScanArchive lists its members (each must lie inside
//     the file; the scanner's window bytes no longer than the member), then
//     BuildShardRecords groups them into samples; those records must go
//     through IndexWriter and load back unchanged (writer and reader agree);
//  2. as an index file: ShardIndex::FromBytes must load it or fail with an
//     error, and a loaded index's records must lie inside their shards;
//  3. as an index file on disk: ShardIndex::Load (mmap) must agree with (2).
// Any input must give a value or an error, never a crash.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/sources/tar/shard_index.h"
#include "runtime/sources/tar/tar_format.h"

namespace {

using namespace sluice;
using namespace sluice::runtime::tar;

// A memory file holding the input (reused across runs).
int InputFd(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("tar_index_fuzz", 0);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  return fd;
}

void CheckIndex(const ShardIndex& index) {
  uint64_t total = 0;
  for (size_t k = 0; k < index.num_shards(); ++k) {
    const ShardIndex::Shard& s = index.shard(k);
    if (s.first_sample != total || index.FindShard(s.name) != static_cast<int64_t>(k)) {
      std::abort();
    }
    for (uint64_t i = s.first_sample; i < s.first_sample + s.sample_count; ++i) {
      const SampleRecord& r = index.records()[i];
      if (r.corrupt_tail() ? r.offset > s.file_size
                           : r.offset < kBlockSize || r.offset > s.file_size) {
        std::abort();
      }
      if (!r.bad() && r.size > s.file_size - r.offset) std::abort();
    }
    total += s.sample_count;
  }
  if (total != index.records().size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = InputFd(data, size);

  // 1. A shard.
  Status scan = ScanArchive(fd, size, "fuzz.tar", [&](const Member& m) -> Status {
    if (m.data_offset != m.header_offset + kBlockSize || m.size > size ||
        m.data_offset > size - m.size || m.head.size() > m.size) {
      std::abort();
    }
    (void)SplitKey(m.name);
    return Ok();
  });
  if (!scan) (void)scan.error().ToString();
  const FieldMapping mapping;
  auto records = BuildShardRecords(fd, size, "fuzz.tar", mapping);
  if (records) {
    IndexWriter writer(mapping);
    if (!writer.AddShard("fuzz.tar", size, *records)) std::abort();
    auto back = ShardIndex::FromBytes(writer.Serialize(), "round trip");
    if (!back || back->records().size() != records->size()) std::abort();
    CheckIndex(*back);
    for (size_t i = 0; i < records->size(); ++i) {
      const SampleRecord& r = (*records)[i];
      if (back->records()[i].offset != r.offset || back->records()[i].size != r.size ||
          back->records()[i].label != r.label) {
        std::abort();
      }
      (void)DescribeBadRecord(r, mapping);
    }
  }

  // 2. An index in memory.
  auto index = ShardIndex::FromBytes(std::string_view(reinterpret_cast<const char*>(data), size),
                                     "fuzz.sluice");
  if (index) CheckIndex(*index);

  // 3. The same index from a file (mmap).
  auto loaded = ShardIndex::Load("/proc/self/fd/" + std::to_string(fd));
  if (loaded.has_value() != index.has_value()) std::abort();
  if (loaded) CheckIndex(*loaded);
  return 0;
}
