// Finding, checking and building the index of a set of tar shards
// (shard_index.h) for the tar_shards source.
//
// Where an index comes from, in order (DIR = the first shard's directory):
//  1. an explicit index file (`index:`): it must list every selected shard
//     and use the same field mapping; a shard whose size differs from its
//     entry is marked as disagreeing (its samples are bad samples);
//  2. DIR/index.sluice (the name `sluice pack` writes), used in place when it
//     lists every selected shard with its current size and the same mapping
//     (a subset of its shards is fine), and no selected shard's modification
//     time (in nanoseconds) is later than index.sluice's own (pack writes the
//     index after its shards); else one warning names such a shard and the
//     next steps give the index;
//  3. a cached index DIR/sluice-index-HASH.sluice, then CACHE/sluice-index-
//     HASH.sluice, where HASH covers the shards' absolute paths, sizes and
//     modification times and the mapping;
//  4. else the shards are scanned (in parallel) and the index is written to
//     DIR/sluice-index-HASH.sluice, or, when DIR is not writable (or has no
//     write permission bit at all: a read-only data set, even for root), to
//     CACHE; one line on stderr says so. When neither can be written, the
//     index is kept in memory.
// CACHE = cache_dir, else $SLUICE_CACHE_DIR, else $XDG_CACHE_HOME/sluice, else
// $HOME/.cache/sluice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/sources/tar/shard_index.h"
#include "sluice/result.h"

namespace sluice::runtime::tar {

// The file name `sluice pack` gives its index, in the shards' directory.
inline constexpr char kPackIndexName[] = "index.sluice";

// One selected shard, opened.
struct ShardFile {
  std::string path;      // as selected (for messages)
  std::string absolute;  // absolute, lexically normal
  int fd = -1;           // open for reading
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

struct IndexOptions {
  std::string explicit_index;  // "" = look up / build
  std::string cache_dir;       // "" = from the environment
  bool quiet = false;          // no stderr lines (tests)
};

struct ChosenIndex {
  ShardIndex index;
  std::vector<uint64_t> entry;            // per selected shard: its shard in `index`
  std::vector<std::string> disagreement;  // per selected shard: why its entry is stale, or ""
  std::string where;                      // the index file (or "memory")
  bool built = false;                     // scanned now (else found)
  std::vector<std::string> notes;         // what was printed (corrupt shards, where written)
};

// Finds or builds the index for `shards` (see the file comment).
// Errors: an explicit index that cannot be loaded, lists another mapping or
// misses a shard (kInvalidArgument / its load error); kIo when a shard
// cannot be read while scanning.
Result<ChosenIndex> OpenShardIndex(const std::vector<ShardFile>& shards,
                                   const FieldMapping& mapping, const IndexOptions& options);

// How selected shards line up with an index's shard table (local and remote
// sources alike).
struct ShardMatch {
  std::vector<uint64_t> entry;     // per shard: its shard in the index
  std::vector<std::string> stale;  // per shard: why its entry's size is wrong, or ""
  bool any_stale = false;
  int64_t missing = -1;  // the first shard the index does not list, or -1
};
// One selected shard as the matcher sees it: the names to look it up by, in
// order ("" = skip), and its current size.
struct ShardLookup {
  std::string relative;  // relative to the index's directory
  std::string full;      // absolute path or URL
  uint64_t size = 0;
};
// Stops at the first shard the index does not list. `index_name` is for
// messages.
ShardMatch MatchShards(const ShardIndex& index, const std::string& index_name,
                       const std::vector<ShardLookup>& shards);

// The cache directory (see above) for `cache_dir` ("" = from the environment).
std::string ResolveCacheDir(const std::string& cache_dir);

}  // namespace sluice::runtime::tar
