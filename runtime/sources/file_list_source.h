// file_list: a CSV or TSV list of (path, label) rows.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/sources/source.h"

namespace sluice::runtime {

class FileListSource final : public LocalFileSource {
 public:
  // Parses the list at `list_path`. The first line is a header naming the
  // columns; the delimiter is a tab if the header contains one, else a comma.
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

 private:
  FileListSource() = default;
};

// Splits one delimited line into fields (exposed for tests). Returns false on
// an unterminated quote.
bool SplitDelimitedLine(std::string_view line, char delimiter, std::vector<std::string>& fields);

}  // namespace sluice::runtime
