// file_list containment: paths stay under the list's directory unless
// allow_outside_root (runtime/sources/file_list_source.h).
#include "runtime/sources/file_list_source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/sources/file_reader.h"
#include "runtime/sources/source_registry.h"
#include "tests/runtime/sources/source_test_util.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime {
namespace {

using testing::Contents;
using testing::TempDir;
namespace fs = std::filesystem;

SourceOptions Outside(bool allow) {
  SourceOptions o;
  o.allow_outside_root = allow;
  return o;
}

// The error of opening a one-row list whose path is `path`.
Error OpenError(const TempDir& dir, const std::string& path) {
  const std::string list = dir.Write("root/list.csv", "path,label\nok.jpg,0\n" + path + ",1\n");
  auto src = FileListSource::Open(list);
  EXPECT_FALSE(src.has_value()) << path;
  return src ? Error{} : src.error();
}

TEST(FileListContainment, AbsoluteAndEscapingPathsRefusedAtOpen) {
  TempDir dir;
  const std::string abs = dir.Write("elsewhere/x.jpg", "X");
  for (const std::string& path : {abs, std::string("../elsewhere/x.jpg"),
                                  std::string("sub/../../elsewhere/x.jpg"), std::string("..")}) {
    const Error e = OpenError(dir, path);
    EXPECT_EQ(e.code, ErrorCode::kInvalidSpec) << path;
    const std::string text = e.ToString();
    EXPECT_NE(text.find("list.csv:3"), std::string::npos) << text;
    EXPECT_NE(text.find("'" + path + "'"), std::string::npos) << text;
    EXPECT_NE(text.find("allow_outside_root: true"), std::string::npos) << text;
  }
  EXPECT_NE(OpenError(dir, abs).message.find("is absolute"), std::string::npos);
  EXPECT_NE(OpenError(dir, "../x.jpg").message.find("climbs out"), std::string::npos);
}

TEST(FileListContainment, DotDotThatStaysInsideIsAccepted) {
  TempDir dir;
  dir.Write("root/b.jpg", "B");
  dir.Write("root/sub/c.jpg", "C");
  const std::string list = dir.Write(
      "root/list.csv", "path,label\nsub/../b.jpg,0\n./sub/c.jpg,1\nsub/./../sub/c.jpg,2\n");
  auto src = FileListSource::Open(list);
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  EXPECT_EQ(Contents(**src, 0), "B");
  EXPECT_EQ(Contents(**src, 1), "C");
  EXPECT_EQ(Contents(**src, 2), "C");
  EXPECT_EQ((*src)->SampleName(0), (dir.path() / "root/sub/../b.jpg").string());
}

// UseRealpathFallbackForTesting(on) for its lifetime, off again after (also
// when an ASSERT returns early).
struct ScopedRealpathFallback {
  explicit ScopedRealpathFallback(bool on) { UseRealpathFallbackForTesting(on); }
  ~ScopedRealpathFallback() { UseRealpathFallbackForTesting(false); }
};

// Symlinks under the root: followed while their target stays under it; one
// leading outside (relative or absolute) fails that sample's read, naming it.
void CheckSymlinks(bool realpath_fallback) {
  ScopedRealpathFallback fallback(realpath_fallback);
  TempDir dir;
  dir.Write("root/sub/in.jpg", "IN");
  dir.Write("outside.jpg", "OUT");
  fs::create_symlink("sub/in.jpg", dir.path() / "root/link_in.jpg");
  fs::create_symlink("sub", dir.path() / "root/dirlink");
  fs::create_symlink("../outside.jpg", dir.path() / "root/link_out.jpg");
  fs::create_symlink(dir.path(), dir.path() / "root/dirlink_out");
  const std::string list = dir.Write(
      "root/list.csv",
      "path,label\nlink_in.jpg,0\ndirlink/in.jpg,1\nlink_out.jpg,2\ndirlink_out/outside.jpg,3\n");

  auto src = FileListSource::Open(list);
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  EXPECT_EQ(Contents(**src, 0), "IN");
  EXPECT_EQ(Contents(**src, 1), "IN");
  for (size_t i : {2u, 3u}) {
    std::vector<uint8_t> buf;
    auto r = (*src)->Read(i, buf);
    ASSERT_FALSE(r.has_value()) << i;
    EXPECT_EQ(r.error().code, ErrorCode::kIo);
    EXPECT_NE(r.error().message.find((*src)->SampleName(i)), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find("resolves outside the file list's root"), std::string::npos)
        << r.error().message;
  }
  // A missing file is still kNotFound, not "outside".
  const std::string gone = dir.Write("root/gone.csv", "path,label\nsub/gone.jpg,0\n");
  auto g = FileListSource::Open(gone);
  ASSERT_TRUE(g.has_value());
  std::vector<uint8_t> buf;
  auto r = (*g)->Read(0, buf);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound) << r.error().message;

