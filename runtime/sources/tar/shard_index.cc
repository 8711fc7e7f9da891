#include "runtime/sources/tar/shard_index.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include "common/pread_full.h"
#include "runtime/sources/tar/tar_format.h"

namespace sluice::runtime::tar {

static_assert(std::endian::native == std::endian::little,
              "the shard index is little-endian and used in place");

namespace {

constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'I', 'X'};
constexpr uint32_t kVersion = 1;

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // sizeof(FileHeader)
  uint64_t num_shards;
  uint64_t num_samples;
  uint64_t shards_offset;
  uint64_t records_offset;
  uint64_t strings_offset;
  uint32_t fingerprint_offset;  // into the strings
  uint32_t fingerprint_length;
};
static_assert(sizeof(FileHeader) == 64);

struct ShardEntry {
  uint64_t file_size;
  uint64_t first_sample;
  uint64_t sample_count;
  uint32_t name_offset;  // into the strings
  uint32_t name_length;
};
static_assert(sizeof(ShardEntry) == 32);

// Label members longer than this are not a label.
constexpr uint64_t kMaxLabelBytes = 64;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Trimmed decimal text -> label, or SampleRecord::kBadLabel.
int32_t ParseLabel(std::string_view text) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || text.size() > 10) return SampleRecord::kBadLabel;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return SampleRecord::kBadLabel;
    v = v * 10 + (c - '0');
  }
  if (negative) v = -v;
  if (v > INT32_MAX || v <= SampleRecord::kCorruptTail) return SampleRecord::kBadLabel;
  return static_cast<int32_t>(v);
}

// Checks one record against its shard's size; empty when fine.
std::string CheckRecord(const SampleRecord& r, uint64_t file_size) {
  if (r.corrupt_tail()) {
    return r.offset <= file_size ? "" : "corrupt-tail offset past the shard's end";
  }
  if (r.offset < kBlockSize || r.offset % kBlockSize != 0 || r.offset > file_size) {
    return "member offset not after a header";
  }
  if (r.size < SampleRecord::kSparseMember && r.size > file_size - r.offset) {
    return "member past the shard's end";
  }
  return "";
}

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

std::string FieldMapping::Fingerprint() const {
  std::string s = "image=";
  for (size_t i = 0; i < image_exts.size(); ++i) s += (i ? ";" : "") + Lower(image_exts[i]);
  return s + " label=" + Lower(label_ext);
}

std::string DescribeBadRecord(const SampleRecord& r, const FieldMapping& mapping) {
  if (r.corrupt_tail()) {
    return std::string("corrupt tar data at byte ") + std::to_string(r.offset) + " (" +
           ScanErrorKindName(static_cast<ScanErrorKind>(r.size)) +
           "): the rest of the shard cannot be read";
  }
  if (r.size == SampleRecord::kNoImage) {
    std::string exts;
    for (const std::string& e : mapping.image_exts) exts += (exts.empty() ? "" : ", ") + e;
    return "no image member (" + exts + ")";
  }
  if (r.size == SampleRecord::kImageTooLarge) return "image member is 4 GiB or larger";
  if (r.size == SampleRecord::kSparseMember) {
    return "sparse tar member not supported: re-create the shard without --sparse";
  }
  if (r.label == SampleRecord::kNoLabel) return "no label member (" + mapping.label_ext + ")";
  if (r.label == SampleRecord::kBadLabel) {
    return "label member (" + mapping.label_ext + ") is not a decimal integer";
  }
  return "";
}

