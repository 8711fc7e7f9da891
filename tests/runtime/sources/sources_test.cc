#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/sources/file_list_source.h"
#include "runtime/sources/file_reader.h"
#include "runtime/sources/image_folder_source.h"
#include "runtime/sources/source.h"
#include "tests/runtime/sources/source_test_util.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime {
namespace {

using testing::Contents;
using testing::TempDir;
namespace fs = std::filesystem;

TEST(ImageFolderSource, ClassesSortedFilesSortedExtensionsFiltered) {
  TempDir dir;
  dir.Write("zebra/b.jpg", "z-b");
  dir.Write("zebra/a.JPEG", "z-a");
  dir.Write("ant/2.png", "a-2");
  dir.Write("ant/10.jpg", "a-10");
  dir.Write("ant/notes.txt", "ignored");
  dir.Write("ant/.hidden.jpg", "ignored");
  dir.Write("ant/sub/x.jpg", "a-sub-x");
  dir.Write("mole/c.Jpg", "m-c");
  dir.Write(".cache/q.jpg", "ignored");
  dir.Write("README.jpg", "ignored: not in a class folder");

  auto src = ImageFolderSource::Open(dir.path().string());
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  const LocalFileSource& s = **src;
  EXPECT_EQ(s.class_names(), (std::vector<std::string>{"ant", "mole", "zebra"}));
  ASSERT_EQ(s.size(), 6u);
  std::vector<std::string> got;
  std::vector<int64_t> labels;
  for (size_t i = 0; i < s.size(); ++i) {
    got.push_back(Contents(s, i));
    labels.push_back(s.label(i));
  }
  // Within "ant": files in the class folder itself ("" dir) sort before "sub".
  EXPECT_EQ(got, (std::vector<std::string>{"a-10", "a-2", "a-sub-x", "m-c", "z-a", "z-b"}));
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 0, 0, 1, 2, 2}));
  EXPECT_EQ(fs::path(s.path(3)).filename(), "c.Jpg");
}

TEST(ImageFolderSource, MissingRootAndEmptyRoot) {
  TempDir dir;
  auto missing = ImageFolderSource::Open((dir.path() / "nope").string());
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("nope"), std::string::npos);

  fs::create_directories(dir.path() / "empty_class");
  auto empty = ImageFolderSource::Open(dir.path().string());
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
}

TEST(ImageFolderSource, FileRemovedAfterListingIsNotFound) {
  TempDir dir;
  std::string p = dir.Write("cls/a.jpg", "x");
  auto src = ImageFolderSource::Open(dir.path().string());
  ASSERT_TRUE(src.has_value());
  fs::remove(p);
  std::vector<uint8_t> buf;
  auto r = (*src)->Read(0, buf);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find(p), std::string::npos);
  auto out_of_range = (*src)->Read(1, buf);
  ASSERT_FALSE(out_of_range.has_value());
  EXPECT_EQ(out_of_range.error().code, ErrorCode::kInvalidArgument);
}

TEST(ReadWholeFile, ReusesBufferAndGrowsOnlyWhenNeeded) {
  TempDir dir;
  std::string big = dir.Write("big.bin", std::string(10000, 'b'));
  std::string small = dir.Write("small.bin", std::string("hello"));
  std::string empty = dir.Write("empty.bin", std::string());
  std::vector<uint8_t> buf;
  auto n = ReadWholeFile(big, buf);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(*n, 10000u);
  const uint8_t* data = buf.data();
  n = ReadWholeFile(small, buf);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(*n, 5u);
  EXPECT_EQ(buf.data(), data);  // no reallocation
  EXPECT_EQ(std::string(buf.begin(), buf.begin() + 5), "hello");
  n = ReadWholeFile(empty, buf);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(*n, 0u);
  auto dir_read = ReadWholeFile(dir.path().string(), buf);
  ASSERT_FALSE(dir_read.has_value());
  EXPECT_EQ(dir_read.error().code, ErrorCode::kIo);
}

TEST(FileListSource, CsvRelativePathsQuotesAndExtraColumns) {
  TempDir dir;
  dir.Write("imgs/a.jpg", "A");
  dir.Write("imgs/b, c.jpg", "BC");
  std::string abs = dir.Write("abs/x.jpg", "X");
  std::string list = dir.Write("lists/train.csv",
                               "id,label,path\r\n"
                               "1,3,../imgs/a.jpg\r\n"
                               "\r\n"
                               "2, 7 ,\"../imgs/b, c.jpg\"\r\n"
                               "3,0," +
                                   abs + "\n");
  SourceOptions outside;  // the list reaches up to ../imgs and to an absolute path
  outside.allow_outside_root = true;
  auto src = FileListSource::Open(list, outside);
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  const LocalFileSource& s = **src;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.label(0), 3);
  EXPECT_EQ(s.label(1), 7);
  EXPECT_EQ(s.label(2), 0);
  EXPECT_EQ(Contents(s, 0), "A");
  EXPECT_EQ(Contents(s, 1), "BC");
  EXPECT_EQ(Contents(s, 2), "X");
  EXPECT_EQ(s.path(2), abs);
}

