// TarShardSource over shards that GNU tar or a user made in unusual ways:
// sparse members, shards changed after `sluice pack` indexed them, Sluice's
// own files beside the shards, one shard named two ways.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/sources/tar/index_store.h"
#include "runtime/sources/tar/shard_index.h"
#include "runtime/sources/tar_shards_source.h"
#include "tests/runtime/sources/source_test_util.h"
#include "tests/runtime/sources/tar/tar_test_util.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime {
namespace {

using testing::Contents;
using testing::TempDir;
namespace fs = std::filesystem;

TarShardOptions Options(const std::string& path) {
  TarShardOptions o;
  o.path = path;
  o.index.quiet = true;
  return o;
}

std::unique_ptr<TarShardSource> MustOpen(const TarShardOptions& o) {
  auto src = TarShardSource::Open(o);
  EXPECT_TRUE(src.has_value()) << (src ? "" : src.error().ToString());
  return src ? std::move(*src) : nullptr;
}

// A sparse image member (GNU tar --sparse, pax and GNU formats) is one bad
// sample with a reason that says what to do; it is never read as the image,
// and the samples around it read as usual.
TEST(TarShardsEdge, SparseImageMemberIsABadSampleNotData) {
  TempDir dir;
  const fs::path src = dir.path() / "src";
  dir.Write("src/a.cls", "1");
  dir.Write("src/a.jpg", "JPEG");
  fs::resize_file(src / "a.jpg", 1 << 20);
  dir.Write("src/b.cls", "2");
  dir.Write("src/b.jpg", "BB");
  struct stat st;
  ASSERT_EQ(::stat((src / "a.jpg").c_str(), &st), 0);
  if (static_cast<uint64_t>(st.st_blocks) * 512 >= (1 << 20)) {
    GTEST_SKIP() << "this file system stores no holes";
  }
  for (const std::string format : {"gnu", "posix"}) {
    SCOPED_TRACE(format);
    const fs::path data = dir.path() / format;
    fs::create_directories(data);
    const std::string cmd = "tar --sparse --format=" + format + " --sort=name -cf '" +
                            (data / "s.tar").string() + "' -C '" + src.string() + "' . 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto source = MustOpen(Options(data.string()));
    ASSERT_NE(source, nullptr);
    ASSERT_EQ(source->size(), 2u);
    std::vector<uint8_t> buf;
    auto bad = source->Read(0, buf);
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.error().code, ErrorCode::kCorruptData);
    EXPECT_NE(bad.error().message.find(
                  ": sparse tar member not supported: re-create the shard without --sparse"),
              std::string::npos)
        << bad.error().message;
    EXPECT_EQ(source->label(0), -1);
    EXPECT_EQ(Contents(*source, 1), "BB");
    EXPECT_EQ(source->label(1), 2);
  }
}

// Writes DIR/index.sluice for `names` as `sluice pack` does (the shards'
// records, names relative to DIR).
void WritePackIndex(const fs::path& dir, const std::vector<std::string>& names) {
  tar::IndexWriter w(tar::FieldMapping{});
  for (const std::string& name : names) {
    const int fd = ::open((dir / name).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    const uint64_t size = fs::file_size(dir / name);
    auto r = tar::BuildShardRecords(fd, size, name, tar::FieldMapping{});
    ::close(fd);
    ASSERT_TRUE(r.has_value());
    ASSERT_TRUE(w.AddShard(name, size, *r).has_value());
  }
  ASSERT_TRUE(w.Write((dir / tar::kPackIndexName).string()).has_value());
}

// A shard rewritten after index.sluice with the same size (a relabelled .cls
// member) is newer than the index: the index is not trusted for it, one
// warning names the shard, and the new labels are read (then from the cached
// index the rescan wrote). A shard no newer than index.sluice uses it.
TEST(TarShardsEdge, AShardNewerThanIndexSluiceIsRescanned) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  fs::create_directories(data);
  const std::string a = (data / "a.tar").string();
  auto off = testing::WriteShard(a, {{"k.jpg", "K"}, {"k.cls", "3"}});
  testing::WriteShard((data / "b.tar").string(), {{"m.jpg", "M"}, {"m.cls", "5"}});
  WritePackIndex(data, {"a.tar", "b.tar"});
  const std::string index = (data / tar::kPackIndexName).string();
  const auto t = fs::last_write_time(index);
  fs::last_write_time(a, t);  // as new as the index: a fresh pack
  auto fresh = MustOpen(Options(data.string()));
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(fresh->index_path(), index);
  EXPECT_EQ(fresh->label(0), 3);

  std::string bytes = testing::ReadFile(a);
  bytes[off[1]] = '4';  // same size
  testing::WriteFile(a, bytes);
  fs::last_write_time(a, t + std::chrono::nanoseconds(1));
  TarShardOptions loud = Options(data.string());
  loud.index.quiet = false;
  ::testing::internal::CaptureStderr();
  auto src = MustOpen(loud);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_NE(src, nullptr);
  EXPECT_TRUE(src->index_built());
  EXPECT_NE(src->index_path(), index);
  EXPECT_EQ(src->label(0), 4);
  EXPECT_EQ(src->label(1), 5);
  EXPECT_NE(err.find("shard '" + a + "' is newer than " + index + ": rescanning"),
            std::string::npos)
      << err;

  ::testing::internal::CaptureStderr();
  auto again = MustOpen(loud);
  err = ::testing::internal::GetCapturedStderr();
  ASSERT_NE(again, nullptr);
  EXPECT_FALSE(again->index_built());
  EXPECT_EQ(again->index_path(), src->index_path());
  EXPECT_EQ(again->label(0), 4);
  EXPECT_NE(err.find("is newer than " + index + ": using " + src->index_path()), std::string::npos)
      << err;
}

// `dir/*` selects the shards, not the index the first open writes beside
// them: every open reads the same samples, none bad, and reuses that index.
TEST(TarShardsEdge, AGlobOverTheShardsDirectoryIgnoresTheIndexesWrittenThere) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  fs::create_directories(data);
  testing::WriteShard((data / "a.tar").string(), {{"k.jpg", "K"}, {"k.cls", "1"}});
  testing::WriteShard((data / "b.tar").string(), {{"m.jpg", "M"}, {"m.cls", "2"}});
  auto first = MustOpen(Options((data / "*").string()));
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(first->index_built());
  for (int run = 0; run < 2; ++run) {
    auto again = MustOpen(Options((data / "*").string()));
    ASSERT_NE(again, nullptr);
    EXPECT_FALSE(again->index_built());
    EXPECT_EQ(again->index_path(), first->index_path());
    EXPECT_EQ(again->num_shards(), 2u);
    ASSERT_EQ(again->size(), 2u);
    EXPECT_EQ(Contents(*again, 1), "M");
  }
}

// One shard spelled two ways is read once (it used to fail the open with
// "shard added twice").
TEST(TarShardsEdge, OneShardSpelledTwoWaysOpensOnce) {
  TempDir dir;
  fs::create_directories(dir.path() / "dup");
  testing::WriteShard((dir.path() / "dup" / "full.tar").string(), {{"k.jpg", "K"}, {"k.cls", "1"}});
  const std::string d = dir.path().string();
  auto src = MustOpen(Options(d + "/{dup/full.tar,./dup/full.tar}"));
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(src->num_shards(), 1u);
  EXPECT_EQ(src->size(), 1u);
  EXPECT_EQ(Contents(*src, 0), "K");
}

}  // namespace
}  // namespace sluice::runtime
