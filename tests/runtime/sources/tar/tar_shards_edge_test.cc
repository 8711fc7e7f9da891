// TarShardSource over shards that GNU tar or a user made in unusual ways:
// sparse members, shards changed after `sluice pack` indexed them, Sluice's
// own files beside the shards, one shard named two ways.
#include <gtest/gtest.h>
#include <sys/stat.h>

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

}  // namespace
}  // namespace sluice::runtime
