// tar_shards over URLs (file:// through the ObjectStore path): which shards a
// URL names, where the index comes from (built by streaming each shard once
// and cached; index.sluice beside the shards), the manifest, and reads that
// match the same shards opened as local paths.
#include "runtime/sources/tar/remote_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/sources/tar_shards_source.h"
#include "tests/runtime/remote/counting_store.h"
#include "tests/runtime/sources/source_test_util.h"
#include "tests/runtime/sources/tar/tar_test_util.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime {
namespace {

using remote::testing::CountingStore;
using testing::Contents;
using testing::TempDir;
using testing::WriteShard;
namespace fs = std::filesystem;

void MakeShards(const fs::path& dir, int shards, int per_shard) {
  fs::create_directories(dir);
  for (int k = 0; k < shards; ++k) {
    std::vector<std::pair<std::string, std::string>> members;
    for (int j = 0; j < per_shard; ++j) {
      const std::string key = "s" + std::to_string(k) + "_" + std::to_string(j);
      members.push_back({key + ".jpg", "img-" + std::to_string(k) + "-" + std::to_string(j)});
      members.push_back({key + ".cls", std::to_string((k * per_shard + j) % 5)});
    }
    char name[32];
    std::snprintf(name, sizeof(name), "shard-%06d.tar", k);
    WriteShard((dir / name).string(), members);
  }
}

TarShardOptions Options(const std::string& path, const std::string& cache) {
  TarShardOptions o;
  o.path = path;
  o.index.cache_dir = cache;
  o.index.quiet = true;
  return o;
}

TEST(RemoteTarShards, FileUrlsReadLikeLocalPathsAndCacheTheBuiltIndex) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  const std::string cache = (dir.path() / "cache").string();
  MakeShards(data, 3, 4);
  auto store = std::make_shared<CountingStore>();
  TarShardOptions o = Options("file://" + data.string() + "/shard-{000000..000002}.tar", cache);
  o.store = store;
  auto url = TarShardSource::Open(o);
  ASSERT_TRUE(url.has_value()) << url.error().ToString();
  EXPECT_TRUE((*url)->remote());
  EXPECT_TRUE((*url)->index_built());
  EXPECT_EQ(fs::path((*url)->index_path()).parent_path(), fs::path(cache));
  EXPECT_EQ(store->streams.load(), 3);  // each shard streamed once to index it
  // Nothing was written beside the data.
  for (const auto& e : fs::directory_iterator(data)) {
    EXPECT_TRUE(e.path().extension() == ".tar") << e.path();
  }
  auto local = TarShardSource::Open(Options(data.string(), cache));
  ASSERT_TRUE(local.has_value());
  ASSERT_EQ((*url)->size(), 12u);
  EXPECT_EQ((*url)->ShardStarts(), (*local)->ShardStarts());
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(Contents(**url, i), Contents(**local, i));
    EXPECT_EQ((*url)->label(i), (*local)->label(i));
  }
  EXPECT_EQ((*url)->SampleName(5),
            "file://" + data.string() + "/shard-000001.tar@2048");  // s1_1.jpg's header
  ASSERT_TRUE((*url)->IoStats().has_value());
  EXPECT_FALSE((*local)->IoStats().has_value());

  // Opened again: the cached index, no stream.
  auto again = TarShardSource::Open(o);
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE((*again)->index_built());
  EXPECT_EQ(store->streams.load(), 3);
}

TEST(RemoteTarShards, IndexAndManifestBesideTheShardsAreFetched) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  MakeShards(data, 2, 3);
  // A local open writes its index beside the data; renamed, it is what
  // `sluice pack` leaves there (names relative to the directory).
  auto local = TarShardSource::Open(Options(data.string(), ""));
  ASSERT_TRUE(local.has_value());
  fs::rename((*local)->index_path(), data / "index.sluice");
  testing::WriteFile((data / "manifest.json").string(), R"({"class_names": ["a", "b"]})");
  auto store = std::make_shared<CountingStore>();
  TarShardOptions o = Options("file://" + data.string() + "/", (dir.path() / "c").string());
  o.store = store;
  auto url = TarShardSource::Open(o);
  ASSERT_TRUE(url.has_value()) << url.error().ToString();
  EXPECT_FALSE((*url)->index_built());
  EXPECT_EQ((*url)->index_path(), "file://" + data.string() + "/index.sluice");
  // Only the index and the manifest were streamed (whole, unhedged): no shard
  // had to be scanned.
  std::vector<std::string> streamed = store->Streamed();
  std::sort(streamed.begin(), streamed.end());
  EXPECT_EQ(streamed, (std::vector<std::string>{"file://" + data.string() + "/index.sluice",
                                                "file://" + data.string() + "/manifest.json"}));
  EXPECT_EQ(store->range_reads.load(), 0);
  EXPECT_EQ((*url)->class_names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ((*url)->size(), 6u);
  EXPECT_EQ(Contents(**url, 4), "img-1-1");
}

