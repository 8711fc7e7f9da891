// tar_shards: samples stored in WebDataset-style POSIX tar shards, read
// through a shard index (runtime/sources/tar/shard_index.h) so that opening
// reads no shard and reading sample i is one preadv of its image member
// (header + data) from a shard descriptor opened once.
//
// A sample is a run of consecutive members sharing a key ("n01440764_10026"
// for n01440764_10026.jpg and n01440764_10026.cls); its image is the member
// with one of the `image` extensions, its label the decimal text of the
// `label` member. A sample missing a field, a member that no longer matches
// the index (header checksum or size), a truncated member, or the part of a
// shard after corrupt tar data is a bad sample: Read returns kCorruptData
// naming the shard and the key, and the loader's error policy decides.
// Member names are never used as file system paths.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/param.h"
#include "runtime/remote/object_store.h"
#include "runtime/sources/source.h"
#include "runtime/sources/tar/index_store.h"
#include "runtime/sources/tar/page_cache_prefetch.h"
#include "runtime/sources/tar/remote_reader.h"
#include "runtime/sources/tar/shard_index.h"

namespace sluice::runtime {

struct TarShardOptions {
  // A directory (its *.tar files, sorted), a glob, or a brace pattern
  // (runtime/sources/tar/shard_paths.h); or a URL (s3://, https://, http://,
  // file://) with braces, globs or a '/'-ended prefix
  // (runtime/sources/tar/remote_index.h), read through an ObjectStore.
  std::string path;
  tar::FieldMapping mapping;
  tar::IndexOptions index;
  // URL paths only: the store's requests and the read patterns.
  remote::RemoteOptions remote;
  tar::RemoteReadOptions read;
  // URL paths: size the read-ahead from the shards (tar::ChooseReadAhead,
  // runtime/sources/tar/read_ahead.h) with read.read_ahead and
  // read_ahead_bytes as the spec's values (-1 = auto), and log the choice.
  // The tar_shards op sets it; callers that fill `read` themselves do not.
  bool choose_read_ahead = false;
  int64_t read_ahead_bytes = -1;
  int64_t read_ahead_budget = -1;  // kReadAheadBudgetParam; -1 = no tuned budget
  // Local paths: announced samples' members are read into the page cache
  // ahead of the workers (tar::PageCachePrefetcher).
  bool page_cache_prefetch = true;
  // Tests: the store to read URLs through (else OpenObjectStore(path)).
  std::shared_ptr<remote::ObjectStore> store;
};

class TarShardSource final : public Source {
 public:
  // Resolves the shards, opens each once, and finds or builds their index
  // (runtime/sources/tar/index_store.h). Class names come from a
  // manifest.json beside the first shard ("class_names": [...]) when there is
  // one. Errors: kNotFound (no shard), kIo (a shard cannot be opened or
  // read), kInvalidArgument (no samples; a bad explicit index; a manifest
  // whose class_names is not a list of strings), an explicit index's load
  // errors.
  static Result<std::unique_ptr<TarShardSource>> Open(const TarShardOptions& options);
  ~TarShardSource() override;

  size_t size() const override { return size_; }
  // "SHARD:KEY" (SHARD = the shard's file name, or its path when two selected
  // shards share a file name; KEY read from the member's header, which holds
  // at most 255 bytes of a long name), or "SHARD@BYTE" when the header cannot
  // be read. Reads 512 bytes: not for the hot path.
  std::string SampleName(size_t i) const override;
  // The sample's label; -1 for a sample without a usable label (its Read fails).
  int64_t label(size_t i) const override;
  const std::vector<std::string>& class_names() const override { return classes_; }
  // One preadv of the image member's header and data; the header is checked
  // against the index (VerifyHeaderFor). Errors: kCorruptData naming the
  // sample (a bad sample, see the file comment), kIo on a read failure,
  // kInvalidArgument for i >= size().
  Result<size_t> Read(size_t i, std::vector<uint8_t>& buffer) const override;
  // Read without blocking: a local member with preadv2(RWF_NOWAIT) (nullopt
  // when part of it is not in the page cache, or the file system does not
  // support the flag: then never again), a remote one when its range or shard
  // has already arrived (RemoteShardReader::ReadIfReady).
  std::optional<Result<size_t>> ReadIfReady(size_t i, std::vector<uint8_t>& buffer) const override;
  // The first sample of each shard that has samples.
  std::vector<uint64_t> ShardStarts() const override;

