#include "compiler/spec/spec_limits.h"

#include <yaml-cpp/yaml.h>

#include "compiler/spec/diagnostics.h"

namespace sluice {
namespace {

SourceMark MarkOf(const YAML::Node& node, const std::string& file) {
  const YAML::Mark m = node.Mark();
  if (m.line < 0 || m.column < 0) return SourceMark{file, 1, 1};
  return SourceMark{file, m.line + 1, m.column + 1};
}

// Depth-first walk counting visits; stops (returning false, with one
// diagnostic) at the first node over a limit.
class TreeWalk {
 public:
  TreeWalk(const std::string& file, Diagnostics& diags) : file_(file), diags_(diags) {}

  bool Visit(const YAML::Node& node, int depth) {
    if (depth > kMaxSpecDepth) {
      diags_.Add(MarkOf(node, file_),
                 "the spec nests deeper than " + std::to_string(kMaxSpecDepth) +
                     " levels of maps and lists",
                 "a spec needs a few levels; check for a runaway structure or an anchor that "
                 "contains its own alias");
      return false;
    }
    if (depth == 1) top_ = MarkOf(node, file_);
    if (++visits_ > kMaxSpecNodes) {
      // At the top-level key or value being walked: inside aliases a node's
      // own mark is its anchor's, far from the use that multiplied it.
      diags_.Add(top_.valid() ? top_ : MarkOf(node, file_),
                 "the spec expands to more than " + std::to_string(kMaxSpecNodes) +
                     " YAML nodes (every alias `*name` repeats its anchor's content; nested "
                     "aliases multiply, as in a YAML \"billion laughs\")",
                 "write the values out, or use fewer levels of aliases");
      return false;
    }
    if (node.IsMap()) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (!Visit(it->first, depth + 1) || !Visit(it->second, depth + 1)) return false;
      }
    } else if (node.IsSequence()) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (!Visit(*it, depth + 1)) return false;
      }
    }
    return true;
  }

 private:
  const std::string& file_;
  Diagnostics& diags_;
  size_t visits_ = 0;
  SourceMark top_;  // the top-level key or value being walked
};

}  // namespace

bool SpecSizeWithinLimits(size_t bytes, const std::string& file, Diagnostics& diags) {
  if (bytes <= kMaxSpecBytes) return true;
  diags.Add(SourceMark{file, 1, 1},
            "the spec is larger than " + std::to_string(kMaxSpecBytes) +
                " bytes (1 MiB), the most a spec may have",
            "a spec describes a pipeline in a few dozen lines; is this the right file?");
  return false;
}

bool SpecTreeWithinLimits(const YAML::Node& root, const std::string& file, Diagnostics& diags) {
  return TreeWalk(file, diags).Visit(root, 0);
}

}  // namespace sluice
