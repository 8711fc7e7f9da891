#include "runtime/sources/tar/remote_index.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "common/log.h"
#include "ops/fusion/plan_format.h"
#include "runtime/sources/tar/shard_paths.h"

namespace sluice::runtime::tar {
namespace fs = std::filesystem;
using remote::ObjectInfo;
using remote::ObjectStore;
using remote::RedactUrl;
namespace {

constexpr char kLog[] = "sluice: tar_shards: ";

Error WithUrl(Error e, const std::string& what) {
  e.message = what + ": " + e.message;
  return e;
}

// Where an http(s) URL's path ends: at its query's '?' (the query, a token
// or a presigned signature, is no part of the object's name). Other URLs
// (s3://, file://) have no query: a '?' there is a glob character.
size_t PathEnd(std::string_view url) {
  const size_t colon = url.find("://");
  std::string scheme(url.substr(0, colon == std::string_view::npos ? 0 : colon));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "http" && scheme != "https") return url.size();
  return std::min(url.find('?'), url.size());
}

// The objects directly under `prefix` (a '/'-ended prefix) ending in ".tar".
Result<std::vector<ObjectInfo>> ListDirectory(ObjectStore& store, const std::string& prefix) {
  auto listed = store.List(prefix);
  if (!listed) return std::unexpected(listed.error());
  std::vector<ObjectInfo> out;
  for (ObjectInfo& o : *listed) {
    const std::string rest = o.url.substr(std::min(o.url.size(), prefix.size()));
    if (rest.find('/') == std::string::npos && rest.ends_with(".tar")) out.push_back(std::move(o));
  }
  if (out.empty()) {
    return MakeError(ErrorCode::kNotFound,
                     "tar_shards: no .tar object under '" + RedactUrl(prefix) + "'");
  }
  return out;
}

Result<std::vector<ObjectInfo>> ListGlob(ObjectStore& store, const std::string& pattern) {
  const size_t glob = pattern.find_first_of("*?[");
  auto listed = store.List(pattern.substr(0, glob));
  if (!listed) return std::unexpected(listed.error());
  std::vector<ObjectInfo> out;
  for (ObjectInfo& o : *listed) {
    if (IsSluiceFile(o.url.substr(o.url.rfind('/') + 1))) continue;  // index.sluice, ...
    if (::fnmatch(pattern.c_str(), o.url.c_str(), FNM_PATHNAME) == 0) out.push_back(std::move(o));
  }
  if (out.empty()) {
    return MakeError(ErrorCode::kNotFound,
                     "tar_shards: no object matches '" + RedactUrl(pattern) + "'");
  }
  return out;
}

// Index bytes from `url` (a URL through the store, whose Stat goes to
// `info` when given) or a local path.
Result<ShardIndex> LoadIndex(ObjectStore& store, const std::string& url,
                             ObjectInfo* info = nullptr) {
  if (!remote::IsUrl(url)) return ShardIndex::Load(url);
  auto bytes = FetchObject(store, url, info);
  if (!bytes) return std::unexpected(bytes.error());
  return ShardIndex::FromBytes(*bytes, RedactUrl(url));
}

// The selected remote shards as MatchShards looks them up: by their URL
// relative to `dir` ("" = only by URL), then by URL.
std::vector<ShardLookup> RemoteLookups(const std::string& dir,
                                       const std::vector<ObjectInfo>& shards) {
  std::vector<ShardLookup> out;
  for (const ObjectInfo& s : shards) {
    const std::string url = UrlWithoutQuery(s.url);  // indexes never hold a query (a secret)
    const bool under = !dir.empty() && url.starts_with(dir + "/");
    out.push_back({under ? url.substr(dir.size() + 1) : "", url, s.size});
  }
  return out;
}

std::string CacheKey(const std::vector<ObjectInfo>& shards, const FieldMapping& mapping) {
  std::string text = "remote\n" + mapping.Fingerprint() + "\n";
  text += "scan " + std::to_string(kScanRevision) + "\n";
  // Named without the URLs' authentication, which a presigned or SAS URL
  // changes every job (ShardCache::KeyOf): a new signature reuses the index.
  // With the shards' versions: a shard replaced by one of the same size gets
  // a new index.
  for (const ObjectInfo& s : shards) {
    text +=
        remote::ShardCache::KeyOf(s.url) + '\0' + std::to_string(s.size) + ' ' + s.version + '\n';
  }
  std::string hash = plan_format::HashBytes(text);
  return hash.substr(hash.find(':') + 1);
}

// Streams `shard` into an unlinked temporary file in `dir` and scans it.
Result<std::vector<SampleRecord>> ScanRemoteShard(ObjectStore& store, const ObjectInfo& shard,
                                                  const std::string& dir,
                                                  const FieldMapping& mapping) {
  std::string tmpl = (fs::path(dir) / "sluice-scan-XXXXXX").string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    return MakeError(ErrorCode::kIo, "tar_shards: cannot create a temporary file in '" + dir +
                                         "' to index '" + RedactUrl(shard.url) + "'");
  }
  ::unlink(tmpl.c_str());
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  uint64_t written = 0;
  Status st = store.Stream(shard.url, [&](const uint8_t* data, size_t size) -> Status {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(written));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        return MakeError(ErrorCode::kIo, "cannot write a temporary file in '" + dir + "'");
      done += static_cast<size_t>(n);
      written += static_cast<uint64_t>(n);
    }
    return Ok();
  });
  if (!st) return std::unexpected(WithUrl(st.error(), "tar_shards: indexing"));
  return BuildShardRecords(fd, written, RedactUrl(shard.url), mapping);
}

