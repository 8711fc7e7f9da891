// The spec front end: YAML text -> validated Spec. This file owns the entry
// points (ParseSpecText, ParseSpecFile), the YAML load and the top-level
// sections; the stages below live in the files named.
//
// Stages, each reporting into the shared Diagnostics and carrying on:
//   1. yaml-cpp parse (a syntax error is one diagnostic and ends the parse);
//   2. top-level keys and their shapes (`sluice`, `name`, `source`, `sampling`,
//      `graph`, `batch`, `output`); `graph` steps in graph_steps.cc;
//   3. generic parameter validation of every section and step against the op
//      registry's ParamDefs (types, ranges, choices, list lengths, required,
//      ${VAR} only in strings), defaults filled, then the op's `check`
//      (param_validator.cc);
//   4. tensor-name resolution over the graph (defaults for `in`/`out`, forward
//      references, duplicates, dangling names, cycles), a topological order and
//      SSA renaming (see spec.h; name_resolution.cc);
//   5. batch fields resolved against the final definition of each name
//      (name_resolution.cc).
// No exception escapes: yaml-cpp exceptions are caught and become diagnostics.
// Reading YAML with marks and the text helpers: yaml_reader.cc.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"
#include "compiler/spec/spec_limits.h"
#include "compiler/spec/spec_parser.h"
#include "ops/registry.h"