TEST(FileListSource, TsvWithCustomColumnNames) {
  TempDir dir;
  dir.Write("a.jpg", "A");
  std::string list = dir.Write("l.tsv", "file\tclass\na.jpg\t12\n");
  SourceOptions opts;
  opts.path_column = "file";
  opts.label_column = "class";
  auto src = FileListSource::Open(list, opts);
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  ASSERT_EQ((*src)->size(), 1u);
  EXPECT_EQ((*src)->label(0), 12);
  EXPECT_EQ(Contents(**src, 0), "A");
}

TEST(FileListSource, BadRowNamesFileAndLine) {
  TempDir dir;
  std::string list = dir.Write("bad.csv", "path,label\na.jpg,1\nb.jpg,one\n");
  auto src = FileListSource::Open(list);
  ASSERT_FALSE(src.has_value());
  EXPECT_EQ(src.error().code, ErrorCode::kInvalidSpec);
  EXPECT_NE(src.error().ToString().find("bad.csv:3"), std::string::npos) << src.error().ToString();

  std::string short_row = dir.Write("short.csv", "path,label\na.jpg\n");
  auto s2 = FileListSource::Open(short_row);
  ASSERT_FALSE(s2.has_value());
  EXPECT_NE(s2.error().ToString().find("short.csv:2"), std::string::npos);

  std::string quote = dir.Write("quote.csv", "path,label\n\"a.jpg,1\n");
  auto s3 = FileListSource::Open(quote);
  ASSERT_FALSE(s3.has_value());
  EXPECT_NE(s3.error().ToString().find("quote.csv:2"), std::string::npos);

  std::string nocol = dir.Write("nocol.csv", "file,label\na.jpg,1\n");
  auto s4 = FileListSource::Open(nocol);
  ASSERT_FALSE(s4.has_value());
  EXPECT_NE(s4.error().message.find("'path'"), std::string::npos);
  EXPECT_NE(s4.error().ToString().find("nocol.csv:1"), std::string::npos);
}

TEST(FileListSource, MissingListAndMissingSample) {
  TempDir dir;
  auto missing = FileListSource::Open((dir.path() / "none.csv").string());
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);

  std::string list = dir.Write("l.csv", "path,label\ngone.jpg,0\n");
  auto src = FileListSource::Open(list);
  ASSERT_TRUE(src.has_value());
  std::vector<uint8_t> buf;
  auto r = (*src)->Read(0, buf);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("gone.jpg"), std::string::npos);
}

TEST(FileListSource, ParseFromText) {
  const std::string text = "\xEF\xBB\xBFid\tpath\tlabel\n1\ta.jpg\t4\n2\t/abs/b.jpg\t-2\n";
  SourceOptions outside;  // for the absolute path
  outside.allow_outside_root = true;
  auto src = FileListSource::Parse(text, "/lists/train.tsv", outside);
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  ASSERT_EQ((*src)->size(), 2u);
  EXPECT_EQ((*src)->SampleName(0), "/lists/a.jpg");
  EXPECT_EQ((*src)->SampleName(1), "/abs/b.jpg");
  EXPECT_EQ((*src)->label(0), 4);
  EXPECT_EQ((*src)->label(1), -2);

  auto bad = FileListSource::Parse("path,label\na.jpg,x\n", "mem.csv");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidSpec);
  EXPECT_NE(bad.error().ToString().find("mem.csv:2"), std::string::npos) << bad.error().ToString();
  auto empty = FileListSource::Parse("", "mem.csv");
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
}

TEST(SplitDelimitedLine, QuotedFields) {
  std::vector<std::string> f;
  ASSERT_TRUE(SplitDelimitedLine(R"(a,"b ""q"", c",,d)", ',', f));
  EXPECT_EQ(f, (std::vector<std::string>{"a", "b \"q\", c", "", "d"}));
  ASSERT_TRUE(SplitDelimitedLine("x,", ',', f));
  EXPECT_EQ(f, (std::vector<std::string>{"x", ""}));
  EXPECT_FALSE(SplitDelimitedLine("\"open", ',', f));
}


}  // namespace
}  // namespace sluice::runtime
