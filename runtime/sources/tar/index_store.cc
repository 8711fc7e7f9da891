#include "runtime/sources/tar/index_store.h"

#include <sys/stat.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "common/log.h"
#include "ops/fusion/plan_format.h"

namespace sluice::runtime::tar {
namespace fs = std::filesystem;
namespace {

constexpr char kLog[] = "tar_shards";  // the log lines' component (common/log.h)

// The selected local shards as MatchShards looks them up: by their path
// relative to the index's directory, then by their absolute path.
std::vector<ShardLookup> LocalLookups(const std::string& index_path,
                                      const std::vector<ShardFile>& shards) {
  const fs::path dir = fs::absolute(index_path).lexically_normal().parent_path();
  std::vector<ShardLookup> out;
  for (const ShardFile& f : shards) {
    out.push_back({fs::path(f.absolute).lexically_relative(dir).string(), f.absolute, f.size});
  }
  return out;
}

// HASH of the cache file name: the shards' absolute paths, sizes and mtimes,
// the mapping and the scan rules' revision.
std::string CacheKey(const std::vector<ShardFile>& shards, const FieldMapping& mapping) {
  std::string text = mapping.Fingerprint() + "\n";
  text += "scan " + std::to_string(kScanRevision) + "\n";
  for (const ShardFile& s : shards) {
    text += s.absolute + '\0' + std::to_string(s.size) + ' ' + std::to_string(s.mtime_ns) + '\n';
  }
  std::string hash = plan_format::HashBytes(text);  // "fnv1a64:<16 hex>"
  return hash.substr(hash.find(':') + 1);
}

// Writable by this process, and not marked read-only by its permission bits.
bool DirWritable(const fs::path& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  return (st.st_mode & 0222) != 0 && ::access(dir.c_str(), W_OK) == 0;
}

Result<std::vector<std::vector<SampleRecord>>> ScanShards(const std::vector<ShardFile>& shards,
                                                          const FieldMapping& mapping) {
  std::vector<Result<std::vector<SampleRecord>>> results(shards.size());
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, shards.size(), 1), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t i = r.begin(); i != r.end(); ++i) {
          results[i] = BuildShardRecords(shards[i].fd, shards[i].size, shards[i].path, mapping);
        }
      });
  std::vector<std::vector<SampleRecord>> out;
  out.reserve(shards.size());
  for (auto& r : results) {
    if (!r) return std::unexpected(std::move(r).error());
    out.push_back(std::move(*r));
  }
  return out;
}

// Serializes the scanned records with shard names relative to `dir` (or
// absolute when `dir` is empty).
Result<IndexWriter> MakeWriter(const std::vector<ShardFile>& shards,
                               const std::vector<std::vector<SampleRecord>>& records,
                               const FieldMapping& mapping, const fs::path& dir) {
  IndexWriter w(mapping);
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string name = dir.empty() ? shards[i].absolute
                                   : fs::path(shards[i].absolute).lexically_relative(dir).string();
    if (name.empty()) name = shards[i].absolute;
    SLUICE_RETURN_IF_ERROR(w.AddShard(name, shards[i].size, records[i]));
  }
  return w;
}

// Loads `path` when it exists and covers `shards` with current sizes and the
// same mapping; nullopt otherwise (a damaged file is reported and skipped).
std::optional<ChosenIndex> TryIndex(const std::string& path, const std::vector<ShardFile>& shards,
                                    const FieldMapping& mapping, const IndexOptions& options,
                                    std::vector<std::string>& notes) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  auto index = ShardIndex::Load(path);
  if (!index) {
    std::string line = "ignoring " + index.error().message;
    if (!options.quiet) log::Info(kLog, line);
    notes.push_back(std::move(line));
    return std::nullopt;
  }
  if (index->fingerprint() != mapping.Fingerprint()) return std::nullopt;
  ShardMatch m = MatchShards(*index, path, LocalLookups(path, shards));
  if (m.missing >= 0 || m.any_stale) return std::nullopt;
  ChosenIndex c{std::move(*index), std::move(m.entry), std::move(m.stale), path, false, {}};
  return c;
}

