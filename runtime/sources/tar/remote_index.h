// Shards named by URL (runtime/remote/object_store.h): which objects a
// tar_shards `path` URL names, and their index and manifest.
//
// Which shards (ResolveShardUrls), for each brace expansion of the path
// (shard_paths.h ExpandBraces), in order (for an http(s) URL, only its path
// is looked at: its query, e.g. a presigned or SAS token, is no glob and is
// kept on every request, but never written into an index):
//  - with a glob character (* ? [): the objects listed under the text before
//    the first glob character, matched with fnmatch(3) (a '*' does not cross
//    '/'; Sluice's own files, shard_paths.h IsSluiceFile, skipped), sorted;
//  - ending in '/': the objects directly under that prefix ending in ".tar";
//  - else the object itself (Stat); when there is none and the name does not
//    end in ".tar", it is taken as a directory (name + "/").
// HTTP servers cannot list: globs and directories need s3:// or file://.
//
// Where the index comes from (DIR = the first shard's URL up to its path's
// last '/'; DIR/index.sluice carries the shard URL's query, SiblingUrl):
//  1. an explicit index (`index:`, a local path or a URL): it must list every
//     shard and the mapping; a shard whose size differs is marked disagreeing;
//  2. DIR/index.sluice (what `sluice pack` writes; names relative to DIR),
//     used when it lists every shard with its current size and the mapping,
//     and no shard's version (ObjectInfo::version: ETag, Last-Modified)
//     differs from the one recorded when this index.sluice (at its own
//     version) was first used with this CACHE (CACHE/sluice-seen-HASH.txt);
//     else one warning names the shard and the next steps give the index.
//     Without versions (the server sends neither header) only sizes count;
//  3. CACHE/sluice-index-HASH.sluice, HASH covering the shards' URLs (without
//     their authentication: remote::ShardCache::KeyOf), sizes and versions
//     and the mapping (a shard replaced by one of the same size is
//     re-indexed when its server gives a version, as local shards are by
//     their modification time);
//  4. else each shard is streamed once (ObjectStore::Stream) to a temporary
//     file in CACHE, scanned, and the index written to CACHE (one stderr line
//     says so), else kept in memory. With a shard cache (ScanThrough), each
//     shard is instead acquired through it at its version (ObjectInfo::
//     version: a replaced shard is not scanned from the old one's entry):
//     downloaded once, verified against the manifest's checksum when there
//     is one, scanned from the cached file, and left there for the reads
//     that follow.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/remote/object_store.h"
#include "runtime/remote/shard_cache.h"
#include "runtime/sources/tar/index_store.h"
#include "runtime/sources/tar/shard_index.h"
#include "sluice/result.h"

namespace sluice::runtime::tar {

// The shard objects `pattern` names (see the file comment), each once.
// Errors: kNotFound (a named shard does not exist, a glob or directory
// matches nothing), kUnsupported (listing over plain HTTP), the store's
// errors; messages name the URL with secrets redacted.
Result<std::vector<remote::ObjectInfo>> ResolveShardUrls(remote::ObjectStore& store,
                                                         const std::string& pattern);

// The whole object `url` (for indexes and manifests): its size (Stat), then
// one stream (ObjectStore::Stream, resumed but never hedged). Errors: the
// store's; kCorruptData when the object's size changed meanwhile.
// `stat`, when given, receives the Stat.
Result<std::string> FetchObject(remote::ObjectStore& store, const std::string& url,
                                remote::ObjectInfo* stat = nullptr);

// How a shard being indexed is fetched: with `cache` null, streamed into a
// temporary file; else acquired through the cache (step 4 of the file
// comment), checked against sha256[url] when the manifest gave one.
struct ScanThrough {
  remote::ShardCache* cache = nullptr;
  // URL without its query (UrlWithoutQuery) -> hex
  const std::unordered_map<std::string, std::string>* sha256 = nullptr;
};

// Finds or builds the index for `shards` (see the file comment). `entry` and
// `disagreement` are parallel to `shards`.
Result<ChosenIndex> OpenRemoteShardIndex(remote::ObjectStore& store,
                                         const std::vector<remote::ObjectInfo>& shards,
                                         const FieldMapping& mapping, const IndexOptions& options,
                                         const ScanThrough& through = {});

// An http(s) URL without its query (a token or presigned signature is no
// part of the object's name); other URLs as they are.
std::string UrlWithoutQuery(const std::string& url);

// DIR of a shard URL: the text up to (not including) the last '/' of its
// path (an http(s) URL's query, which may hold '/', is left out).
std::string UrlDirectory(const std::string& url);

// The object `name` beside the shard at `url` (DIR/name), with the shard
// URL's query when it is an http(s) URL with one (a SAS or token query grants
// access to its siblings too): for index.sluice and manifest.json.
std::string SiblingUrl(const std::string& url, const std::string& name);

}  // namespace sluice::runtime::tar