Result<std::vector<SampleRecord>> BuildShardRecords(int fd, uint64_t file_size,
                                                    std::string_view shard_name,
                                                    const FieldMapping& mapping) {
  std::vector<std::string> image_exts;
  for (const std::string& e : mapping.image_exts) image_exts.push_back(Lower(e));
  const std::string label_ext = Lower(mapping.label_ext);

  std::vector<SampleRecord> out;
  // The sample being assembled.
  std::string key;
  bool active = false;
  size_t image_rank = SIZE_MAX;
  bool has_label = false;
  bool image_sparse = false, label_sparse = false;  // the chosen member is sparse
  SampleRecord rec{};
  auto flush = [&] {
    if (!active) return;
    if (image_rank == SIZE_MAX) rec.size = SampleRecord::kNoImage;  // offset: first member
    rec.label = label_ext.empty() ? -1 : has_label ? rec.label : SampleRecord::kNoLabel;
    if (image_sparse || label_sparse) rec.size = SampleRecord::kSparseMember;
    out.push_back(rec);
    active = false;
  };
  std::string label_text;
  auto on_member = [&](const Member& m) -> Status {
    auto [k, ext] = SplitKey(m.name);
    if (ext.empty()) return Ok();  // no extension, or hidden: not a field of any sample
    if (!active || k != key) {
      flush();
      key.assign(k);
      active = true;
      image_rank = SIZE_MAX;
      has_label = false;
      image_sparse = label_sparse = false;
      rec = SampleRecord{m.data_offset, SampleRecord::kNoImage, 0};
    }
    for (size_t r = 0; r < image_exts.size() && r < image_rank; ++r) {
      if (!ExtensionEquals(ext, image_exts[r])) continue;
      image_rank = r;
      rec.offset = m.data_offset;
      rec.size = m.size >= SampleRecord::kSparseMember ? SampleRecord::kImageTooLarge
                                                       : static_cast<uint32_t>(m.size);
      image_sparse = m.sparse;
      return Ok();
    }
    if (label_ext.empty() || has_label || !ExtensionEquals(ext, label_ext)) return Ok();
    has_label = true;
    if (m.sparse) {  // its bytes are not the label: the sample is bad (flush)
      label_sparse = true;
      return Ok();
    }
    if (m.size > kMaxLabelBytes) {
      rec.label = SampleRecord::kBadLabel;
      return Ok();
    }
    if (m.head.size() == m.size) {
      label_text.assign(reinterpret_cast<const char*>(m.head.data()), m.head.size());
    } else {
      label_text.resize(m.size);
      const int64_t got = PreadFull(fd, label_text.data(), m.size, m.data_offset);
      if (got < 0 || static_cast<uint64_t>(got) < m.size) {
        return MakeError(
            ErrorCode::kIo,
            std::string(shard_name) + ": cannot read member '" + m.name +
                "': " + (got < 0 ? std::strerror(static_cast<int>(-got)) : "the file ended early"));
      }
    }
    rec.label = ParseLabel(label_text);
    return Ok();
  };
  ScanStop stop;
  Status st = ScanArchive(fd, file_size, shard_name, on_member, &stop);
  if (!st) {
    if (stop.kind == ScanErrorKind::kNone || stop.kind == ScanErrorKind::kReadError) {
      return std::unexpected(st.error());
    }
    // Keep the samples read before the bad spot, the one in progress too (its
    // members so far are whole; a field after the bad spot makes it a bad sample).
    flush();
    out.push_back(
        SampleRecord{stop.offset, static_cast<uint32_t>(stop.kind), SampleRecord::kCorruptTail});
    return out;
  }
  flush();
  return out;
}

// ---- IndexWriter ------------------------------------------------------------------

IndexWriter::IndexWriter(const FieldMapping& mapping) : fingerprint_(mapping.Fingerprint()) {}

Status IndexWriter::AddShard(std::string_view name, uint64_t file_size,
                             std::span<const SampleRecord> records) {
  if (name.empty() || name.size() > UINT32_MAX / 2) {
    return MakeError(ErrorCode::kInvalidArgument, "index: bad shard name");
  }
  if (by_name_.contains(std::string(name))) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "index: shard '" + std::string(name) + "' added twice");
  }
  for (size_t i = 0; i < records.size(); ++i) {
    std::string why = CheckRecord(records[i], file_size);
    if (!why.empty()) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          "index: shard '" + std::string(name) + "' sample " + std::to_string(i) + ": " + why);
    }
  }
  by_name_.emplace(std::string(name), shards_.size());
  shards_.push_back(Shard{std::string(name), file_size, records_.size(), records.size()});
  records_.insert(records_.end(), records.begin(), records.end());
  return Ok();
}

