// The tar shard index: one binary, little-endian, mmappable file describing a
// set of tar shards (several shards per file), so that a tar_shards source
// opens without reading its shards and reads sample i with one pread.
//
// Samples are the runs of consecutive regular members sharing a WebDataset
// key (tar_format.h SplitKey), in archive order. Per sample the index keeps
// 16 bytes (SampleRecord): where the image member's data is, its size and the
// integer label read from the label member; no strings.
//
// File layout (all integers little-endian; version 1):
//   [0, 64)            FileHeader
//   shards_offset      ShardEntry[num_shards] (32 bytes each)
//   records_offset     SampleRecord[num_samples] (16-byte aligned), shard by
//                      shard in shard-table order
//   strings_offset     shard names and the mapping fingerprint (not NUL-ended)
// A shard's name is relative to the index file's directory, or absolute
// (starting with '/').
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/result.h"

namespace sluice::runtime::tar {

// Which member extensions feed which field. Extensions are matched
// case-insensitively, without the leading dot.
struct FieldMapping {
  // The sample's image is its first member (in this list's order of
  // preference) with one of these extensions.
  std::vector<std::string> image_exts{"jpg", "jpeg", "png"};
  // The member holding the label as decimal text; "" = no labels (every label
  // is -1).
  std::string label_ext{"cls"};

  // Canonical text, stable across runs and machines: "image=jpg;jpeg;png
  // label=cls" (lower case). Indexes record it; a different mapping needs a
  // different index.
  std::string Fingerprint() const;
};

// The revision of the scan rules: what BuildShardRecords makes of the same
// shard bytes. Cached indexes (index_store.h, remote_index.h) are named by a
// hash that covers it, so a build whose rules changed re-indexes instead of
// reusing an old build's records. Bump it with any such change.
//   2: members with a hidden base name (".DS_Store", "._x.jpg") are skipped.
//   3: GNU sparse members are named by GNU.sparse.name and make their sample
//      bad (SampleRecord::kSparseMember) when they are its image or label.
inline constexpr int kScanRevision = 3;

struct SampleRecord {
  // Byte offset of the image member's data in its shard (its tar header is the
  // 512 bytes before). When the sample has no image member: the data offset
  // of its first member (so that messages can name its key).
  uint64_t offset;
  uint32_t size;  // the image member's byte count, or a size sentinel below
  int32_t label;  // the label member's integer, or a label sentinel below

  // Sentinels: a sample that a Read must report as bad.
  // size: the sample has no member with an image extension.
  static constexpr uint32_t kNoImage = std::numeric_limits<uint32_t>::max();
  // size: the image member is 4 GiB - 3 bytes or larger.
  static constexpr uint32_t kImageTooLarge = kNoImage - 1;
  // size: the image or label member is a GNU sparse member (tar --sparse):
  // its stored bytes are not the file's contents. `offset` is as for an image.
  static constexpr uint32_t kSparseMember = kNoImage - 2;
  // label: the sample has no label member.
  static constexpr int32_t kNoLabel = std::numeric_limits<int32_t>::min();
  // label: the label member is not a decimal integer in [-2^31 + 3, 2^31 - 1]
  // (surrounding whitespace allowed).
  static constexpr int32_t kBadLabel = kNoLabel + 1;
  // label: the shard could not be scanned past byte `offset`: `size` holds
  // the ScanErrorKind; the shard's later samples are lost. Always a shard's
  // last record.
  static constexpr int32_t kCorruptTail = kNoLabel + 2;

