// The source registry (runtime/sources/source_registry.h): sources are opened
// by the plan's source op name with the op's params; the registry and the op
// registry's source ops agree; image files are samples by extension in any
// case, and a file list keeps every row it names.
#include "runtime/sources/source_registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ops/registry.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime {
namespace {

using testing::TempDir;

ParamList Params(std::initializer_list<std::pair<const char*, std::string>> values) {
  ParamList params;
  for (const auto& [name, value] : values) params[name] = ParamValue{value};
  return params;
}

std::string Contents(const Source& src, size_t i) {
  std::vector<uint8_t> buf;
  auto n = src.Read(i, buf);
  EXPECT_TRUE(n.has_value()) << (n ? "" : n.error().ToString());
  if (!n) return {};
  return std::string(reinterpret_cast<const char*>(buf.data()), *n);
}

TEST(SourceRegistry, EverySourceOpHasASourceAndBack) {
  std::set<std::string> ops, sources;
  for (const OpDef* op : AllOps()) {
    if (op->op_class == OpClass::kSource) ops.insert(op->name);
  }
  for (const SourceEntry& entry : RegisteredSources()) {
    EXPECT_TRUE(sources.insert(std::string(entry.format)).second)
        << "source `" << entry.format << "` is registered twice";
    EXPECT_NE(entry.open, nullptr) << entry.format;
    EXPECT_EQ(FindSource(entry.format), &entry);
  }
  EXPECT_EQ(ops, sources) << "ops/source_ops.cc and runtime/sources/source_registry.cc must "
                             "name the same sources";
  EXPECT_EQ(FindSource("webdataset"), nullptr);
}

TEST(SourceRegistry, UnknownFormatNamesTheKnownOnes) {
  auto src = OpenSource("webdataset", Params({{"path", "/tmp"}}));
  ASSERT_FALSE(src.has_value());
  EXPECT_EQ(src.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(src.error().message.find("webdataset"), std::string::npos);
  EXPECT_NE(src.error().hint.find("image_folder"), std::string::npos) << src.error().hint;
  EXPECT_NE(src.error().hint.find("file_list"), std::string::npos) << src.error().hint;
}

TEST(SourceRegistry, ImageFolderSamplesAreJpegAndPngInAnyCase) {
  TempDir dir;
  dir.Write("cat/a.jpg", "1");
  dir.Write("cat/b.JPG", "2");
  dir.Write("cat/c.jpeg", "3");
  dir.Write("cat/d.JPEG", "4");
  dir.Write("cat/e.png", "5");
  dir.Write("cat/f.PNG", "6");
  dir.Write("cat/g.Png", "7");
  dir.Write("cat/h.Jpg", "8");
  dir.Write("cat/no.gif", "ignored");
  dir.Write("cat/no.png.txt", "ignored");
  dir.Write("cat/no_extension", "ignored");
  dir.Write("cat/nopng", "ignored");
  auto src = OpenSource("image_folder", Params({{"path", dir.path().string()}}));
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  ASSERT_EQ((*src)->size(), 8u);
  std::string got;
  for (size_t i = 0; i < (*src)->size(); ++i) got += Contents(**src, i);
  EXPECT_EQ(got, "12345678");  // sorted by file name
}

TEST(SourceRegistry, ImageFolderMissingRootIsNotFound) {
  TempDir dir;
  auto src = OpenSource("image_folder", Params({{"path", (dir.path() / "nope").string()}}));
  ASSERT_FALSE(src.has_value());
  EXPECT_EQ(src.error().code, ErrorCode::kNotFound);
}

TEST(SourceRegistry, FileListKeepsEveryRowWhateverItsExtension) {
  TempDir dir;
  dir.Write("a.JPG", "A");
  dir.Write("b.Png", "B");
  dir.Write("c.jpeg", "C");
  dir.Write("d.webp", "D");
  std::string list = dir.Write("l.csv", "path,label\na.JPG,0\nb.Png,1\nc.jpeg,2\nd.webp,3\n");
  auto src = OpenSource("file_list", Params({{"path", list}}));
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  ASSERT_EQ((*src)->size(), 4u);
  EXPECT_EQ(Contents(**src, 0) + Contents(**src, 1) + Contents(**src, 2) + Contents(**src, 3),
            "ABCD");
  EXPECT_EQ((*src)->label(3), 3);
}

TEST(SourceRegistry, FileListReadsColumnsAndDelimiterFromParams) {
  TempDir dir;
  dir.Write("a b.jpg", "A");
  // A tab in the header: auto picks the tab; an explicit comma keeps commas.
  std::string tsv = dir.Write("l.tsv", "file\tclass\na b.jpg\t12\n");
  auto src = OpenSource("file_list", Params({{"path", tsv},
                                             {"delimiter", "auto"},
                                             {"path_column", "file"},
                                             {"label_column", "class"}}));
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  ASSERT_EQ((*src)->size(), 1u);
  EXPECT_EQ((*src)->label(0), 12);
  EXPECT_EQ(Contents(**src, 0), "A");

  std::string csv = dir.Write("l.csv", "note\twith tab,path,label\nx,a b.jpg,4\n");
  auto comma = OpenSource("file_list", Params({{"path", csv}, {"delimiter", "comma"}}));
  ASSERT_TRUE(comma.has_value()) << comma.error().ToString();
  EXPECT_EQ((*comma)->label(0), 4);
  // The same file read as a TSV has no `path` column.
  auto tab = OpenSource("file_list", Params({{"path", csv}, {"delimiter", "tab"}}));
  ASSERT_FALSE(tab.has_value());
  EXPECT_EQ(tab.error().code, ErrorCode::kInvalidSpec);
}

}  // namespace
}  // namespace sluice::runtime