std::string IndexWriter::Serialize() const {
  std::string strings = fingerprint_;
  std::vector<ShardEntry> entries;
  for (const Shard& s : shards_) {
    entries.push_back(ShardEntry{s.file_size, s.first_sample, s.sample_count,
                                 static_cast<uint32_t>(strings.size()),
                                 static_cast<uint32_t>(s.name.size())});
    strings += s.name;
  }
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.header_bytes = sizeof(FileHeader);
  h.num_shards = shards_.size();
  h.num_samples = records_.size();
  h.shards_offset = sizeof(FileHeader);
  h.records_offset = h.shards_offset + entries.size() * sizeof(ShardEntry);  // 16-aligned
  h.strings_offset = h.records_offset + records_.size() * sizeof(SampleRecord);
  h.fingerprint_offset = 0;
  h.fingerprint_length = static_cast<uint32_t>(fingerprint_.size());

  std::string out;
  out.reserve(h.strings_offset + strings.size());
  out.append(reinterpret_cast<const char*>(&h), sizeof(h));
  out.append(reinterpret_cast<const char*>(entries.data()), entries.size() * sizeof(ShardEntry));
  out.append(reinterpret_cast<const char*>(records_.data()),
             records_.size() * sizeof(SampleRecord));
  out += strings;
  return out;
}

Status IndexWriter::Write(const std::string& path) const {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  const std::string bytes = Serialize();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return MakeError(ErrorCode::kIo, "cannot create '" + tmp + "': " + ErrnoText());
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = ErrnoText();
      ::close(fd);
      ::unlink(tmp.c_str());
      return MakeError(ErrorCode::kIo, "cannot write '" + tmp + "': " + why);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = ErrnoText();
    ::unlink(tmp.c_str());
    return MakeError(ErrorCode::kIo, "cannot write '" + path + "': " + why);
  }
  return Ok();
}

// ---- ShardIndex -------------------------------------------------------------------

ShardIndex::ShardIndex(ShardIndex&& other) noexcept { *this = std::move(other); }

ShardIndex& ShardIndex::operator=(ShardIndex&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
    owned_ = std::move(other.owned_);
    shards_ = std::move(other.shards_);
    by_name_ = std::move(other.by_name_);
    records_ = std::exchange(other.records_, {});
    fingerprint_ = std::exchange(other.fingerprint_, {});
  }
  return *this;
}

ShardIndex::~ShardIndex() { Release(); }

void ShardIndex::Release() {
  if (data_ != nullptr && map_size_ > 0) ::munmap(const_cast<uint8_t*>(data_), map_size_);
  data_ = nullptr;
  map_size_ = 0;
  owned_.clear();
}

int64_t ShardIndex::FindShard(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : static_cast<int64_t>(it->second);
}

Result<ShardIndex> ShardIndex::Load(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ErrorCode code = errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo;
    return MakeError(code, "cannot open shard index '" + path + "': " + ErrnoText());
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    std::string why = ErrnoText();
    ::close(fd);
    return MakeError(ErrorCode::kIo, "cannot stat shard index '" + path + "': " + why);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (!S_ISREG(st.st_mode) || size < sizeof(FileHeader)) {
    ::close(fd);
    return MakeError(ErrorCode::kCorruptData,
                     "shard index '" + path + "' is corrupt: too short for its header (" +
                         std::to_string(size) + " bytes)",
                     "delete it to rebuild it from the shards");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    return MakeError(ErrorCode::kIo, "cannot map shard index '" + path + "': " + ErrnoText());
  }
  ShardIndex index;
  index.path_ = path;
  index.data_ = static_cast<const uint8_t*>(map);
  index.map_size_ = size;
  SLUICE_RETURN_IF_ERROR(index.Parse(size));
  return index;
}

