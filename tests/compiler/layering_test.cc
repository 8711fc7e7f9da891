// The compiler's layers depend one way only (issue 14, docs/architecture.md):
//
//   ir <- passes <- cost and plan <- codegen <- driver
//
// Reads the `#include "..."` lines of every source file under compiler/<layer>
// in the source tree (SLUICE_SOURCE_DIR) and fails, naming the file, line and
// include, when a layer includes one above it. The placement pass gets its
// throughput predictions through PassContext::predict instead of including
// compiler/cost (the driver sets it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace sluice {
namespace {

namespace fs = std::filesystem;

struct Include {
  std::string file;  // relative to the source root
  int line = 0;
  std::string path;  // as written between the quotes
};

// The quoted includes of every .h/.cc file under compiler/<layer>.
std::vector<Include> IncludesOf(const std::string& layer, int* files) {
  const fs::path root = SLUICE_SOURCE_DIR;
  const fs::path dir = root / "compiler" / layer;
  std::vector<Include> out;
  *files = 0;
  if (!fs::is_directory(dir)) return out;
  static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
    ++*files;
    std::ifstream in(entry.path());
    std::string text;
    int line = 0;
    while (std::getline(in, text)) {
      ++line;
      std::smatch m;
      if (std::regex_search(text, m, kInclude)) {
        out.push_back({fs::relative(entry.path(), root).string(), line, m[1].str()});
      }
    }
  }
  return out;
}

// Fails for every include in compiler/<layer> of a path under one of
// `forbidden` (e.g. "compiler/cost/").
void ExpectNoIncludes(const std::string& layer, const std::vector<std::string>& forbidden) {
  int files = 0;
  const std::vector<Include> includes = IncludesOf(layer, &files);
  ASSERT_GT(files, 0) << "no sources under compiler/" << layer << " in " << SLUICE_SOURCE_DIR;
  for (const Include& inc : includes) {
    for (const std::string& prefix : forbidden) {
      EXPECT_FALSE(inc.path.starts_with(prefix))
          << inc.file << ":" << inc.line << " includes \"" << inc.path << "\": compiler/" << layer
          << " must not depend on " << prefix;
    }
  }
}

TEST(PassLayering, IrIncludesNoLayerAboveIt) {
  ExpectNoIncludes("ir", {"compiler/passes/", "compiler/cost/", "compiler/plan/",
                          "compiler/codegen/", "compiler/driver/"});
}

TEST(PassLayering, PassesIncludeNoCostCodegenPlanOrDriver) {
  ExpectNoIncludes("passes",
                   {"compiler/cost/", "compiler/codegen/", "compiler/plan/", "compiler/driver/"});
}

TEST(PassLayering, CostIncludesNoCodegenPlanOrDriver) {
  ExpectNoIncludes("cost", {"compiler/codegen/", "compiler/plan/", "compiler/driver/"});
}

TEST(PassLayering, PlanIncludesNoCodegenOrDriver) {
  ExpectNoIncludes("plan", {"compiler/codegen/", "compiler/driver/"});
}

TEST(PassLayering, CodegenIncludesNoDriver) { ExpectNoIncludes("codegen", {"compiler/driver/"}); }

}  // namespace
}  // namespace sluice
