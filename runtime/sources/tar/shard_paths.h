// Which shard files a tar_shards `path` names: a directory, a glob, or a
// WebDataset brace pattern ("shard-{000000..000127}.tar", "{train,val}-*.tar").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sluice/result.h"

namespace sluice::runtime::tar {

// Brace expansion as WebDataset's braceexpand does it: "{a,b}" lists,
// "{3..11}" and "{000..127}" integer ranges (zero-padded to the wider bound
// when either bound has a leading zero; descending ranges count down),
// nested and repeated groups (the cartesian product, left to right). A brace
// group with neither a top-level comma nor a range, or without its closing
// brace, stays literal. Errors: kInvalidArgument when the expansion would
// exceed the limits (checked before any name is made), or for a pattern over
// 64 KiB.
struct BraceLimits {
  size_t max_names = 1000000;
  size_t max_bytes = size_t{256} << 20;  // the names' total length
};
Result<std::vector<std::string>> ExpandBraces(std::string_view pattern,
                                              const BraceLimits& limits = {});

// Whether the base name `file_name` is a file Sluice itself writes beside
// shards: `index.sluice`, `manifest.json`, a cached index
// `sluice-index-*.sluice`, or such an index's temporary file
// (`index.sluice.tmp.*`, `sluice-index-*.sluice.tmp.*`). Glob expansion
// (local, and remote listings: remote_index.h) never selects one as a shard;
// directories give only "*.tar" files, which none of them is.
bool IsSluiceFile(std::string_view file_name);

// The shard files `path` names, each once (the first spelling of a file named
// twice, compared as lexically normal absolute paths: "d/a.tar" and
// "./d/a.tar" are one shard), in order:
//  - an existing directory: its non-hidden regular files ending in ".tar",
//    sorted by name;
//  - else each brace expansion of `path` in order; an expansion with a glob
//    character (* ? [) is matched with glob(3) (sorted; IsSluiceFile names
//    skipped), any other must be an existing file.
// Errors: kNotFound (a listed shard does not exist, a glob matches nothing,
// a directory holds no .tar file), kInvalidArgument (empty path, too many
// names), kIo (cannot list).
Result<std::vector<std::string>> ResolveShardPaths(const std::string& path);

}  // namespace sluice::runtime::tar
