// file_list: a CSV or TSV list of (path, label) rows. Every row is a sample,
// whatever its file's extension (the list names its samples explicitly; the
// decoder the plan names decides what it accepts).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/param.h"
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
  // Errors: kNotFound / kIo reading the list; kInvalidSpec naming
  // "file:line" for a missing column, a row with too few fields, an empty path,
  // a bad label or an unterminated quote; kInvalidArgument for an empty list.
  static Result<std::unique_ptr<FileListSource>> Open(const std::string& list_path,
                                                      const SourceOptions& options = {});
  // The same list from its text (no file system access): `list_path` names it
  // in messages and its directory is the base of relative paths. Same errors
  // as Open except kNotFound / kIo.
  static Result<std::unique_ptr<FileListSource>> Parse(std::string_view text,
                                                       const std::string& list_path,
                                                       const SourceOptions& options = {});

 private:
  FileListSource() = default;
};

// The registry's open function (source_registry.h): params `path` (the list),
// `delimiter` (auto | comma | tab), `path_column`, `label_column`.
Result<std::unique_ptr<Source>> OpenFileListSource(const ParamList& params);

// Splits one delimited line into fields (exposed for tests). Returns false on
// an unterminated quote.
bool SplitDelimitedLine(std::string_view line, char delimiter, std::vector<std::string>& fields);

}  // namespace sluice::runtime