Result<ShardIndex> ShardIndex::FromBytes(std::string_view bytes, const std::string& name) {
  ShardIndex index;
  index.path_ = name;
  index.owned_.resize((bytes.size() + 7) / 8);
  if (!bytes.empty()) std::memcpy(index.owned_.data(), bytes.data(), bytes.size());
  index.data_ = reinterpret_cast<const uint8_t*>(index.owned_.data());
  SLUICE_RETURN_IF_ERROR(index.Parse(bytes.size()));
  return index;
}

Status ShardIndex::Parse(uint64_t size) {
  auto corrupt = [&](const std::string& why) {
    return MakeError(ErrorCode::kCorruptData, "shard index '" + path_ + "' is corrupt: " + why,
                     "delete it to rebuild it from the shards");
  };
  if (size < sizeof(FileHeader)) {
    return corrupt("too short for its header (" + std::to_string(size) + " bytes)");
  }
  FileHeader h;
  std::memcpy(&h, data_, sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return corrupt("not a Sluice shard index");
  if (h.version != kVersion) {
    return MakeError(ErrorCode::kVersionMismatch,
                     "shard index '" + path_ + "' has version " + std::to_string(h.version) +
                         "; this build reads version " + std::to_string(kVersion),
                     "delete it to rebuild it from the shards");
  }
  if (h.header_bytes != sizeof(FileHeader)) return corrupt("bad header size");
  if (h.num_shards > size / sizeof(ShardEntry) || h.num_samples > size / sizeof(SampleRecord)) {
    return corrupt("counts larger than the file");
  }
  const uint64_t shards_end = h.num_shards * sizeof(ShardEntry);
  const uint64_t records_end = h.num_samples * sizeof(SampleRecord);
  if (h.shards_offset < sizeof(FileHeader) || h.shards_offset % 8 != 0 ||
      h.shards_offset > size - shards_end || h.records_offset % 16 != 0 ||
      h.records_offset < sizeof(FileHeader) || h.records_offset > size - records_end ||
      h.strings_offset > size) {
    return corrupt("table offsets out of bounds");
  }
  const uint64_t strings_size = size - h.strings_offset;
  const char* strings = reinterpret_cast<const char*>(data_ + h.strings_offset);
  if (uint64_t{h.fingerprint_offset} + h.fingerprint_length > strings_size) {
    return corrupt("fingerprint out of bounds");
  }
  fingerprint_ = std::string_view(strings + h.fingerprint_offset, h.fingerprint_length);
  records_ = std::span<const SampleRecord>(
      reinterpret_cast<const SampleRecord*>(data_ + h.records_offset), h.num_samples);
  const auto* entries = reinterpret_cast<const ShardEntry*>(data_ + h.shards_offset);
  uint64_t next_sample = 0;
  shards_.reserve(h.num_shards);
  for (uint64_t k = 0; k < h.num_shards; ++k) {
    const ShardEntry& e = entries[k];
    const std::string which = "shard " + std::to_string(k);
    if (uint64_t{e.name_offset} + e.name_length > strings_size || e.name_length == 0) {
      return corrupt(which + ": name out of bounds");
    }
    if (e.first_sample != next_sample || e.sample_count > h.num_samples - next_sample) {
      return corrupt(which + ": sample range does not follow the previous shard's");
    }
    std::string_view name(strings + e.name_offset, e.name_length);
    if (!by_name_.emplace(name, k).second) return corrupt(which + ": duplicate name");
    for (uint64_t i = e.first_sample; i < e.first_sample + e.sample_count; ++i) {
      std::string why = CheckRecord(records_[i], e.file_size);
      if (!why.empty()) return corrupt(which + " sample " + std::to_string(i) + ": " + why);
    }
    shards_.push_back(Shard{name, e.file_size, e.first_sample, e.sample_count});
    next_sample += e.sample_count;
  }
  if (next_sample != h.num_samples) return corrupt("shard sample counts do not sum to the total");
  return Ok();
}

}  // namespace sluice::runtime::tar