  bool corrupt_tail() const { return label == kCorruptTail; }
  bool bad() const {
    return label == kCorruptTail || label == kNoLabel || label == kBadLabel ||
           size >= kSparseMember;
  }
};
static_assert(sizeof(SampleRecord) == 16);

// Why record `r` of a sample is bad, e.g. "no image member (jpg, jpeg, png)";
// empty for a good record.
std::string DescribeBadRecord(const SampleRecord& r, const FieldMapping& mapping);

// Scans one shard (fd, file_size bytes) once and returns its samples' records.
// Label members are read (from the scanner's window when it holds them, else
// one small pread each). A shard that stops scanning on corrupt data keeps the
// samples read before the bad spot (the last one may lack a field that came
// after it, and is then a bad sample) and ends with one kCorruptTail record:
// the corruption is a bad sample for the loader's error policy, not an error
// here. A sample whose image or label member is a GNU sparse member gets
// kSparseMember (a bad sample); a sparse member that is neither is ignored
// like any other member.
// Errors: kIo when the shard cannot be read at all (pread failure).
Result<std::vector<SampleRecord>> BuildShardRecords(int fd, uint64_t file_size,
                                                    std::string_view shard_name,
                                                    const FieldMapping& mapping);

// Builds an index file: shards are added in order, then Write.
class IndexWriter {
 public:
  explicit IndexWriter(const FieldMapping& mapping);

  // Appends a shard named `name` (relative to the index's directory, or
  // absolute) of `file_size` bytes with its sample records.
  // Errors: kInvalidArgument for an empty or duplicate name, or a record that
  // does not fit in file_size bytes.
  Status AddShard(std::string_view name, uint64_t file_size, std::span<const SampleRecord> records);

  // Writes the index to `path` atomically (a temporary file in the same
  // directory, then rename). Errors: kIo naming the path.
  Status Write(const std::string& path) const;

  // The file's bytes (what Write writes).
  std::string Serialize() const;

  uint64_t num_samples() const { return records_.size(); }

 private:
  std::string fingerprint_;
  struct Shard {
    std::string name;
    uint64_t file_size, first_sample, sample_count;
  };
  std::vector<Shard> shards_;
  std::unordered_map<std::string, size_t> by_name_;
  std::vector<SampleRecord> records_;
};

// A loaded index, mapped read-only; the records are used in place. Movable,
// not copyable; thread-safe for reads.
class ShardIndex {
 public:
  struct Shard {
    std::string_view name;
    uint64_t file_size;
    uint64_t first_sample;  // index of its first record
    uint64_t sample_count;
  };

  // Maps and validates `path`: magic, version, header and table bounds, name
  // bounds, shard sample ranges (contiguous, in order, summing to the record
  // count), and every record against its shard's file size.
  // Errors: kNotFound / kIo (cannot open or map), kVersionMismatch (another
  // index version), kCorruptData (anything else), each naming the path.
  static Result<ShardIndex> Load(const std::string& path);
  // The same from bytes in memory (copied; e.g. an index that could not be
  // written anywhere, or a fuzzer's input); `name` names it in messages.
  static Result<ShardIndex> FromBytes(std::string_view bytes, const std::string& name);

  ShardIndex(ShardIndex&& other) noexcept;
  ShardIndex& operator=(ShardIndex&& other) noexcept;
  ShardIndex(const ShardIndex&) = delete;
  ShardIndex& operator=(const ShardIndex&) = delete;
  ~ShardIndex();

  size_t num_shards() const { return shards_.size(); }
  const Shard& shard(size_t k) const { return shards_[k]; }
  // The shard named `name` (exactly as stored), or -1.
  int64_t FindShard(std::string_view name) const;
  std::span<const SampleRecord> records() const { return records_; }
  std::string_view fingerprint() const { return fingerprint_; }
  const std::string& path() const { return path_; }

 private:
  ShardIndex() = default;
  void Release();
  // Validates data_[0, size_) and fills the tables.
  Status Parse(uint64_t size);

  std::string path_;
  const uint8_t* data_ = nullptr;  // the mapping, or owned_'s bytes
  size_t map_size_ = 0;            // > 0 when data_ is a mapping
  std::vector<uint64_t> owned_;    // FromBytes: the bytes (8-byte aligned)
  std::vector<Shard> shards_;      // names point into the mapping
  std::unordered_map<std::string_view, size_t> by_name_;
  std::span<const SampleRecord> records_;
  std::string_view fingerprint_;
};

}  // namespace sluice::runtime::tar