// Why DIR/index.sluice at `path` must not be used for `shards` although it
// lists them with their sizes: some shard was modified after it was written
// (`sluice pack` writes its shards first and the index last, so a fresh pack
// passes). "" when none was (or the index cannot be stat'ed).
std::string NewerThanIndex(const std::string& path, const std::vector<ShardFile>& shards) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  const int64_t index_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  const ShardFile* first = nullptr;
  size_t more = 0;
  for (const ShardFile& f : shards) {
    if (f.mtime_ns <= index_ns) continue;
    if (first == nullptr) {
      first = &f;
    } else {
      ++more;
    }
  }
  if (first == nullptr) return "";
  return "shard '" + first->path + "'" +
         (more > 0 ? " (and " + std::to_string(more) + " more)" : std::string()) +
         (more > 0 ? " are" : " is") + " newer than " + path;
}

// Where FindIndex looks.
struct IndexPlaces {
  fs::path data_dir;       // DIR: the first shard's directory
  std::string cache_dir;   // CACHE
  std::string cache_name;  // sluice-index-HASH.sluice
};

// Steps 2 and 3 of the file comment: DIR/index.sluice unless a shard is newer
// than it, then the cached index in DIR, then in CACHE; nullopt when none is
// usable. Adds what it printed to `notes`.
std::optional<ChosenIndex> FindIndex(const std::vector<ShardFile>& shards,
                                     const FieldMapping& mapping, const IndexOptions& options,
                                     const IndexPlaces& places, std::vector<std::string>& notes) {
  const std::string pack_index = (places.data_dir / kPackIndexName).string();
  std::string newer;  // why a pack index that lists the shards is not used
  if (auto found = TryIndex(pack_index, shards, mapping, options, notes)) {
    newer = NewerThanIndex(pack_index, shards);
    if (newer.empty()) return found;
  }
  auto warn = [&](std::string line) {
    if (!options.quiet) log::Warn(kLog, line);
    notes.push_back(std::move(line));
  };
  for (const fs::path& candidate :
       {places.data_dir / places.cache_name, fs::path(places.cache_dir) / places.cache_name}) {
    if (auto found = TryIndex(candidate.string(), shards, mapping, options, notes)) {
      if (!newer.empty()) warn(newer + ": using " + candidate.string());
      return found;
    }
  }
  if (!newer.empty()) warn(newer + ": rescanning");
  return std::nullopt;
}

Result<ChosenIndex> Explicit(const std::vector<ShardFile>& shards, const FieldMapping& mapping,
                             const std::string& path) {
  auto index = ShardIndex::Load(path);
  if (!index) return std::unexpected(index.error());
  if (index->fingerprint() != mapping.Fingerprint()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tar_shards: index '" + path + "' was built for fields '" +
                         std::string(index->fingerprint()) + "', not '" + mapping.Fingerprint() +
                         "'",
                     "give the same image and label extensions, or drop `index:` to rebuild");
  }
  ShardMatch m = MatchShards(*index, path, LocalLookups(path, shards));
  if (m.missing >= 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tar_shards: index '" + path + "' does not list shard '" +
                         shards[static_cast<size_t>(m.missing)].path + "'",
                     "drop `index:` to build an index for these shards");
  }
  return ChosenIndex{std::move(*index), std::move(m.entry), std::move(m.stale), path, false, {}};
}

}  // namespace

