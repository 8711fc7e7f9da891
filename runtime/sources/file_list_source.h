// file_list: a CSV or TSV list of (path, label) rows. Every row is a sample,
// whatever its file's extension (the list names its samples explicitly; the
// decoder the plan names decides what it accepts).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/param.h"
#include "runtime/sources/file_reader.h"
#include "runtime/sources/source.h"

namespace sluice::runtime {

class FileListSource final : public LocalFileSource {
 public:
  // Parses the list at `list_path`. The first line is a header naming the
  // columns; the delimiter is options.delimiter, or when that is 0 a tab if the
  // header contains one, else a comma.
  // options.path_column and options.label_column pick the columns (other
  // columns are ignored). Fields may be quoted with '"' ("" is a literal
  // quote; a quoted field may hold the delimiter but not a newline). A relative
  // path is taken relative to the list file's directory. Labels are decimal
  // integers. Blank lines are skipped; a trailing '\r' is stripped. Rows keep
  // their file order.
  //
  // Containment: the list file's directory is the list's root. Unless
  // options.allow_outside_root, a row's path must stay under it: an absolute
  // path, or one whose `..` climb above the root (checked lexically, e.g.
  // "a/../../x"), is refused here; and every read resolves the path inside the
  // root with openat2(RESOLVE_BENEATH) (ConfinedDir), so a symlink is followed
  // only while its target stays under the root, and one that leads outside
  // makes that sample's read fail (a bad sample under output.on_error, naming
  // the path). The symlink check costs nothing at open (no per-file stat of a
  // 1.28M-row list) and nothing extra per read (one openat2 instead of open).
  // With allow_outside_root, paths are opened as given, symlinks followed.
  //
  // Errors: kNotFound / kIo reading the list; kInvalidSpec naming
  // "file:line" for a missing column, a row with too few fields, an empty path,
  // a path outside the root (naming it and allow_outside_root), a bad label or
  // an unterminated quote; kInvalidArgument for an empty list.
  static Result<std::unique_ptr<FileListSource>> Open(const std::string& list_path,
                                                      const SourceOptions& options = {});
  // The same list from its text (no file system access): `list_path` names it
  // in messages and its directory is the base of relative paths. Same errors
  // as Open except kNotFound / kIo.
  static Result<std::unique_ptr<FileListSource>> Parse(std::string_view text,
                                                       const std::string& list_path,
                                                       const SourceOptions& options = {});

  // Reads sample i: through the root (ConfinedDir, opened on the first read)
  // unless allow_outside_root; as LocalFileSource::Read otherwise. Errors:
  // those of LocalFileSource::Read, and kIo for a path that resolves outside
  // the root or a root that cannot be opened.
  Result<size_t> Read(size_t i, std::vector<uint8_t>& buffer) const override;

 private:
  FileListSource() = default;

  bool allow_outside_root_ = false;
  std::string root_;       // the list's directory ("" = the working directory)
  size_t rel_offset_ = 0;  // paths_[i].c_str() + rel_offset_: the path under root_
  mutable std::once_flag root_once_;
  mutable std::optional<Result<ConfinedDir>> root_dir_;  // set once, by root_once_
};

// The registry's open function (source_registry.h): params `path` (the list),
// `delimiter` (auto | comma | tab), `path_column`, `label_column`,
// `allow_outside_root`.
Result<std::unique_ptr<Source>> OpenFileListSource(const ParamList& params);

// Splits one delimited line into fields (exposed for tests). Returns false on
// an unterminated quote.
bool SplitDelimitedLine(std::string_view line, char delimiter, std::vector<std::string>& fields);

}  // namespace sluice::runtime
