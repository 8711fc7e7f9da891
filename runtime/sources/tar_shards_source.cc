#include "runtime/sources/tar_shards_source.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/log.h"
#include "runtime/sources/source_registry.h"
#include "runtime/sources/tar/read_ahead.h"
#include "runtime/sources/tar/remote_index.h"
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

// class_names from a manifest's text when it has them; empty when it is not
// JSON or has no class_names. `name` names the manifest in messages.
Result<std::vector<std::string>> ParseClassNames(const std::string& text, const std::string& name) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
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
    return MakeError(ErrorCode::kInvalidArgument,
                     "tar_shards: '" + name + "': class_names is not a list of strings");
  }
  return out;
}

// The manifest's per-shard SHA-256 ("shards": [{"name", "sha256"}], names
// relative to `dir`), keyed by the shard's URL; empty when it has none.
std::unordered_map<std::string, std::string> ParseShardChecksums(const std::string& text,
                                                                 const std::string& dir) {
  std::unordered_map<std::string, std::string> out;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("shards") || !j["shards"].is_array()) return out;
  for (const nlohmann::json& shard : j["shards"]) {
    if (!shard.is_object() || !shard.contains("name") || !shard.contains("sha256") ||
        !shard["name"].is_string() || !shard["sha256"].is_string()) {
      continue;
    }
    out[dir + "/" + shard["name"].get<std::string>()] = shard["sha256"].get<std::string>();
  }
  return out;
}

// class_names from DIR/manifest.json (see ParseClassNames); empty when there
// is no manifest.
Result<std::vector<std::string>> ReadClassNames(const fs::path& dir) {
  std::ifstream in(dir / "manifest.json", std::ios::binary);
  if (!in) return std::vector<std::string>{};
  std::stringstream text;
  text << in.rdbuf();
  return ParseClassNames(text.str(), (dir / "manifest.json").string());
}

// Reads [offset, offset + 512 + buffer part) into header and data, with one
// preadv2 when the kernel returns it all (it does for regular files). Returns
// the bytes read (fewer at EOF) or -errno; with flags RWF_NOWAIT, -EAGAIN when
// some of the bytes are not in the page cache (the read would block).
int64_t ReadMember(int fd, uint64_t header_offset, uint8_t* header, uint8_t* data, uint64_t size,
                   int flags) {
  const uint64_t total = tar::kBlockSize + size;
  uint64_t got = 0;
  while (got < total) {
    ssize_t n;
    if (got < tar::kBlockSize) {
      iovec iov[2] = {{header + got, tar::kBlockSize - got}, {data, size}};
      n = ::preadv2(fd, iov, size > 0 ? 2 : 1, static_cast<off_t>(header_offset + got), flags);
    } else {
      const uint64_t done = got - tar::kBlockSize;
      iovec iov = {data + done, size - done};
      n = ::preadv2(fd, &iov, 1, static_cast<off_t>(header_offset + got), flags);
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
  prefetcher_.reset();  // joins its thread: it may be using the descriptors
  for (const Shard& s : shards_) {
    if (s.fd >= 0) ::close(s.fd);
  }
}

Status TarShardSource::UseIndex(tar::ChosenIndex chosen, const std::string& path) {
  index_ = std::make_unique<tar::ShardIndex>(std::move(chosen.index));
  index_path_ = chosen.where;
  index_built_ = chosen.built;
  for (size_t i = 0; i < shards_.size(); ++i) {
    const tar::ShardIndex::Shard& entry = index_->shard(chosen.entry[i]);
    Shard& s = shards_[i];
    s.records = index_->records().data() + entry.first_sample;
    s.start = size_;
    s.count = entry.sample_count;
    s.disagreement = std::move(chosen.disagreement[i]);
    starts_.push_back(s.start);
    size_ += s.count;
  }
  if (size_ == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tar_shards: no samples in the " + std::to_string(shards_.size()) +
                         " shard(s) of '" + remote::RedactUrl(path) + "'",
                     "a sample is a run of members sharing a key, e.g. KEY.jpg and KEY.cls");
  }
  return Ok();
}

Result<std::unique_ptr<TarShardSource>> TarShardSource::Open(const TarShardOptions& options) {
  if (options.mapping.image_exts.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "tar_shards: no image extension given");
  }
  if (remote::IsUrl(options.path)) return OpenRemote(options);
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
  for (size_t i = 0; i < files.size(); ++i) {
    src->shards_[i].name =
        unique_basenames ? fs::path(files[i].path).filename().string() : files[i].path;
  }
  SLUICE_RETURN_IF_ERROR(src->UseIndex(std::move(*chosen), options.path));
  auto classes = ReadClassNames(fs::path(files.front().absolute).parent_path());
  if (!classes) return std::unexpected(classes.error());
  src->classes_ = std::move(*classes);
  if (options.page_cache_prefetch) src->prefetcher_ = std::make_unique<tar::PageCachePrefetcher>();
  return src;
}

