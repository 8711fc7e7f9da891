#include "runtime/sources/file_list_source.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>

#include "runtime/sources/file_reader.h"
#include "runtime/sources/source_registry.h"

namespace sluice::runtime {
namespace fs = std::filesystem;

bool SplitDelimitedLine(std::string_view line, char delimiter, std::vector<std::string>& fields) {
  fields.clear();
  std::string field;
  size_t i = 0;
  const size_t n = line.size();
  while (true) {
    field.clear();
    if (i < n && line[i] == '"') {
      ++i;
      bool closed = false;
      while (i < n) {
        if (line[i] == '"') {
          if (i + 1 < n && line[i + 1] == '"') {
            field.push_back('"');
            i += 2;
          } else {
            ++i;
            closed = true;
            break;
          }
        } else {
          field.push_back(line[i++]);
        }
      }
      if (!closed) return false;
      // Anything between the closing quote and the delimiter is kept verbatim.
      while (i < n && line[i] != delimiter) field.push_back(line[i++]);
    } else {
      while (i < n && line[i] != delimiter) field.push_back(line[i++]);
    }
    fields.push_back(field);
    if (i >= n) break;
    ++i;  // the delimiter; a trailing delimiter yields a final empty field
  }
  return true;
}

Result<std::unique_ptr<FileListSource>> FileListSource::Open(const std::string& list_path,
                                                             const SourceOptions& options) {
  std::vector<uint8_t> bytes;
  auto size = ReadWholeFile(list_path, bytes);
  if (!size) return std::unexpected(size.error());
  return Parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), *size), list_path,
               options);
}

namespace {

// Where the columns are, from the header line.
struct FileListColumns {
  char delimiter = ',';
  size_t path_col = 0, label_col = 0, min_fields = 0;
};

// The header: the delimiter (the option, else a tab when the line has one,
// else a comma) and the path and label columns, which must both be named.
Result<FileListColumns> ParseHeader(std::string_view line, const SourceOptions& options,
                                    std::vector<std::string>& fields, const SourceMark& where) {
  FileListColumns cols;
  cols.delimiter = options.delimiter != 0                      ? options.delimiter
                   : line.find('\t') != std::string_view::npos ? '\t'
                                                               : ',';
  if (!SplitDelimitedLine(line, cols.delimiter, fields)) {
    return MakeError(ErrorCode::kInvalidSpec, "unterminated quote in header", {}, where);
  }
  bool found_path = false, found_label = false;
  for (size_t c = 0; c < fields.size(); ++c) {
    if (!found_path && fields[c] == options.path_column) cols.path_col = c, found_path = true;
    if (!found_label && fields[c] == options.label_column) cols.label_col = c, found_label = true;
  }
  if (!found_path || !found_label) {
    return MakeError(ErrorCode::kInvalidSpec,
                     "file list header has no '" +
                         (found_path ? options.label_column : options.path_column) + "' column",
                     "the first line must name the columns, e.g. '" + options.path_column +
                         (cols.delimiter == '\t' ? "\\t" : ",") + options.label_column + "'",
                     where);
  }
  cols.min_fields = std::max(cols.path_col, cols.label_col) + 1;
  return cols;
}

// A label field: an integer, spaces around it allowed.
Result<int64_t> ParseLabel(const std::string& field, const SourceMark& where) {
  std::string_view l = field;
  while (!l.empty() && l.front() == ' ') l.remove_prefix(1);
  while (!l.empty() && l.back() == ' ') l.remove_suffix(1);
  int64_t label = 0;
  auto [ptr, ec] = std::from_chars(l.data(), l.data() + l.size(), label);
  if (l.empty() || ec != std::errc() || ptr != l.data() + l.size()) {
    return MakeError(ErrorCode::kInvalidSpec, "label '" + field + "' is not an integer", {}, where);
  }
  return label;
}

// A listed path must stay under the list's directory (`root_name`): neither
// absolute nor climbing out with '..'.
Status CheckUnderRoot(const fs::path& fp, const std::string& p, const std::string& root_name,
                      const SourceMark& where) {
  const char* why = nullptr;
  if (fp.is_absolute()) {
    why = "is absolute";
  } else {
    const fs::path normal = fp.lexically_normal();
    if (!normal.empty() && *normal.begin() == "..") why = "climbs out of it with '..'";
  }
  if (why == nullptr) return Ok();
  return MakeError(ErrorCode::kInvalidSpec,
                   "path '" + p + "' " + why +
                       ": file_list paths must stay under the "
                       "list's directory '" +
                       root_name + "'",
                   "write the path relative to '" + root_name +
                       "' (move the list up to a common parent directory), or set "
                       "`allow_outside_root: true` on file_list if you trust the list",
                   where);
}

}  // namespace

