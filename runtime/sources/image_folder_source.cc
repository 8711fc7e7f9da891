#include "runtime/sources/image_folder_source.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "runtime/sources/file_reader.h"
#include "runtime/sources/source_registry.h"

namespace sluice::runtime {
namespace fs = std::filesystem;
namespace {

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

bool Hidden(const fs::path& p) {
  std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// Lists image files under one class folder as (directory relative to the
// class folder, file name) pairs, recursing into non-hidden subfolders and
// following symlinks, like torchvision's os.walk(followlinks=True).
Status ListClass(const fs::path& class_dir, const std::vector<std::string>& extensions,
                 std::vector<std::pair<std::string, std::string>>& out) {
  std::error_code ec;
  fs::recursive_directory_iterator it(class_dir, fs::directory_options::follow_directory_symlink,
                                      ec);
  if (ec) {
    return MakeError(ErrorCode::kIo, "cannot list '" + class_dir.string() + "': " + ec.message());
  }
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      return MakeError(ErrorCode::kIo, "cannot list '" + class_dir.string() + "': " + ec.message());
    }
    const fs::directory_entry& entry = *it;
    if (Hidden(entry.path())) {
      if (entry.is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!entry.is_regular_file(ec)) continue;  // follows symlinks
    std::string ext = Lower(entry.path().extension().string());
    if (std::find(extensions.begin(), extensions.end(), ext) == extensions.end()) continue;
    fs::path rel_dir = entry.path().parent_path().lexically_relative(class_dir);
    out.emplace_back(rel_dir == "." ? std::string() : rel_dir.string(),
                     entry.path().filename().string());
  }
  return Ok();
}

}  // namespace

Result<std::unique_ptr<ImageFolderSource>> ImageFolderSource::Open(const std::string& root,
                                                                   const SourceOptions& options) {
  std::error_code ec;
  fs::path root_path(root);
  if (!fs::is_directory(root_path, ec)) {
    return MakeError(ErrorCode::kNotFound, "image_folder root is not a directory: '" + root + "'");
  }
  std::vector<std::string> extensions;
  for (const std::string& e : options.extensions) {
    extensions.push_back(Lower(e.empty() || e[0] == '.' ? e : "." + e));
  }

  std::unique_ptr<ImageFolderSource> src(new ImageFolderSource());
  fs::directory_iterator it(root_path, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot list '" + root + "': " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return MakeError(ErrorCode::kIo, "cannot list '" + root + "': " + ec.message());
    if (Hidden(it->path())) continue;
    if (it->is_directory(ec)) src->classes_.push_back(it->path().filename().string());
  }
  if (src->classes_.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "image_folder root '" + root + "' has no class subfolders",
                     "expected ROOT/<class name>/<image files>");
  }
  std::sort(src->classes_.begin(), src->classes_.end());

  std::vector<std::pair<std::string, std::string>> files;
  for (size_t c = 0; c < src->classes_.size(); ++c) {
    fs::path class_dir = root_path / src->classes_[c];
    files.clear();
    SLUICE_RETURN_IF_ERROR(ListClass(class_dir, extensions, files));
    std::sort(files.begin(), files.end());
    for (const auto& [dir, name] : files) {
      fs::path p = dir.empty() ? class_dir / name : class_dir / dir / name;
      src->paths_.push_back(p.string());
      src->labels_.push_back(static_cast<int64_t>(c));
    }
  }
  if (src->paths_.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "image_folder root '" + root + "' has no image files in its class folders");
  }
  return src;
}

Result<std::unique_ptr<Source>> OpenImageFolderSource(const ParamList& params) {
  auto src = ImageFolderSource::Open(SourceParamString(params, "path", ""));
  if (!src) return std::unexpected(src.error());
  return std::unique_ptr<Source>(std::move(*src));
}

}  // namespace sluice::runtime