// Rewrites shard-000001.tar of MakeShards(dir, 2, 3) with the same size but
// another layout (its second image is longer: the index's record of it is
// wrong), and a modification time 10 s later (what an ETag or Last-Modified
// header tells over HTTP).
void ReplaceShardKeepingItsSize(const fs::path& dir) {
  const fs::path shard = dir / "shard-000001.tar";
  const uintmax_t size = fs::file_size(shard);
  const auto mtime = fs::last_write_time(shard);
  std::vector<std::pair<std::string, std::string>> members;
  for (int j = 0; j < 3; ++j) {
    const std::string key = "s1_" + std::to_string(j);
    members.push_back({key + ".jpg", j == 1 ? "replaced-image" : "img-1-" + std::to_string(j)});
    members.push_back({key + ".cls", std::to_string((3 + j) % 5)});
  }
  WriteShard(shard.string(), members);
  ASSERT_EQ(fs::file_size(shard), size);
  fs::last_write_time(shard, mtime + std::chrono::seconds(10));
}

// A shard replaced by one of the same size is not read through the index of
// the old one: the server's validator (ETag, Last-Modified; the modification
// time for file://) is compared with the one seen when the index was first
// used (DIR/index.sluice) or built (the cached index), and a change rescans.
TEST(RemoteTarShards, AShardReplacedWithTheSameSizeIsRescanned) {
  for (const bool pack_index : {true, false}) {
    SCOPED_TRACE(pack_index ? "index.sluice beside the shards" : "the cached index");
    TempDir dir;
    const fs::path data = dir.path() / "data";
    MakeShards(data, 2, 3);
    if (pack_index) {
      auto local = TarShardSource::Open(Options(data.string(), (dir.path() / "l").string()));
      ASSERT_TRUE(local.has_value());
      fs::rename((*local)->index_path(), data / "index.sluice");
    }
    const TarShardOptions o = Options("file://" + data.string() + "/shard-{000000..000001}.tar",
                                      (dir.path() / "c").string());
    auto first = TarShardSource::Open(o);
    ASSERT_TRUE(first.has_value()) << first.error().ToString();
    EXPECT_EQ((*first)->index_built(), !pack_index);
    EXPECT_EQ(Contents(**first, 4), "img-1-1");
    first->reset();
    ReplaceShardKeepingItsSize(data);
    auto second = TarShardSource::Open(o);
    ASSERT_TRUE(second.has_value()) << second.error().ToString();
    EXPECT_TRUE((*second)->index_built());
    EXPECT_EQ(Contents(**second, 4), "replaced-image");
    // Opened again, the index built for the new shard is used as it is.
    auto third = TarShardSource::Open(o);
    ASSERT_TRUE(third.has_value()) << third.error().ToString();
    EXPECT_FALSE((*third)->index_built());
    EXPECT_EQ(Contents(**third, 4), "replaced-image");
  }
}

TEST(RemoteTarShards, GlobsPrefixesAndMissingShards) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  MakeShards(data, 3, 2);
  testing::WriteFile((data / "other.txt").string(), "x");
  remote::LocalStore store;
  const std::string base = "file://" + data.string();
  auto glob = tar::ResolveShardUrls(store, base + "/shard-00000[02].tar");
  ASSERT_TRUE(glob.has_value()) << glob.error().ToString();
  ASSERT_EQ(glob->size(), 2u);
  EXPECT_EQ((*glob)[1].url, base + "/shard-000002.tar");
  testing::WriteFile((data / "index.sluice").string(), "x");  // Sluice's own: never a shard
  testing::WriteFile((data / "manifest.json").string(), "{}");
  auto all = tar::ResolveShardUrls(store, base + "/*");
  ASSERT_TRUE(all.has_value()) << all.error().ToString();
  EXPECT_EQ(all->size(), 4u);                        // the shards and other.txt
  auto prefix = tar::ResolveShardUrls(store, base);  // a directory without its '/'
  ASSERT_TRUE(prefix.has_value()) << prefix.error().ToString();
  EXPECT_EQ(prefix->size(), 3u);
  auto missing = tar::ResolveShardUrls(store, base + "/shard-{000002..000003}.tar");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("shard-000003.tar"), std::string::npos);
  auto nothing = tar::ResolveShardUrls(store, base + "/train-*.tar");
  ASSERT_FALSE(nothing.has_value());
  EXPECT_EQ(nothing.error().code, ErrorCode::kNotFound);
}

TEST(RemoteTarShards, SecretsInUrlsStayOutOfMessages) {
  TempDir dir;
  auto src = TarShardSource::Open(
      Options("http://user:hunter2@127.0.0.1:1/shards/shard-{0..1}.tar?token=hunter2",
              dir.path().string()));
  ASSERT_FALSE(src.has_value());
  EXPECT_EQ(src.error().message.find("hunter2"), std::string::npos) << src.error().message;
  EXPECT_EQ(src.error().hint.find("hunter2"), std::string::npos);
}

}  // namespace
}  // namespace sluice::runtime