  // allow_outside_root: every path and symlink is followed.
  auto open = FileListSource::Open(list, Outside(true));
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(Contents(**open, 2), "OUT");
  EXPECT_EQ(Contents(**open, 3), "OUT");
}

TEST(FileListContainment, SymlinksFollowedOnlyInsideTheRoot) { CheckSymlinks(false); }

TEST(FileListContainment, SymlinksRealpathFallback) { CheckSymlinks(true); }

TEST(FileListContainment, AllowOutsideRootReadsAbsoluteAndParentPaths) {
  TempDir dir;
  const std::string abs = dir.Write("elsewhere/x.jpg", "X");
  dir.Write("up.jpg", "UP");
  const std::string list = dir.Write("root/list.csv", "path,label\n" + abs + ",0\n../up.jpg,1\n");
  ASSERT_FALSE(FileListSource::Open(list).has_value());
  auto src = FileListSource::Open(list, Outside(true));
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  EXPECT_EQ(Contents(**src, 0), "X");
  EXPECT_EQ(Contents(**src, 1), "UP");
  EXPECT_EQ((*src)->SampleName(0), abs);
}

TEST(FileListContainment, RegistryParam) {
  TempDir dir;
  dir.Write("up.jpg", "UP");
  const std::string list = dir.Write("root/list.csv", "path,label\n../up.jpg,1\n");
  ParamList params{{"path", ParamValue{list}}};
  auto refused = OpenSource("file_list", params);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidSpec);
  params["allow_outside_root"] = ParamValue{true};
  auto src = OpenSource("file_list", params);
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  EXPECT_EQ(Contents(**src, 0), "UP");
}

TEST(FileListContainment, FifoIsAnErrorNotAHang) {
  // A named pipe with no writer: the confined open does not wait for one.
  TempDir dir;
  fs::create_directories(dir.path() / "root");
  ASSERT_EQ(::mkfifo((dir.path() / "root/pipe.jpg").c_str(), 0600), 0);
  const std::string list = dir.Write("root/list.csv", "path,label\npipe.jpg,0\n");
  for (bool fallback : {false, true}) {
    std::vector<uint8_t> buf;
    Result<size_t> r = 0;
    {
      ScopedRealpathFallback scoped(fallback);
      auto src = FileListSource::Open(list);
      ASSERT_TRUE(src.has_value());
      r = (*src)->Read(0, buf);
    }
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kIo);
    EXPECT_NE(r.error().message.find("not a regular file"), std::string::npos) << r.error().message;
  }
}

TEST(FileListContainment, ListInTheWorkingDirectory) {
  // A list named without a directory: its root is the working directory.
  TempDir dir;
  dir.Write("a.jpg", "A");
  dir.Write("list.csv", "path,label\na.jpg,0\n");
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  auto src = FileListSource::Open("list.csv");
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  EXPECT_EQ((*src)->SampleName(0), "a.jpg");
  std::vector<uint8_t> buf;
  auto n = (*src)->Read(0, buf);
  fs::current_path(cwd);
  ASSERT_TRUE(n.has_value()) << n.error().ToString();
  EXPECT_EQ(*n, 1u);
}

}  // namespace
}  // namespace sluice::runtime
