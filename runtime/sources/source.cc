#include "runtime/sources/source.h"

#include "runtime/sources/file_list_source.h"
#include "runtime/sources/file_reader.h"
#include "runtime/sources/image_folder_source.h"

namespace sluice::runtime {

Result<size_t> Source::Read(size_t i, std::vector<uint8_t>& buffer) const {
  if (i >= size()) {
    return MakeError(ErrorCode::kInvalidArgument, "sample index " + std::to_string(i) +
                                                      " out of range (size " +
                                                      std::to_string(size()) + ")");
  }
  return ReadWholeFile(path(i), buffer);
}

Result<std::unique_ptr<Source>> OpenSource(std::string_view format, const std::string& path,
                                           const SourceOptions& options) {
  if (format == "image_folder") {
    auto src = ImageFolderSource::Open(path, options);
    if (!src) return std::unexpected(src.error());
    return std::unique_ptr<Source>(std::move(*src));
  }
  if (format == "file_list") {
    auto src = FileListSource::Open(path, options);
    if (!src) return std::unexpected(src.error());
    return std::unique_ptr<Source>(std::move(*src));
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "unknown source format '" + std::string(format) + "'",
                   "supported formats: image_folder, file_list");
}

}  // namespace sluice::runtime