// Acquires `shard` through the shard cache (downloaded once, verified, kept
// for the reads that follow) and scans the cached file. A shard that fails
// its checksum is not kept; it is indexed from a plain stream instead, so
// that its reads, not the whole source, fail (and follow on_error).
Result<std::vector<SampleRecord>> ScanCachedShard(ObjectStore& store, const ObjectInfo& shard,
                                                  const ScanThrough& through,
                                                  const std::string& dir,
                                                  const FieldMapping& mapping) {
  std::string sha256;
  if (through.sha256 != nullptr) {
    auto it = through.sha256->find(UrlWithoutQuery(shard.url));
    if (it != through.sha256->end()) sha256 = it->second;
  }
  auto held = through.cache->Acquire(
      shard.url, shard.size, sha256,
      [&](const ObjectStore::Sink& sink) { return store.Stream(shard.url, sink); }, shard.version);
  if (!held && held.error().code == ErrorCode::kCorruptData) {
    return ScanRemoteShard(store, shard, dir, mapping);
  }
  if (!held) return std::unexpected(WithUrl(held.error(), "tar_shards: indexing"));
  return BuildShardRecords(held->fd(), held->size(), RedactUrl(shard.url), mapping);
}

Result<ChosenIndex> Explicit(ObjectStore& store, const std::vector<ObjectInfo>& shards,
                             const FieldMapping& mapping, const std::string& path) {
  auto index = LoadIndex(store, path);
  if (!index) return std::unexpected(index.error());
  if (index->fingerprint() != mapping.Fingerprint()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tar_shards: index '" + RedactUrl(path) + "' was built for fields '" +
                         std::string(index->fingerprint()) + "', not '" + mapping.Fingerprint() +
                         "'",
                     "give the same image and label extensions, or drop `index:` to rebuild");
  }
  ShardMatch m = MatchShards(*index, RedactUrl(path), RemoteLookups(UrlDirectory(path), shards));
  if (m.missing >= 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tar_shards: index '" + RedactUrl(path) + "' does not list shard '" +
                         RedactUrl(shards[static_cast<size_t>(m.missing)].url) + "'",
                     "drop `index:` to build an index for these shards");
  }
  return ChosenIndex{
      std::move(*index), std::move(m.entry), std::move(m.stale), RedactUrl(path), false, {}};
}

// `index` when it covers `shards` with current sizes and the mapping.
std::optional<ChosenIndex> Usable(Result<ShardIndex> index, const std::string& name,
                                  const std::string& dir, const std::vector<ObjectInfo>& shards,
                                  const FieldMapping& mapping) {
  if (!index || index->fingerprint() != mapping.Fingerprint()) return std::nullopt;
  ShardMatch m = MatchShards(*index, name, RemoteLookups(dir, shards));
  if (m.missing >= 0 || m.any_stale) return std::nullopt;
  return ChosenIndex{std::move(*index), std::move(m.entry), std::move(m.stale), name, false, {}};
}

// 16 hex digits naming `text` (no URL, no query is written to disk).
std::string ShortHash(const std::string& text) {
  const std::string hash = plan_format::HashBytes(text);
  return hash.substr(hash.find(':') + 1);
}

// Where the shards' versions seen with the index at `index_url` (at version
// `index_version`) are recorded: CACHE/sluice-seen-HASH.txt, one line per
// shard, "HASH-of-its-URL VERSION".
std::string SeenPath(const std::string& cache_dir, const std::string& index_url,
                     const std::string& index_version) {
  const std::string key = "seen\n" + remote::ShardCache::KeyOf(index_url) + "\n" + index_version;
  return (fs::path(cache_dir) / ("sluice-seen-" + ShortHash(key) + ".txt")).string();
}

