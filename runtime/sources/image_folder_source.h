// image_folder: ROOT/<class>/<file>, as torchvision.datasets.ImageFolder.
// Samples are the files with a .jpg, .jpeg or .png extension in any case
// (.JPG, .Png, ...): the decoder the plan names decides what it accepts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/param.h"
#include "runtime/sources/source.h"

namespace sluice::runtime {

class ImageFolderSource final : public LocalFileSource {
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

 private:
  ImageFolderSource() = default;
};

// The registry's open function (source_registry.h): params `path` (the root).
Result<std::unique_ptr<Source>> OpenImageFolderSource(const ParamList& params);

}  // namespace sluice::runtime
