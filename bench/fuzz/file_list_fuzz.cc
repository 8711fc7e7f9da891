// libFuzzer harness: the file_list CSV/TSV parser (FileListSource::Parse).
//
// Input: byte 0 picks the options (bits 0-1: delimiter auto / comma / tab /
// auto; bit 2: custom column names "file" and "class"); the rest is the list's
// text. Any text must parse or fail with an error, never crash; an accepted
// list has one label per path and no empty path. SplitDelimitedLine is also
// run on the text's first line.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sources/file_list_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using sluice::runtime::FileListSource;
  sluice::runtime::SourceOptions options;
  const uint8_t flags = data[0];
  static constexpr char kDelimiters[4] = {0, ',', '\t', 0};
  options.delimiter = kDelimiters[flags & 3];
  if (flags & 4) {
    options.path_column = "file";
    options.label_column = "class";
  }
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<std::string> fields;
  const std::string_view first = text.substr(0, text.find('\n'));
  if (sluice::runtime::SplitDelimitedLine(first, options.delimiter ? options.delimiter : ',',
                                          fields) &&
      fields.empty()) {
    std::abort();  // a line always has at least one field
  }

  auto src = FileListSource::Parse(text, "/fuzz/lists/list.csv", options);
  if (!src) {
    (void)src.error().ToString();
    return 0;
  }
  const auto& s = **src;
  if (s.size() == 0) std::abort();  // an empty list is an error
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.SampleName(i).empty()) std::abort();
    (void)s.label(i);
  }
  return 0;
}