// Why the index whose record is at `seen` must not be used: a shard's
// version differs from the one recorded when this index was first used; ""
// when none does. Versions not recorded yet are added (best effort: a record
// that cannot be written is no error).
std::string ChangedSinceFirstUse(const std::string& seen, const std::vector<ObjectInfo>& shards) {
  std::unordered_map<std::string, std::string> recorded;
  std::ifstream in(seen);
  for (std::string line; std::getline(in, line);) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) recorded[line.substr(0, space)] = line.substr(space + 1);
  }
  std::string first;
  size_t changed = 0, added = 0;
  for (const ObjectInfo& s : shards) {
    if (s.version.empty()) continue;  // no validator: the size check only
    const std::string tag = ShortHash(remote::ShardCache::KeyOf(s.url));
    auto [it, inserted] = recorded.try_emplace(tag, s.version);
    added += inserted ? 1 : 0;
    if (inserted || it->second == s.version) continue;
    if (changed++ == 0) {
      first = "shard '" + RedactUrl(s.url) + "' (" + it->second + ", now " + s.version + ")";
    }
  }
  if (changed > 0) {
    return first + (changed > 1 ? " and " + std::to_string(changed - 1) + " more" : "");
  }
  if (added > 0) {
    std::string text;
    for (const auto& [tag, version] : recorded) text += tag + " " + version + "\n";
    const std::string tmp = seen + ".tmp-" + std::to_string(::getpid());
    std::error_code ec;
    fs::create_directories(fs::path(seen).parent_path(), ec);
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (out) fs::rename(tmp, seen, ec);
    if (!out || ec) fs::remove(tmp, ec);
  }
  return "";
}

}  // namespace

std::string UrlWithoutQuery(const std::string& url) { return url.substr(0, PathEnd(url)); }

std::string UrlDirectory(const std::string& url) {
  const std::string path = UrlWithoutQuery(url);
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string SiblingUrl(const std::string& url, const std::string& name) {
  return UrlDirectory(url) + "/" + name + url.substr(PathEnd(url));
}

Result<std::string> FetchObject(ObjectStore& store, const std::string& url, ObjectInfo* stat) {
  // A HEAD first: an absent object (an optional manifest) is a plain
  // kNotFound, not a failed request in the store's stats.
  auto info = store.Stat(url);
  if (!info) return std::unexpected(info.error());
  if (stat != nullptr) *stat = *info;
  std::string bytes;
  bytes.reserve(info->size);
  if (info->size == 0) return bytes;
  // Streamed, never a range read: a whole index or manifest (megabytes) must
  // not be hedged, which would download it again on a delay sized for small
  // reads.
  SLUICE_RETURN_IF_ERROR(store.Stream(url, [&](const uint8_t* data, size_t size) -> Status {
    if (bytes.size() + size > info->size) {
      return MakeError(ErrorCode::kCorruptData, "'" + RedactUrl(url) + "' is longer than the " +
                                                    std::to_string(info->size) +
                                                    " bytes it had: it changed while being read");
    }
    bytes.append(reinterpret_cast<const char*>(data), size);
    return Ok();
  }));
  if (bytes.size() != info->size) {
    return MakeError(ErrorCode::kCorruptData,
                     "'" + RedactUrl(url) + "' has " + std::to_string(bytes.size()) +
                         " bytes, not the " + std::to_string(info->size) + " it had");
  }
  return bytes;
}

Result<std::vector<ObjectInfo>> ResolveShardUrls(ObjectStore& store, const std::string& pattern) {
  auto names = ExpandBraces(pattern);
  if (!names) return std::unexpected(names.error());
  // Plain names are checked in parallel (one Stat each); lists run in order.
  std::vector<Result<std::vector<ObjectInfo>>> found(names->size());
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, names->size()), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t i = r.begin(); i != r.end(); ++i) {
          const std::string& n = (*names)[i];
          const std::string path = UrlWithoutQuery(n);  // an http(s) query is kept, not matched
          if (path.find_first_of("*?[") != std::string::npos) {
            found[i] = ListGlob(store, n);
          } else if (path.ends_with("/")) {
            found[i] = ListDirectory(store, n);
          } else if (auto info = store.Stat(n)) {
            found[i] = std::vector<ObjectInfo>{std::move(*info)};
          } else if (info.error().code == ErrorCode::kNotFound && !path.ends_with(".tar")) {
            found[i] = ListDirectory(store, path + "/" + n.substr(path.size()));
          } else {
            found[i] = std::unexpected(info.error());
          }
        }
      });
  std::vector<ObjectInfo> out;
  std::unordered_set<std::string> seen;
  for (auto& f : found) {
    if (!f) return std::unexpected(WithUrl(f.error(), "tar_shards: cannot find the shards"));
    for (ObjectInfo& o : *f) {
      if (seen.insert(o.url).second) out.push_back(std::move(o));
    }
  }
  return out;
}

