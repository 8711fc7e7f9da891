// Sample sources: an indexed collection of (encoded payload, label) pairs.
//
// A Source is built once (it lists its samples eagerly, sorted, so indices are
// stable across runs and machines) and then only read. Every method is const
// and thread-safe; Read() uses no shared state, so any number of fetch tasks
// may call it at once with their own buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/remote/object_store.h"
#include "sluice/result.h"

namespace sluice::runtime {

// What a source reading through an ObjectStore did (cumulative).
struct SourceIoStats {
  remote::RequestStats requests;     // the store's counters
  uint64_t cache_hits = 0;           // shards found in the local shard cache
  uint64_t cache_misses = 0;         // shards fetched into it
  uint64_t cache_lock_timeouts = 0;  // waits for another process's download that ran out
  uint64_t cache_passthrough = 0;    // shards read once past the cache, not kept
  uint64_t cache_no_space = 0;       // of those, shards its disk had no room for
  uint64_t coalesced_requests = 0;
  uint64_t coalesced_samples = 0;
  uint64_t shards_streamed = 0;
  int read_ahead = 0;              // shards streamed ahead now
  uint64_t read_ahead_stalls = 0;  // read-ahead shards a read waited for
};

class Source {
 public:
  virtual ~Source() = default;

  // Number of samples; indices are [0, size()).
  virtual size_t size() const = 0;
  // How messages name sample i (a file path, or "SHARD:KEY" inside a shard);
  // never used to open anything. Not on the hot path: may allocate. i < size().
  virtual std::string SampleName(size_t i) const = 0;
  // Integer label of sample i. i < size().
  virtual int64_t label(size_t i) const = 0;
  // Names of the classes for label values 0..K-1, when the source knows them
  // (image_folder: the subfolder names). May be empty.
  virtual const std::vector<std::string>& class_names() const = 0;

  // Reads sample i's whole file into `buffer` (grown only when too small, never
  // shrunk) and returns its byte count n; buffer[0, n) is the payload.
  // Errors: kNotFound / kIo naming the path; kInvalidArgument for i >= size().
  virtual Result<size_t> Read(size_t i, std::vector<uint8_t>& buffer) const = 0;

  // Read(i, buffer), but only when it cannot block on storage: the bytes are
  // already in memory (the page cache, a remote range already fetched) or the
  // sample fails without any I/O. nullopt when it would have to wait: nothing
  // was consumed, and the caller then calls Read (under source.read_timeout,
  // runtime/exec/read_pool.h). A returned result is final, as from Read. The
  // default never reads (a per-file open can block; image_folder keeps it).
  virtual std::optional<Result<size_t>> ReadIfReady(size_t i, std::vector<uint8_t>& buffer) const {
    (void)i;
    (void)buffer;
    return std::nullopt;
  }

  // For sources whose samples live in shards read best in order (tar_shards):
  // the first sample index of each shard, ascending, starting at 0 (shard k is
  // [starts[k], starts[k+1]) and the last runs to size()). Empty for sources
  // without shards. order: shard_shuffle needs it.
  virtual std::vector<uint64_t> ShardStarts() const { return {}; }

  // ---- Remote reads (runtime/sources/tar/remote_reader.h). Sources that
  // read local files ignore these (the defaults). ----

  // How the loader will read: kRandomAccess (order: shuffle) or
  // kShardSequential (shard_shuffle, sequential). Called once, before the
  // source is shared with readers.
  enum class AccessPattern { kRandomAccess, kShardSequential };
  virtual void SetAccessPattern(AccessPattern) {}
  // Whether WillRead does anything: when false the loader announces nothing
  // (local sources: no order lookups under the loader's lock for nothing).
  virtual bool WantsReadHints() const { return false; }
  // Samples the loader should announce ahead of the batch it schedules
  // (WillRead); 0 = only each batch's own samples.
  virtual uint64_t ReadHintWindow() const { return 0; }
  // The loader will read these dataset indices soon, in this order (each
  // batch's samples when the batch is scheduled, plus ReadHintWindow() ahead).
  // A hint only: never blocks on I/O, may be wrong or never followed (Restore,
  // shutdown). Called with the loader's lock held: keep it cheap.
  virtual void WillRead(std::span<const uint64_t> indices) const { (void)indices; }
  // Makes reads in flight return promptly (kIo) and later ones fail fast
  // (the loader's shutdown). Idempotent.
  virtual void CancelReads() const {}
  // Request counters of a source reading through an ObjectStore; nullopt for
  // local sources.
  virtual std::optional<SourceIoStats> IoStats() const { return std::nullopt; }
};

// A source whose samples are local files listed when it is opened: it holds
// the (path, label) table and the class names; subclasses fill them in Open.
class LocalFileSource : public Source {
 public:
  size_t size() const override { return paths_.size(); }
  std::string SampleName(size_t i) const override { return paths_[i]; }
  // Path of sample i as it is opened (absolute or relative to the process
  // working directory, as given to the source). i < size().
  const std::string& path(size_t i) const { return paths_[i]; }
  int64_t label(size_t i) const override { return labels_[i]; }
  const std::vector<std::string>& class_names() const override { return classes_; }
  // Reads the local file path(i) with pread (ReadWholeFile).
  Result<size_t> Read(size_t i, std::vector<uint8_t>& buffer) const override;

 protected:
  std::vector<std::string> classes_;  // may stay empty (file_list)
  std::vector<std::string> paths_;
  std::vector<int64_t> labels_;  // parallel to paths_
};

// How the concrete sources open (their op params, read by their Open*Source
// functions in the registry's table: runtime/sources/source_registry.h).
struct SourceOptions {
  // file_list: names of the header columns holding the path and the label.
  std::string path_column = "path";
  std::string label_column = "label";
  // file_list: the field separator, ',' or '\t'; 0 = auto (a tab if the
  // header line has one, else a comma).
  char delimiter = 0;
  // file_list: accept absolute paths and paths that leave the list's
  // directory (through `..` or a symlink). Off: such rows or reads are refused
  // (FileListSource says how).
  bool allow_outside_root = false;
  // image_folder: accepted file extensions, lower case with the dot; matched
  // case-insensitively.
  std::vector<std::string> extensions = {".jpg", ".jpeg", ".png"};
};

}  // namespace sluice::runtime