size_t TarShardSource::ShardNumber(size_t i) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), static_cast<uint64_t>(i));
  return static_cast<size_t>(it - starts_.begin()) - 1;
}

const TarShardSource::Shard& TarShardSource::ShardOf(size_t i) const {
  return shards_[ShardNumber(i)];
}

std::string TarShardSource::SampleName(size_t i) const {
  if (i >= size_) return "sample " + std::to_string(i) + " (out of range)";
  const Shard& s = ShardOf(i);
  const tar::SampleRecord& r = s.records[i - s.start];
  if (r.corrupt_tail()) return s.name + "@" + std::to_string(r.offset);
  // Remote: no request (a dead server must not stall error reporting).
  if (reader_ != nullptr) return s.name + "@" + std::to_string(r.offset - tar::kBlockSize);
  // The member's full name (GNU long name, pax path), scanning the headers
  // from the previous sample's member: the index holds no names.
  const size_t j = i - s.start;
  const uint64_t at = r.offset - tar::kBlockSize;
  const uint64_t from = j > 0 ? s.records[j - 1].offset - tar::kBlockSize : 0;
  const std::string name = tar::MemberNameAt(s.fd, from, at);
  if (name.empty()) return s.name + "@" + std::to_string(at);
  return s.name + ":" + std::string(tar::SplitKey(name).first);
}

int64_t TarShardSource::label(size_t i) const {
  const Shard& s = ShardOf(i);
  const tar::SampleRecord& r = s.records[i - s.start];
  return r.bad() || !s.disagreement.empty() ? -1 : r.label;
}

Result<size_t> TarShardSource::Read(size_t i, std::vector<uint8_t>& buffer) const {
  return *ReadWith(i, buffer, 0);
}

std::optional<Result<size_t>> TarShardSource::ReadIfReady(size_t i,
                                                          std::vector<uint8_t>& buffer) const {
  if (nowait_unsupported_.load(std::memory_order_relaxed)) return std::nullopt;
  return ReadWith(i, buffer, RWF_NOWAIT);
}