Result<ChosenIndex> OpenRemoteShardIndex(ObjectStore& store, const std::vector<ObjectInfo>& shards,
                                         const FieldMapping& mapping, const IndexOptions& options,
                                         const ScanThrough& through) {
  if (!options.explicit_index.empty()) {
    return Explicit(store, shards, mapping, options.explicit_index);
  }
  const std::string dir = UrlDirectory(shards.front().url);
  const std::string beside = SiblingUrl(shards.front().url, kPackIndexName);
  const std::string cache_dir = ResolveCacheDir(options.cache_dir);
  std::vector<std::string> notes;
  ObjectInfo beside_info;
  if (auto c =
          Usable(LoadIndex(store, beside, &beside_info), RedactUrl(beside), dir, shards, mapping)) {
    // Objects have no modification time to compare with the index's: their
    // versions are checked against those seen when this index was first used.
    const std::string changed =
        beside_info.version.empty()
            ? ""
            : ChangedSinceFirstUse(SeenPath(cache_dir, beside, beside_info.version), shards);
    if (changed.empty()) return std::move(*c);
    std::string line =
        changed + " changed since " + RedactUrl(beside) + " was first used here: not using it";
    if (!options.quiet) log::Warn("tar_shards", line);
    notes.push_back(std::move(line));
  }
  const std::string cached =
      (fs::path(cache_dir) / ("sluice-index-" + CacheKey(shards, mapping) + ".sluice")).string();
  std::error_code ec;
  if (fs::is_regular_file(cached, ec)) {
    if (auto c = Usable(ShardIndex::Load(cached), cached, "", shards, mapping)) {
      c->notes = std::move(notes);
      return std::move(*c);
    }
  }

  fs::create_directories(cache_dir, ec);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Result<std::vector<SampleRecord>>> records(shards.size());
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, shards.size(), 1), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t i = r.begin(); i != r.end(); ++i) {
          records[i] = through.cache != nullptr
                           ? ScanCachedShard(store, shards[i], through, cache_dir, mapping)
                           : ScanRemoteShard(store, shards[i], cache_dir, mapping);
        }
      });
  IndexWriter w(mapping);
  auto say = [&](std::string line) {
    if (!options.quiet) std::fprintf(stderr, "%s%s\n", kLog, line.c_str());
    notes.push_back(std::move(line));
  };
  uint64_t samples = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    if (!records[i]) return std::unexpected(records[i].error());
    const auto& r = *records[i];
    samples += r.size();
    if (!r.empty() && r.back().corrupt_tail()) {
      say(RedactUrl(shards[i].url) + ": " + DescribeBadRecord(r.back(), mapping) + "; the " +
          std::to_string(r.size() - 1) +
          " samples before it are kept, the rest counts as one bad sample");
    }
    SLUICE_RETURN_IF_ERROR(w.AddShard(UrlWithoutQuery(shards[i].url), shards[i].size, r));
  }
  char took[32];
  std::snprintf(took, sizeof(took), "%.2f s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const std::string what =
      "indexed " + std::to_string(shards.size()) + " remote shard(s) (" + std::to_string(samples) +
      (through.cache != nullptr ? " samples, fetched once into the shard cache) in "
                                : " samples, streamed once) in ") +
      took;
  std::string where = cached;
  if (auto st = w.Write(cached); st) {
    say(what + "; index written to " + cached);
  } else {
    say(what + "; cannot write the index (" + st.error().message +
        "): it is kept in memory and rebuilt on every open");
    where.clear();
  }
  auto index =
      where.empty() ? ShardIndex::FromBytes(w.Serialize(), "(in memory)") : ShardIndex::Load(where);
  if (!index) return std::unexpected(index.error());
  ShardMatch m = MatchShards(*index, where, RemoteLookups("", shards));
  if (m.missing >= 0 || m.any_stale) {
    return MakeError(ErrorCode::kInternal, "tar_shards: the index just built does not match");
  }
  return ChosenIndex{std::move(*index),
                     std::move(m.entry),
                     std::move(m.stale),
                     where.empty() ? "(in memory)" : where,
                     true,
                     std::move(notes)};
}

}  // namespace sluice::runtime::tar
