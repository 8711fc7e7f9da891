#include "runtime/sources/tar_shards_source.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "runtime/sources/source_registry.h"
#include "runtime/sources/tar/shard_paths.h"
#include "runtime/sources/tar/tar_format.h"

namespace sluice::runtime {
namespace fs = std::filesystem;
namespace {

// Raises the soft descriptor limit when the shards need more (each shard's
// descriptor stays open), up to the hard limit.
void RaiseFdLimit(size_t shards) {
  struct rlimit lim;
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t need = static_cast<rlim_t>(shards) + 256;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= need) return;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? need : std::min(need, lim.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &lim);
}

// class_names from DIR/manifest.json when it has them; empty when there is
// no manifest, it is not JSON or has no class_names.
Result<std::vector<std::string>> ReadClassNames(const fs::path& dir) {
  std::ifstream in(dir / "manifest.json", std::ios::binary);
  if (!in) return std::vector<std::string>{};
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("class_names")) return std::vector<std::string>{};
  const nlohmann::json& names = j["class_names"];
  std::vector<std::string> out;
  if (names.is_array()) {
    for (const auto& n : names) {
      if (!n.is_string()) break;
      out.push_back(n.get<std::string>());
    }
  }
  if (!names.is_array() || out.size() != names.size()) {
    return MakeError(ErrorCode::kInvalidArgument, "tar_shards: '" +
                                                      (dir / "manifest.json").string() +
                                                      "': class_names is not a list of strings");
  }
  return out;
}

// Reads [offset, offset + 512 + buffer part) into header and data, with one
// preadv when the kernel returns it all (it does for regular files). Returns
// the bytes read (fewer at EOF) or -errno.
int64_t ReadMember(int fd, uint64_t header_offset, uint8_t* header, uint8_t* data, uint64_t size) {
  const uint64_t total = tar::kBlockSize + size;
  uint64_t got = 0;
  while (got < total) {
    ssize_t n;
    if (got < tar::kBlockSize) {
      iovec iov[2] = {{header + got, tar::kBlockSize - got}, {data, size}};
      n = ::preadv(fd, iov, size > 0 ? 2 : 1, static_cast<off_t>(header_offset + got));
    } else {
      const uint64_t done = got - tar::kBlockSize;
      n = ::pread(fd, data + done, size - done, static_cast<off_t>(header_offset + got));
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  return static_cast<int64_t>(got);
}

}  // namespace

std::vector<std::string> SplitExtensions(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  auto push = [&] {
    while (!cur.empty() && cur.front() == '.') cur.erase(0, 1);
    for (char& c : cur) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    if (!cur.empty() && std::find(out.begin(), out.end(), cur) == out.end()) out.push_back(cur);
    cur.clear();
  };
  for (char c : text) {
    if (c == ';' || c == ',' || c == ' ' || c == '\t') {
      push();
    } else {
      cur += c;
    }
  }
  push();
  return out;
}

TarShardSource::~TarShardSource() {
  for (const Shard& s : shards_) {
    if (s.fd >= 0) ::close(s.fd);
  }
}

Result<std::unique_ptr<TarShardSource>> TarShardSource::Open(const TarShardOptions& options) {
  if (options.mapping.image_exts.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "tar_shards: no image extension given");
  }
  auto paths = tar::ResolveShardPaths(options.path);
  if (!paths) return std::unexpected(paths.error());
  RaiseFdLimit(paths->size());

  std::unique_ptr<TarShardSource> src(new TarShardSource());
  src->mapping_ = options.mapping;
  std::vector<tar::ShardFile> files;
  std::unordered_set<std::string> basenames;
  bool unique_basenames = true;
  for (const std::string& p : *paths) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      return MakeError(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                       "tar_shards: cannot open shard '" + p + "': " + std::strerror(err),
                       err == EMFILE ? "raise the open-file limit (ulimit -n)" : "");
    }
    src->shards_.push_back(Shard{.fd = fd});
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      return MakeError(ErrorCode::kIo,
                       "tar_shards: cannot stat '" + p + "': " + std::strerror(errno));
    }
    const std::string base = fs::path(p).filename().string();
    unique_basenames &= basenames.insert(base).second;
    files.push_back(tar::ShardFile{
        p, fs::absolute(p).lexically_normal().string(), fd, static_cast<uint64_t>(st.st_size),
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  auto chosen = tar::OpenShardIndex(files, options.mapping, options.index);
  if (!chosen) return std::unexpected(chosen.error());
  src->index_ = std::make_unique<tar::ShardIndex>(std::move(chosen->index));
  src->index_path_ = chosen->where;
  src->index_built_ = chosen->built;
  for (size_t i = 0; i < files.size(); ++i) {
    const tar::ShardIndex::Shard& entry = src->index_->shard(chosen->entry[i]);
    Shard& s = src->shards_[i];
    s.name = unique_basenames ? fs::path(files[i].path).filename().string() : files[i].path;
    s.records = src->index_->records().data() + entry.first_sample;
    s.start = src->size_;
    s.count = entry.sample_count;
    s.disagreement = std::move(chosen->disagreement[i]);
    src->starts_.push_back(s.start);
    src->size_ += s.count;
  }
  if (src->size_ == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tar_shards: no samples in the " + std::to_string(files.size()) +
                         " shard(s) of '" + options.path + "'",
                     "a sample is a run of members sharing a key, e.g. KEY.jpg and KEY.cls");
  }
  auto classes = ReadClassNames(fs::path(files.front().absolute).parent_path());
  if (!classes) return std::unexpected(classes.error());
  src->classes_ = std::move(*classes);
  return src;
}