Result<std::unique_ptr<FileListSource>> FileListSource::Parse(std::string_view text,
                                                              const std::string& list_path,
                                                              const SourceOptions& options) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // UTF-8 BOM

  const std::string base = fs::path(list_path).parent_path().string();
  // Relative paths are stored as prefix + path (prefix = the list's directory
  // and a '/'), so the path under the root is a suffix of the stored one.
  const std::string prefix = base.empty() || base.back() == '/' ? base : base + "/";
  const std::string root_name = base.empty() ? "." : base;
  auto where = [&](int line) { return SourceMark{list_path, line, 1}; };

  std::unique_ptr<FileListSource> src(new FileListSource());
  src->allow_outside_root_ = options.allow_outside_root;
  src->root_ = base;
  src->rel_offset_ = prefix.size();
  std::vector<std::string> fields;
  int line_no = 0;
  std::optional<FileListColumns> cols;  // once the header is read
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (!cols) {
      auto header = ParseHeader(line, options, fields, where(line_no));
      if (!header) return std::unexpected(header.error());
      cols = *header;
      continue;
    }
    if (!SplitDelimitedLine(line, cols->delimiter, fields)) {
      return MakeError(ErrorCode::kInvalidSpec, "unterminated quote", {}, where(line_no));
    }
    if (fields.size() < cols->min_fields) {
      return MakeError(ErrorCode::kInvalidSpec,
                       "row has " + std::to_string(fields.size()) + " fields, expected at least " +
                           std::to_string(cols->min_fields),
                       {}, where(line_no));
    }
    const std::string& p = fields[cols->path_col];
    if (p.empty()) return MakeError(ErrorCode::kInvalidSpec, "empty path", {}, where(line_no));
    auto label = ParseLabel(fields[cols->label_col], where(line_no));
    if (!label) return std::unexpected(label.error());
    const fs::path fp(p);
    if (!options.allow_outside_root) {
      SLUICE_RETURN_IF_ERROR(CheckUnderRoot(fp, p, root_name, where(line_no)));
    }
    src->paths_.push_back(fp.is_absolute() ? p : prefix + p);
    src->labels_.push_back(*label);
  }
  if (!cols) {
    return MakeError(ErrorCode::kInvalidArgument, "file list '" + list_path + "' is empty");
  }
  if (src->paths_.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "file list '" + list_path + "' has no rows");
  }
  return src;
}

Result<size_t> FileListSource::Read(size_t i, std::vector<uint8_t>& buffer) const {
  if (allow_outside_root_ || i >= size()) return LocalFileSource::Read(i, buffer);
  std::call_once(root_once_, [this] { root_dir_.emplace(ConfinedDir::Open(root_)); });
  const Result<ConfinedDir>& root = *root_dir_;
  if (!root) return std::unexpected(root.error());
  return root->Read(paths_[i].c_str() + rel_offset_, paths_[i], buffer);
}

Result<std::unique_ptr<Source>> OpenFileListSource(const ParamList& params) {
  SourceOptions options;
  const ParamValue* outside = FindParam(params, "allow_outside_root");
  options.allow_outside_root =
      outside != nullptr && std::holds_alternative<bool>(outside->value) && outside->AsBool();
  options.path_column = SourceParamString(params, "path_column", options.path_column);
  options.label_column = SourceParamString(params, "label_column", options.label_column);
  const std::string delimiter = SourceParamString(params, "delimiter", "auto");
  options.delimiter = delimiter == "tab" ? '\t' : delimiter == "comma" ? ',' : 0;
  auto src = FileListSource::Open(SourceParamString(params, "path", ""), options);
  if (!src) return std::unexpected(src.error());
  return std::unique_ptr<Source>(std::move(*src));
}

}  // namespace sluice::runtime