ShardMatch MatchShards(const ShardIndex& index, const std::string& index_name,
                       const std::vector<ShardLookup>& shards) {
  ShardMatch m;
  for (size_t i = 0; i < shards.size(); ++i) {
    int64_t k = shards[i].relative.empty() ? -1 : index.FindShard(shards[i].relative);
    if (k < 0) k = index.FindShard(shards[i].full);
    if (k < 0) {
      m.missing = static_cast<int64_t>(i);
      return m;
    }
    m.entry.push_back(static_cast<uint64_t>(k));
    const uint64_t listed = index.shard(static_cast<size_t>(k)).file_size;
    std::string why;
    if (listed != shards[i].size) {
      why = "the shard is " + std::to_string(shards[i].size) + " bytes but the index '" +
            index_name + "' lists " + std::to_string(listed) +
            " bytes: it changed after it was indexed";
      m.any_stale = true;
    }
    m.stale.push_back(std::move(why));
  }
  return m;
}

std::string ResolveCacheDir(const std::string& cache_dir) {
  if (!cache_dir.empty()) return cache_dir;
  if (const char* s = std::getenv("SLUICE_CACHE_DIR"); s != nullptr && *s) return s;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x) {
    return (fs::path(x) / "sluice").string();
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h) {
    return (fs::path(h) / ".cache" / "sluice").string();
  }
  return (fs::temp_directory_path() / "sluice-cache").string();
}

Result<ChosenIndex> OpenShardIndex(const std::vector<ShardFile>& shards,
                                   const FieldMapping& mapping, const IndexOptions& options) {
  if (!options.explicit_index.empty()) return Explicit(shards, mapping, options.explicit_index);
  const fs::path data_dir = fs::path(shards.front().absolute).parent_path();
  const std::string cache_dir = ResolveCacheDir(options.cache_dir);
  const std::string cache_name = "sluice-index-" + CacheKey(shards, mapping) + ".sluice";
  std::vector<std::string> notes;
  if (auto found = FindIndex(shards, mapping, options, {data_dir, cache_dir, cache_name}, notes)) {
    found->notes = std::move(notes);
    return std::move(*found);
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto records = ScanShards(shards, mapping);
  if (!records) return std::unexpected(records.error());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto say = [&](std::string line) {
    if (!options.quiet) log::Info(kLog, line);
    notes.push_back(std::move(line));
  };
  uint64_t samples = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const auto& r = (*records)[i];
    samples += r.size();
    if (!r.empty() && r.back().corrupt_tail()) {
      say(shards[i].path + ": " + DescribeBadRecord(r.back(), mapping) + "; the " +
          std::to_string(r.size() - 1) +
          " samples before it are kept, the rest counts as one bad sample");
    }
  }
  char took[32];
  std::snprintf(took, sizeof(took), "%.2f s", seconds);
  const std::string what = "indexed " + std::to_string(shards.size()) + " shard(s) (" +
                           std::to_string(samples) + " samples) in " + took;

  // Beside the data (names relative to it), else in the cache directory
  // (absolute names), else in memory.
  std::string where, why_not_beside, in_memory;
  if (DirWritable(data_dir)) {
    auto w = MakeWriter(shards, *records, mapping, data_dir);
    if (!w) return std::unexpected(w.error());
    const std::string path = (data_dir / cache_name).string();
    if (auto st = w->Write(path); st) {
      where = path;
      say(what + "; index written to " + path);
    } else {
      why_not_beside = st.error().message;
    }
  } else {
    why_not_beside = "'" + data_dir.string() + "' is not writable";
  }
  if (where.empty()) {
    auto w = MakeWriter(shards, *records, mapping, fs::path());
    if (!w) return std::unexpected(w.error());
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    const std::string path = (fs::path(cache_dir) / cache_name).string();
    if (auto st = w->Write(path); st) {
      where = path;
      say(what + "; " + why_not_beside + ", so the index is written to " + path);
    } else {
      say(what + "; cannot write the index (" + why_not_beside + "; " + st.error().message +
          "): it is kept in memory and rebuilt on every open");
      in_memory = w->Serialize();
    }
  }
  auto index =
      where.empty() ? ShardIndex::FromBytes(in_memory, "(in memory)") : ShardIndex::Load(where);
  if (!index) return std::unexpected(index.error());
  const std::string in = where.empty() ? "/(in memory)" : where;
  ShardMatch m = MatchShards(*index, in, LocalLookups(in, shards));
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
