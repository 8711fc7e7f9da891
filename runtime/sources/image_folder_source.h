// image_folder: ROOT/<class>/<file>, as torchvision.datasets.ImageFolder.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/sources/source.h"

namespace sluice::runtime {

class ImageFolderSource final : public Source {
 public:
  // Lists `root`: each non-hidden subdirectory is a class; classes sorted by
  // name (byte order) get labels 0..K-1. Inside a class, regular files (or
  // symlinks to them) whose extension is in options.extensions
  // (case-insensitive) are samples, searched recursively like torchvision,
  // sorted by their path relative to the class folder. Hidden entries (name
  // starting with '.') are skipped. Sample order: class 0's files, then
  // class 1's, ...
  // Errors: kNotFound if root is missing or not a directory; kIo on a listing
  // failure; kInvalidArgument if no class folder or no image is found.
  static Result<std::unique_ptr<ImageFolderSource>> Open(const std::string& root,
                                                         const SourceOptions& options = {});

  size_t size() const override { return paths_.size(); }
  const std::string& path(size_t i) const override { return paths_[i]; }
  int64_t label(size_t i) const override { return labels_[i]; }
  const std::vector<std::string>& class_names() const override { return classes_; }

 private:
  ImageFolderSource() = default;

  std::vector<std::string> classes_;
  std::vector<std::string> paths_;
  std::vector<int32_t> labels_;
};

}  // namespace sluice::runtime