namespace sluice {
namespace spec_internal {
namespace {

// The 0-based line `line` of `text` (empty past the end).
std::string LineOf(const std::string& text, int line) {
  size_t start = 0;
  for (int i = 0; i < line && start != std::string::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (start == std::string::npos || start >= text.size()) return "";
  return text.substr(start, text.find('\n', start) - start);
}

// Whether `line` has a `${` after an opening `{` of a flow map: YAML reads
// that `{` (in `path: ${DATA}/x` inside `{...}`) as a nested map and fails.
bool UnquotedVariableInFlowMap(const std::string& line) {
  const size_t var = line.find("${");
  if (var == std::string::npos) return false;
  for (size_t i = 0; i < var; ++i) {
    if (line[i] == '{' && (i == 0 || line[i - 1] != '$')) return true;
  }
  return false;
}

// The 1-based line of the `---` that starts the second document, or 0.
int SecondDocumentLine(const std::string& text) {
  int line = 0, seen = 0;
  bool content = false;  // a document's content came before this marker
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string l = text.substr(pos, end - pos);
    ++line;
    // A marker is `---` / `...` alone or followed by white space.
    const auto marker = [&](const char* m) {
      return l.starts_with(m) && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    };
    if (marker("---") || marker("...")) {
      if (marker("---") && (content || seen > 0)) return line;
      if (marker("---")) ++seen;
    } else if (!l.empty() && l[0] != '#' && l.find_first_not_of(" \t\r") != std::string::npos) {
      content = true;
    }
    pos = end + 1;
  }
  return 0;
}

const std::vector<std::string>& TopLevelKeys() {
  static const std::vector<std::string> keys = {"sluice", "name",  "source", "sampling",
                                                "graph",  "batch", "output"};
  return keys;
}

}  // namespace

Spec SpecParser::Run(const std::string& text) {
  YAML::Node root;
  try {
    // Load silently drops everything after a second `---`, so that marker is
    // looked for first, in the text (a document marker starts a line). Not
    // LoadAll: yaml-cpp 0.7's LoadAll loops forever on some malformed input
    // (found by bench/fuzz spec_parser; bench/fuzz/regressions/spec_parser).
    if (const int line = SecondDocumentLine(text); line > 0) {
      r_.Error(SourceMark{r_.file(), line, 1},
               "the file holds more than one YAML document (a second `---`); a spec is one",
               "remove the `---` and merge the documents, or put each spec in its own file");
      return std::move(spec_);
    }
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    const bool variable =
        UnquotedVariableInFlowMap(LineOf(text, e.mark.line)) ||
        (e.mark.line > 0 && UnquotedVariableInFlowMap(LineOf(text, e.mark.line - 1)));
    r_.Error(r_.MarkAt(e.mark), "invalid YAML: " + e.msg,
             variable ? "quote values that contain ${...} inside `{...}`, e.g. "
                        "`path: \"${DATA}/train\"`"
                      : "check the brackets, colons and indentation on this line and the one "
                        "before");
    return std::move(spec_);
  } catch (const YAML::Exception& e) {
    r_.Error(r_.MarkAt(e.mark), "invalid YAML: " + e.msg);
    return std::move(spec_);
  }
  try {
    if (!SpecTreeWithinLimits(root, r_.file(), r_.diags())) return std::move(spec_);
    Top(root);
  } catch (const YAML::Exception& e) {
    r_.Error(r_.MarkAt(e.mark), "internal error reading the spec: " + e.msg);
  }
  return std::move(spec_);
}

void SpecParser::Top(const YAML::Node& root) {
  const SourceMark start{r_.file(), 1, 1};
  if (!root.IsDefined() || root.IsNull()) {
    r_.Error(start, "the spec is empty", "start with `sluice: 1` and a `name:`");
    return;
  }
  if (!root.IsMap()) {
    r_.Error(r_.MarkOf(root, start), "the spec must be a map of sections, got " + Describe(root),
             "start with `sluice: 1` and a `name:`");
    return;
  }
  const SourceMark root_mark = r_.MarkOf(root, start);
  std::map<std::string, Entry> sections;
  for (Entry& e : MapEntries(r_, root)) {
    if (std::find(TopLevelKeys().begin(), TopLevelKeys().end(), e.key) == TopLevelKeys().end()) {
      std::string near = DidYouMean(e.key, TopLevelKeys());
      r_.Error(e.key_mark, "unknown top-level key " + Tick(e.key),
               near.empty() ? "valid keys: " + TickList(TopLevelKeys())
                            : "did you mean " + Tick(near) + "?");
      continue;
    }
    sections.emplace(e.key, std::move(e));
  }
  auto missing = [&](const std::string& key, const std::string& hint) {
    r_.Error(root_mark, "missing required key " + Tick(key), hint);
  };
  auto find = [&](const std::string& key) -> const Entry* {
    auto it = sections.find(key);
    return it == sections.end() ? nullptr : &it->second;
  };

  if (const Entry* e = find("sluice")) {
    Version(*e);
  } else {
    missing("sluice", "add `sluice: 1` at the top of the file");
  }
  if (const Entry* e = find("name")) {
    if (e->value.IsScalar() && !e->value.Scalar().empty()) {
      spec_.name = e->value.Scalar();
    } else {
      r_.Error(e->value_mark, "`name` must be a string, got " + Describe(e->value),
               "e.g. `name: imagenet_train`");
    }
  } else {
    missing("name", "add a name for the pipeline, e.g. `name: imagenet_train`");
  }
  if (const Entry* e = find("source")) {
    Source(*e);
  } else {
    missing("source", "add e.g. `source: {format: image_folder, path: \"${DATA}/train\"}`");
  }
  {
    const Entry* e = find("sampling");
    Section(e, "sampling", SamplingParams(), CheckSamplingParams, spec_.sampling,
            spec_.sampling_marks);
  }
  const Entry* graph = find("graph");
  if (graph) {
    Graph(*graph);
  } else {
    missing("graph", "add a list of steps, e.g. `graph: [{decode_jpeg: {in: jpg, out: image}}]`");
  }
  if (const Entry* e = find("batch")) {
    Batch(*e);
  } else {
    missing("batch", "add e.g. `batch: {size: 256, fields: {image: image, label: cls}}`");
  }
  {
    const Entry* e = find("output");
    Section(e, "output", OutputParams(), CheckOutputParams, spec_.output, spec_.output_marks);
  }
  Resolve();
}

void SpecParser::Version(const Entry& e) {
  const auto v =
      e.value.IsScalar() && !IsQuoted(e.value) ? ParseIntText(e.value.Scalar()) : std::nullopt;
  if (!v) {
    r_.Error(e.value_mark, "`sluice` must be the spec version number, got " + Describe(e.value),
             "write `sluice: 1`");
    return;
  }
  if (*v != 1) {
    r_.Error(e.value_mark, "unsupported spec version " + Tick(e.value.Scalar()),
             "this compiler reads version 1; write `sluice: 1`");
    return;
  }
  spec_.version = 1;
}

void SpecParser::Section(const Entry* e, const std::string& name, const std::vector<ParamDef>& defs,
                         std::vector<ParamIssue> (*check)(const ParamList&), ParamList& out,
                         std::map<std::string, SourceMark>& marks) {
  if (!e || e->value.IsNull()) {
    out = WithDefaults(defs, {});
    return;
  }
  if (!e->value.IsMap()) {
    r_.Error(e->value_mark, Tick(name) + " must be a map, got " + Describe(e->value));
    out = WithDefaults(defs, {});
    return;
  }
  pv_.Validate(MapEntries(r_, e->value), defs, Scope{name, "key", false}, e->key_mark, {}, out,
               marks, check);
}

void SpecParser::Source(const Entry& e) {
  spec_.source.mark = e.key_mark;
  if (!e.value.IsMap()) {
    r_.Error(e.value_mark, "`source` must be a map, got " + Describe(e.value),
             "e.g. `source: {format: image_folder, path: \"${DATA}/train\"}`");
    return;
  }
  std::vector<Entry> entries = MapEntries(r_, e.value);
  std::vector<std::string> formats;
  for (const OpDef* op : OpsOfClass(OpClass::kSource)) formats.push_back(op->name);
  auto fmt = std::find_if(entries.begin(), entries.end(),
                          [](const Entry& x) { return x.key == "format"; });
  if (fmt == entries.end()) {
    r_.Error(e.key_mark, "missing required key `format` in `source`",
             "name the kind of source: " + TickAlternatives(formats));
    return;
  }
  const SourceMark fmt_mark = fmt->value_mark;
  const std::string name = fmt->value.IsScalar() ? fmt->value.Scalar() : "";
  const OpDef* op = FindOp(name);
  if (!op || op->op_class != OpClass::kSource) {
    if (!fmt->value.IsScalar()) {
      r_.Error(fmt_mark, "`source.format` must be " + TickAlternatives(formats) + ", got " +
                             Describe(fmt->value));
    } else {
      std::string near = DidYouMean(name, formats);
      r_.Error(fmt_mark, "unknown source format " + Tick(name),
               near.empty() ? "valid formats: " + TickList(formats)
                            : "did you mean " + Tick(near) + "?");
    }
    return;
  }
  // The parameters: every entry but `format`, copied (not erased in place:
  // assigning a YAML::Node rebinds the node it refers to, so shifting
  // entries down would overwrite each value with the next one's).
  std::vector<Entry> params;
  for (const Entry& x : entries) {
    if (x.key != "format") params.push_back(x);
  }
  spec_.source.op = op;
  spec_.source.mark = fmt_mark;
  bool ok = pv_.Validate(params, op->params, Scope{"source", "parameter", false}, fmt_mark,
                         {"format"}, spec_.source.params, spec_.source.param_marks, op->check);
  (void)ok;  // source parameters do not affect the graph's names
  for (const std::string& out : op->output_names) {
    spec_.source.outputs.push_back(out);
    spec_.source.output_marks.push_back(fmt_mark);
  }
  source_ok_ = true;
}

void SpecParser::Batch(const Entry& e) {
  batch_mark_ = e.key_mark;
  spec_.batch.mark = e.key_mark;
  const OpDef* op = FindOp("batch");
  if (!op) {
    r_.Error(e.key_mark, "internal error: the op registry has no `batch` op");
    return;
  }
  spec_.batch.op = op;
  if (!e.value.IsMap()) {
    r_.Error(e.value_mark, "`batch` must be a map, got " + Describe(e.value),
             "e.g. `batch: {size: 256, fields: {image: image, label: cls}}`");
    return;
  }
  std::vector<Entry> entries = MapEntries(r_, e.value);
  for (const Entry& x : entries) {
    if (x.key == "fields") fields_entry_ = x;
  }
  batch_ok_ = pv_.Validate(entries, op->params, Scope{"batch", "key", false}, e.key_mark, {},
                           spec_.batch.params, spec_.batch.param_marks, op->check);
}

}  // namespace spec_internal

Spec ParseSpecText(const std::string& text, const std::string& file, Diagnostics& diags) {
  if (!SpecSizeWithinLimits(text.size(), file, diags)) {
    Spec spec;
    spec.file = file;
    return spec;
  }
  try {
    return spec_internal::SpecParser(file, diags).Run(text);
  } catch (const std::exception& e) {
    diags.Add(SourceMark{file, 0, 0}, std::string("internal error reading the spec: ") + e.what());
    Spec spec;
    spec.file = file;
    return spec;
  }
}

std::optional<std::string> ReadSpecFile(const std::string& path, Diagnostics& diags) {
  namespace fs = std::filesystem;
  const SourceMark mark{path, 0, 0};
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!ec && fs::is_directory(st)) {
    diags.Add(mark, spec_internal::Tick(path) + " is a directory, not a spec file",
              "pass the path of a spec file, not a folder");
    return std::nullopt;
  }
  // Pipes and character devices (`<(...)`, /dev/stdin) are read like files,
  // up to the limit; a block device or socket is never a spec.
  if (!ec && (fs::is_block_file(st) || fs::is_socket(st))) {
    diags.Add(mark, spec_internal::Tick(path) + " is not a regular file (a block device or socket)",
              "pass the path of the spec's .yaml file");
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diags.Add(mark, "cannot read " + spec_internal::Tick(path) + ": " + std::strerror(errno),
              "check the path");
    return std::nullopt;
  }
  // At most one byte more than a spec may have (/dev/zero, a FIFO or a file
  // that grows while read must not be read forever); the size check reports it.
  std::string text(kMaxSpecBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (!SpecSizeWithinLimits(text.size(), path, diags)) return std::nullopt;
  return text;
}

Spec ParseSpecFile(const std::string& path, Diagnostics& diags) {
  std::optional<std::string> text = ReadSpecFile(path, diags);
  if (!text) {
    Spec spec;
    spec.file = path;
    return spec;
  }
  return ParseSpecText(*text, path, diags);
}

}  // namespace sluice