  // URL paths: the read pattern (runtime/sources/tar/remote_reader.h), hints,
  // cancellation and request counters (nullopt for local paths). Local paths
  // with page_cache_prefetch take hints too: the announced members go to
  // the page-cache prefetcher, kLocalHintWindow samples ahead. Only while
  // the page cache misses: a WillRead prefetches if a ReadIfReady found its
  // member not resident within the last kPrefetchCallsAfterMiss WillReads
  // (and for the first ones); with every read served from the page cache,
  // announcements are dropped at no cost.
  static constexpr uint64_t kLocalHintWindow = 256;
  static constexpr int kPrefetchCallsAfterMiss = 16;
  void SetAccessPattern(AccessPattern pattern) override;
  bool WantsReadHints() const override { return reader_ != nullptr || prefetcher_ != nullptr; }
  uint64_t ReadHintWindow() const override;
  void WillRead(std::span<const uint64_t> indices) const override;
  void CancelReads() const override;
  std::optional<SourceIoStats> IoStats() const override;
  bool remote() const { return reader_ != nullptr; }

  // Where the index came from (a file, or "(in memory)"), and whether it was
  // built by this Open.
  const std::string& index_path() const { return index_path_; }
  bool index_built() const { return index_built_; }
  size_t num_shards() const { return shards_.size(); }
  // The page-cache prefetcher's counters (zeros when there is none).
  tar::PageCachePrefetcher::Counters prefetch_counters() const;

 private:
  struct Shard {
    std::string name;                            // for messages (remote: the URL, secrets redacted)
    int fd = -1;                                 // local paths
    std::string url;                             // URL paths
    const tar::SampleRecord* records = nullptr;  // into the index
    uint64_t start = 0;                          // its first sample index
    uint64_t count = 0;
    std::string disagreement;  // why the index is stale for it, or ""
  };
  TarShardSource() = default;
  static Result<std::unique_ptr<TarShardSource>> OpenRemote(const TarShardOptions& options);
  static Result<std::unique_ptr<TarShardSource>> OpenRemoteUnscrubbed(
      const TarShardOptions& options);
  // Fills shards_ from the chosen index (shards_[i] exists for each file).
  Status UseIndex(tar::ChosenIndex chosen, const std::string& path);
  // The shard holding sample i (i < size()).
  const Shard& ShardOf(size_t i) const;
  size_t ShardNumber(size_t i) const;
  // Read (flags 0) and ReadIfReady (RWF_NOWAIT); nullopt only with RWF_NOWAIT.
  std::optional<Result<size_t>> ReadWith(size_t i, std::vector<uint8_t>& buffer, int flags) const;
  // Reads sample i's header and data through the reader (only_if_ready:
  // through RemoteShardReader::ReadIfReady; nullopt when it has not arrived).
  std::optional<Result<size_t>> ReadRemote(size_t i, std::vector<uint8_t>& buffer,
                                           bool only_if_ready) const;

  tar::FieldMapping mapping_;
  std::unique_ptr<tar::ShardIndex> index_;
  std::vector<Shard> shards_;
  std::vector<uint64_t> starts_;  // shards_[k].start, for the binary search
  std::vector<std::string> classes_;
  size_t size_ = 0;
  std::string index_path_;
  bool index_built_ = false;
  std::unique_ptr<tar::RemoteShardReader> reader_;        // URL paths
  std::unique_ptr<tar::PageCachePrefetcher> prefetcher_;  // local paths; reset before the fds close
  std::vector<std::string> secrets_;                      // remote::UrlSecrets(path)
  mutable std::atomic<bool> nowait_unsupported_{false};   // preadv2 said EOPNOTSUPP
  mutable std::atomic<uint64_t> nowait_misses_{0};        // ReadIfReady: not resident
  // WillRead's state (its callers hold the loader's lock: one at a time).
  mutable uint64_t misses_seen_ = 0;
  mutable int prefetch_calls_left_ = kPrefetchCallsAfterMiss;
  // The remote ranges announced (reused: no allocation per batch once grown).
  mutable std::vector<tar::RemoteShardReader::Range> announced_;
};

// The registry's open function: params path, image ("jpg;jpeg;png": ';' or
// ',' separated extensions), label ("cls"; "" = no labels), index, cache_dir,
// read_ahead, read_ahead_bytes, the `cache` section (dir, max_bytes) and the
// `remote` section (RemoteOptions' fields, named as in docs/remote.md).
Result<std::unique_ptr<Source>> OpenTarShardsSource(const ParamList& params);

// Splits an `image` param ("jpg;jpeg, png", ".PNG") into lower-case
// extensions without dots.
std::vector<std::string> SplitExtensions(const std::string& text);

// A source param the loader adds (never a spec's): the bytes the plan's tuned
// memory budget leaves after the prefetch buffers (runtime/exec/loader_config.cc).
inline constexpr const char* kReadAheadBudgetParam = "__read_ahead_budget";

}  // namespace sluice::runtime