std::optional<Result<size_t>> TarShardSource::ReadWith(size_t i, std::vector<uint8_t>& buffer,
                                                       int flags) const {
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
  if (reader_ != nullptr) return ReadRemote(i, buffer, (flags & RWF_NOWAIT) != 0);
  if (buffer.size() < r.size) buffer.resize(r.size);
  uint8_t header[tar::kBlockSize];
  const int64_t got =
      ReadMember(s.fd, r.offset - tar::kBlockSize, header, buffer.data(), r.size, flags);
  if (got == -EAGAIN && (flags & RWF_NOWAIT)) {
    nowait_misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  if (got == -EOPNOTSUPP && (flags & RWF_NOWAIT)) {
    nowait_unsupported_.store(true, std::memory_order_relaxed);  // e.g. an older FUSE
    return std::nullopt;
  }
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

namespace {

// The store's error for a request answered 403 (runtime/remote/http_request.cc
// writes "VERB URL: HTTP 403 ...").
bool ManifestForbidden(const Error& e) {
  return e.code == ErrorCode::kIo && e.message.find(": HTTP 403") != std::string::npos;
}

}  // namespace

Result<std::unique_ptr<TarShardSource>> TarShardSource::OpenRemote(const TarShardOptions& options) {
  // Transport messages may quote URLs as is: hide the path's secrets in them.
  const std::vector<std::string> secrets = remote::UrlSecrets(options.path);
  auto opened = OpenRemoteUnscrubbed(options);
  if (!opened) return std::unexpected(remote::ScrubSecrets(opened.error(), secrets));
  (*opened)->secrets_ = secrets;
  return opened;
}

Result<std::unique_ptr<TarShardSource>> TarShardSource::OpenRemoteUnscrubbed(
    const TarShardOptions& options) {
  std::shared_ptr<remote::ObjectStore> store = options.store;
  if (store == nullptr) {
    auto opened = remote::OpenObjectStore(options.path, options.remote);
    if (!opened) return std::unexpected(opened.error());
    store = std::move(*opened);
  }
  auto objects = tar::ResolveShardUrls(*store, options.path);
  if (!objects) return std::unexpected(objects.error());
  std::unique_ptr<TarShardSource> src(new TarShardSource());
  src->mapping_ = options.mapping;
  for (const remote::ObjectInfo& o : *objects) {
    src->shards_.push_back(Shard{.name = remote::RedactUrl(o.url), .url = o.url});
  }
  // The manifest first: its checksums verify shards the index scan puts in
  // the shard cache.
  // Beside the first shard, with its query (a SAS or token query grants the
  // siblings too); checksums are keyed by URL without the query.
  const std::string dir = tar::UrlDirectory(objects->front().url);
  const std::string manifest = tar::SiblingUrl(objects->front().url, "manifest.json");
  std::unordered_map<std::string, std::string> checksums;  // URL w/o query -> sha256 hex
  if (auto text = tar::FetchObject(*store, manifest)) {
    auto classes = ParseClassNames(*text, remote::RedactUrl(manifest));
    if (!classes) return std::unexpected(classes.error());
    src->classes_ = std::move(*classes);
    checksums = ParseShardChecksums(*text, dir);
  } else if (ManifestForbidden(text.error())) {
    // S3 without s3:ListBucket (and CloudFront) answer a missing key with
    // 403. The shards were just read with the same access, so this is taken
    // as an absent manifest, as a 404 is, but said.
    if (!options.index.quiet) {
      log::Warn("tar_shards", "'" + remote::RedactUrl(manifest) +
                                  "' answered HTTP 403: reading without a manifest (no class "
                                  "names, no shard checksums), as for a missing one");
    }
  } else if (text.error().code != ErrorCode::kNotFound) {
    return std::unexpected(text.error());
  }
  auto chosen = tar::OpenRemoteShardIndex(*store, *objects, options.mapping, options.index,
                                          {options.read.cache.get(), &checksums});
  if (!chosen) return std::unexpected(chosen.error());
  SLUICE_RETURN_IF_ERROR(src->UseIndex(std::move(*chosen), options.path));
  tar::RemoteReadOptions read = options.read;
  if (options.choose_read_ahead) {
    std::vector<uint64_t> sizes;
    for (const remote::ObjectInfo& o : *objects) sizes.push_back(o.size);
    const tar::ReadAheadChoice choice =
        tar::ChooseReadAhead(sizes, options.read.read_ahead, options.read_ahead_bytes,
                             options.read_ahead_budget, tar::PhysicalMemoryBytes());
    read.read_ahead = choice.start;
    read.max_read_ahead = choice.max;
    read.max_resident_bytes = choice.bytes;
    if (!options.index.quiet) {
      log::Info("tar_shards", choice.summary);
    }
  }
  std::vector<tar::RemoteShardReader::Shard> shards;
  for (size_t i = 0; i < objects->size(); ++i) {
    const std::string& url = (*objects)[i].url;
    auto sha = checksums.find(tar::UrlWithoutQuery(url));
    shards.push_back({url, (*objects)[i].size, src->shards_[i].start,
                      sha == checksums.end() ? std::string() : sha->second, (*objects)[i].version});
  }
  src->reader_ = std::make_unique<tar::RemoteShardReader>(std::move(store), std::move(shards),
                                                          src->size_, read);
  return src;
}

std::optional<Result<size_t>> TarShardSource::ReadRemote(size_t i, std::vector<uint8_t>& buffer,
                                                         bool only_if_ready) const {
  const size_t k = ShardNumber(i);
  const Shard& s = shards_[k];
  const tar::SampleRecord r = s.records[i - s.start];
  const uint64_t total = tar::kBlockSize + r.size;
  if (buffer.size() < total) buffer.resize(total);
  const tar::RemoteShardReader::Range range{i, k, r.offset - tar::kBlockSize, total};
  std::optional<Status> read = only_if_ready ? reader_->ReadIfReady(range, buffer.data())
                                             : reader_->Read(range, buffer.data());
  if (!read) return std::nullopt;
  if (Status st = std::move(*read); !st) {
    Error e = remote::ScrubSecrets(st.error(), secrets_);
    e.message = SampleName(i) + ": " + e.message;
    return std::unexpected(std::move(e));
  }
  uint8_t header[tar::kBlockSize];
  std::memcpy(header, buffer.data(), tar::kBlockSize);
  if (auto st = tar::VerifyHeaderFor(header, r.size); !st) {
    return MakeError(ErrorCode::kCorruptData, SampleName(i) + ": " + st.error().message +
                                                  " (member header at byte " +
                                                  std::to_string(r.offset - tar::kBlockSize) + ")");
  }
  std::memmove(buffer.data(), buffer.data() + tar::kBlockSize, r.size);
  return static_cast<size_t>(r.size);
}

void TarShardSource::SetAccessPattern(AccessPattern pattern) {
  if (reader_ == nullptr) return;
  reader_->SetPattern(pattern == AccessPattern::kShardSequential ? tar::ReadPattern::kShardStream
                                                                 : tar::ReadPattern::kRandom);
}

uint64_t TarShardSource::ReadHintWindow() const {
  if (reader_ != nullptr) return reader_->HintWindow();
  return prefetcher_ != nullptr ? kLocalHintWindow : 0;
}

void TarShardSource::WillRead(std::span<const uint64_t> indices) const {
  if (prefetcher_ != nullptr) {
    const uint64_t misses = nowait_misses_.load(std::memory_order_relaxed);
    if (misses != misses_seen_) {
      misses_seen_ = misses;
      prefetch_calls_left_ = kPrefetchCallsAfterMiss;
    }
    if (prefetch_calls_left_ == 0) return;  // the page cache serves every read
    --prefetch_calls_left_;
    // In chunks from the stack: the loader's lock is held, no allocation.
    constexpr size_t kChunk = 64;
    std::array<tar::PageCachePrefetcher::Range, kChunk> chunk;
    size_t n = 0;
    for (uint64_t i : indices) {
      if (i >= size_) continue;
      const Shard& s = ShardOf(i);
      const tar::SampleRecord& r = s.records[i - s.start];
      if (r.bad() || !s.disagreement.empty()) continue;  // Read fails without I/O
      chunk[n++] = {s.fd, r.offset - tar::kBlockSize, tar::kBlockSize + r.size};
      if (n == kChunk) {
        prefetcher_->Announce(std::span(chunk.data(), n));
        n = 0;
      }
    }
    prefetcher_->Announce(std::span(chunk.data(), n));
    return;
  }
  if (reader_ == nullptr) return;
  announced_.clear();
  for (uint64_t i : indices) {
    if (i >= size_) continue;
    const size_t k = ShardNumber(i);
    const Shard& s = shards_[k];
    const tar::SampleRecord& r = s.records[i - s.start];
    if (r.bad() || !s.disagreement.empty()) continue;  // Read fails without I/O
    announced_.push_back({i, k, r.offset - tar::kBlockSize, tar::kBlockSize + r.size});
  }
  reader_->WillRead(announced_);
}

void TarShardSource::CancelReads() const {
  if (reader_ != nullptr) reader_->Cancel();
  if (prefetcher_ != nullptr) prefetcher_->Cancel();
}

tar::PageCachePrefetcher::Counters TarShardSource::prefetch_counters() const {
  return prefetcher_ != nullptr ? prefetcher_->counters() : tar::PageCachePrefetcher::Counters{};
}

std::optional<SourceIoStats> TarShardSource::IoStats() const {
  if (reader_ == nullptr) return std::nullopt;
  SourceIoStats s;
  s.requests = reader_->store().stats();
  const tar::RemoteReadCounters c = reader_->counters();
  s.coalesced_requests = c.coalesced_requests;
  s.coalesced_samples = c.coalesced_samples;
  s.shards_streamed = c.shards_streamed;
  s.read_ahead = c.read_ahead;
  s.read_ahead_stalls = c.read_ahead_stalls;
  const remote::ShardCacheStats cache = reader_->cache_stats();
  s.cache_hits = cache.hits;
  s.cache_misses = cache.misses;
  s.cache_lock_timeouts = cache.lock_timeouts;
  s.cache_passthrough = cache.passthrough;
  s.cache_no_space = cache.no_space;
  return s;
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
  options.choose_read_ahead = true;
  options.read.read_ahead = -1;
  if (const ParamValue* v = FindParam(params, "read_ahead")) {
    options.read.read_ahead = static_cast<int>(v->AsInt());
  }
  if (const ParamValue* v = FindParam(params, "read_ahead_bytes")) {
    options.read_ahead_bytes = v->AsInt();
  }
  if (const ParamValue* v = FindParam(params, "page_cache_prefetch")) {
    options.page_cache_prefetch = v->AsBool();
  }
  if (const ParamValue* v = FindParam(params, kReadAheadBudgetParam)) {
    options.read_ahead_budget = v->AsInt();
  }
  if (const ParamValue* section = FindParam(params, "remote");
      section != nullptr && std::holds_alternative<ParamList>(section->value)) {
    const ParamList& r = section->AsSection();
    // Seconds past 1e6 (11 days) mean "never" and are clamped there, so that
    // converting them to clock ticks cannot overflow.
    auto number = [&](const char* name, double fallback) {
      const ParamValue* v = FindParam(r, name);
      return v == nullptr ? fallback : std::min(v->AsFloat(), 1e6);
    };
    remote::RemoteOptions& o = options.remote;
    o.connect_timeout_s = number("connect_timeout_s", o.connect_timeout_s);
    o.deadline_s = number("deadline_s", o.deadline_s);
    o.max_retries = static_cast<int>(number("max_retries", o.max_retries));
    o.backoff_initial_s = number("backoff_initial_s", o.backoff_initial_s);
    o.backoff_max_s = number("backoff_max_s", o.backoff_max_s);
    o.hedge_delay_s = number("hedge_delay_s", o.hedge_delay_s);
    o.stall_timeout_s = number("stall_timeout_s", o.stall_timeout_s);
    o.max_connections = static_cast<int>(number("max_connections", o.max_connections));
    o.io_threads = static_cast<int>(number("io_threads", o.io_threads));
  }
  // Shuffled reads keep up to one planned request per pooled connection in flight.
  options.read.prefetch_requests = options.remote.max_connections;
  if (const ParamValue* section = FindParam(params, "cache");
      section != nullptr && std::holds_alternative<ParamList>(section->value) &&
      remote::IsUrl(options.path)) {
    const std::string dir = SourceParamString(section->AsSection(), "dir", "");
    const ParamValue* max = FindParam(section->AsSection(), "max_bytes");
    const int64_t max_bytes = max == nullptr ? 0 : max->AsInt();
    if (!dir.empty()) {
      if (max_bytes <= 0) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "tar_shards: cache.dir is set but cache.max_bytes is not",
                         "give the cache's size in bytes, e.g. cache: {dir: /scratch/shards, "
                         "max_bytes: 200000000000}");
      }
      // Another process's download is waited for as long as one of ours
      // may take (the remote deadline), then read past the cache; but for at
      // most half a sample's read deadline, so that a peer stopped while
      // holding a lock never makes our reads pass source.read_timeout.
      double lock_wait_s = options.remote.deadline_s;
      if (const ParamValue* t = FindParam(params, "read_timeout"); t != nullptr) {
        if (const double read_timeout = t->AsFloat(); read_timeout > 0) {
          lock_wait_s = std::min(lock_wait_s, read_timeout / 2);
        }
      }
      auto cache = remote::ShardCache::Open(dir, static_cast<uint64_t>(max_bytes), lock_wait_s);
      if (!cache) return std::unexpected(cache.error());
      options.read.cache = std::move(*cache);
    }
  }
  auto src = TarShardSource::Open(options);
  if (!src) return std::unexpected(src.error());
  return std::unique_ptr<Source>(std::move(*src));
}

}  // namespace sluice::runtime
