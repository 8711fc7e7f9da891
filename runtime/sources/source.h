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
#include <string>
#include <string_view>
#include <vector>

#include "sluice/result.h"

namespace sluice::runtime {

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

  // For sources whose samples live in shards read best in order (tar_shards):
  // the first sample index of each shard, ascending, starting at 0 (shard k is
  // [starts[k], starts[k+1]) and the last runs to size()). Empty for sources
  // without shards. order: shard_shuffle needs it.
  virtual std::vector<uint64_t> ShardStarts() const { return {}; }
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