const TarShardSource::Shard& TarShardSource::ShardOf(size_t i) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), static_cast<uint64_t>(i));
  return shards_[static_cast<size_t>(it - starts_.begin()) - 1];
}

std::string TarShardSource::SampleName(size_t i) const {
  if (i >= size_) return "sample " + std::to_string(i) + " (out of range)";
  const Shard& s = ShardOf(i);
  const tar::SampleRecord& r = s.records[i - s.start];
  if (r.corrupt_tail()) return s.name + "@" + std::to_string(r.offset);
  uint8_t header[tar::kBlockSize];
  const uint64_t at = r.offset - tar::kBlockSize;
  const std::string name = tar::PreadFull(s.fd, header, sizeof(header), at) ==
                                   static_cast<int64_t>(sizeof(header))
                               ? tar::HeaderName(header)
                               : std::string();
  if (name.empty()) return s.name + "@" + std::to_string(at);
  return s.name + ":" + std::string(tar::SplitKey(name).first);
}

int64_t TarShardSource::label(size_t i) const {
  const Shard& s = ShardOf(i);
  const tar::SampleRecord& r = s.records[i - s.start];
  return r.bad() || !s.disagreement.empty() ? -1 : r.label;
}

Result<size_t> TarShardSource::Read(size_t i, std::vector<uint8_t>& buffer) const {
  if (i >= size_) {
    return MakeError(ErrorCode::kInvalidArgument, "tar_shards: sample " + std::to_string(i) +
                                                      " out of range (" + std::to_string(size_) +
                                                      " samples)");
  }
  const Shard& s = ShardOf(i);
  const tar::SampleRecord r = s.records[i - s.start];
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::kCorruptData, SampleName(i) + ": " + why);
  };
  if (!s.disagreement.empty()) return bad(s.disagreement);
  if (r.bad()) return bad(tar::DescribeBadRecord(r, mapping_));
  if (buffer.size() < r.size) buffer.resize(r.size);
  uint8_t header[tar::kBlockSize];
  const int64_t got = ReadMember(s.fd, r.offset - tar::kBlockSize, header, buffer.data(), r.size);
  if (got < 0) {
    return MakeError(ErrorCode::kIo,
                     SampleName(i) + ": cannot read: " + std::strerror(static_cast<int>(-got)));
  }
  if (static_cast<uint64_t>(got) < tar::kBlockSize + r.size) {
    return bad("the shard ends at byte " + std::to_string(r.offset - tar::kBlockSize + got) +
               ", inside the member (" + std::to_string(r.size) + " bytes at byte " +
               std::to_string(r.offset) + "): truncated after it was indexed");
  }
  if (auto st = tar::VerifyHeaderFor(header, r.size); !st) {
    return bad(st.error().message + " (member header at byte " +
               std::to_string(r.offset - tar::kBlockSize) + ")");
  }
  return static_cast<size_t>(r.size);
}

std::vector<uint64_t> TarShardSource::ShardStarts() const {
  std::vector<uint64_t> out;
  for (const Shard& s : shards_) {
    if (s.count > 0) out.push_back(s.start);
  }
  return out;
}

Result<std::unique_ptr<Source>> OpenTarShardsSource(const ParamList& params) {
  TarShardOptions options;
  options.path = SourceParamString(params, "path", "");
  options.mapping.image_exts = SplitExtensions(SourceParamString(params, "image", "jpg;jpeg;png"));
  std::vector<std::string> label = SplitExtensions(SourceParamString(params, "label", "cls"));
  if (label.size() > 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tar_shards: label names one extension, not " + std::to_string(label.size()));
  }
  options.mapping.label_ext = label.empty() ? "" : label[0];
  options.index.explicit_index = SourceParamString(params, "index", "");
  options.index.cache_dir = SourceParamString(params, "cache_dir", "");
  auto src = TarShardSource::Open(options);
  if (!src) return std::unexpected(src.error());
  return std::unique_ptr<Source>(std::move(*src));
}

}  // namespace sluice::runtime
