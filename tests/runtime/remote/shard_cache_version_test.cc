// ShardCache entries belong to a shard's version (ObjectInfo::version): a
// shard replaced on its server by one of the same size is downloaded anew,
// and the old version's entry leaves the cache, held or not. Without a
// version only the size tells versions apart (documented).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/remote/shard_cache.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime::remote {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// `size` bytes that differ with `seed`.
std::vector<uint8_t> Bytes(uint8_t seed, size_t size) {
  std::vector<uint8_t> out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return out;
}

// A fetch that streams `bytes` and counts its calls.
ShardCache::Fetch StreamOf(const std::vector<uint8_t>& bytes, std::atomic<int>* calls) {
  return [&bytes, calls](const ObjectStore::Sink& sink) -> Status {
    calls->fetch_add(1);
    return sink(bytes.data(), bytes.size());
  };
}

std::vector<uint8_t> ReadAll(const CachedShard& shard) {
  std::vector<uint8_t> out(shard.size());
  EXPECT_EQ(::pread(shard.fd(), out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  return out;
}

// The entry files (*.shard) in `dir`.
std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".shard") out.push_back(e.path().filename().string());
  }
  return out;
}

TEST(ShardCacheVersionTest, TheEntryNameCarriesTheVersionWhenThereIsOne) {
  const std::string key = "https://h/b/shard-000000.tar";
  EXPECT_EQ(ShardCache::EntryName(key), ShardCache::EntryName(key, ""));
  EXPECT_NE(ShardCache::EntryName(key, "\"e1\""), ShardCache::EntryName(key));
  EXPECT_NE(ShardCache::EntryName(key, "\"e1\""), ShardCache::EntryName(key, "\"e2\""));
  // Same key hash first (one download lock for every version), no version text.
  EXPECT_EQ(ShardCache::EntryName(key, "\"e1\"").substr(0, 32),
            ShardCache::EntryName(key).substr(0, 32));
  EXPECT_EQ(ShardCache::EntryName(key, "\"e1\"").find("e1"), std::string::npos);
  // A rotated signature still names the same entry of the same version.
  EXPECT_EQ(ShardCache::EntryName(key + "?X-Amz-Signature=1", "\"e1\""),
            ShardCache::EntryName(key + "?X-Amz-Signature=2", "\"e1\""));
}

// The shard at one URL is replaced by one of the same size: the new version
// is a miss whose bytes are served, and the cache keeps one entry within
// max_bytes (the old one removed, not evicted: the budget has room for only
// one of them).
TEST(ShardCacheVersionTest, ASameSizeShardOfANewVersionIsDownloadedAndReplacesTheOldEntry) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1500);
  ASSERT_TRUE(cache) << cache.error().message;
  const std::string key = "s3://b/shard-000000.tar";
  const auto v1 = Bytes(1, 1000), v2 = Bytes(2, 1000);
  std::atomic<int> calls{0};
  {
    auto held = (*cache)->Acquire(key, 1000, "", StreamOf(v1, &calls), "\"etag-1\"");
    ASSERT_TRUE(held) << held.error().message;
    EXPECT_TRUE(held->kept());
    EXPECT_EQ(ReadAll(*held), v1);
  }
  {  // the same version is a hit (cached bytes are trusted)
    auto held = (*cache)->Acquire(key, 1000, "", StreamOf(v2, &calls), "\"etag-1\"");
    ASSERT_TRUE(held) << held.error().message;
    EXPECT_EQ(ReadAll(*held), v1);
    EXPECT_EQ(calls.load(), 1);
  }
  auto held = (*cache)->Acquire(key, 1000, "", StreamOf(v2, &calls), "\"etag-2\"");
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_TRUE(held->kept());
  EXPECT_EQ(ReadAll(*held), v2);
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(Entries(tmp.path()),
            std::vector<std::string>{ShardCache::EntryName(key, "\"etag-2\"")});
  EXPECT_EQ(*(*cache)->UsedBytes(), 1000u);
  const ShardCacheStats s = (*cache)->stats();
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.stale_removed, 1u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.passthrough, 0u);
}

// An old version still held (a loader reading the shard it indexed) keeps
// its bytes through its descriptor; its entry leaves the directory anyway.
TEST(ShardCacheVersionTest, AHeldOldVersionReadsOnWhileItsEntryIsRemoved) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20);
  ASSERT_TRUE(cache) << cache.error().message;
  const std::string key = "https://h/shard.tar";
  const auto v1 = Bytes(1, 1000), v2 = Bytes(2, 1000);
  std::atomic<int> calls{0};
  auto old = (*cache)->Acquire(key, 1000, "", StreamOf(v1, &calls), "Last-Modified: Mon");
  ASSERT_TRUE(old) << old.error().message;
  auto now = (*cache)->Acquire(key, 1000, "", StreamOf(v2, &calls), "Last-Modified: Tue");
  ASSERT_TRUE(now) << now.error().message;
  EXPECT_TRUE(now->kept());
  EXPECT_EQ(ReadAll(*now), v2);
  EXPECT_EQ(ReadAll(*old), v1);
  EXPECT_EQ(Entries(tmp.path()),
            std::vector<std::string>{ShardCache::EntryName(key, "Last-Modified: Tue")});
  EXPECT_EQ(*(*cache)->UsedBytes(), 1000u);
  // A lookup of the old version no longer finds it: a miss.
  *old = CachedShard();
  auto again = (*cache)->Acquire(key, 1000, "", StreamOf(v1, &calls), "Last-Modified: Mon");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(Entries(tmp.path()).size(), 1u);
}

// An entry cached without a version (a server that sends neither ETag nor
// Last-Modified) is another version to a lookup with one, and the reverse.
TEST(ShardCacheVersionTest, AVersionAppearingOrGoingReplacesTheEntry) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20);
  ASSERT_TRUE(cache) << cache.error().message;
  const auto v1 = Bytes(1, 100), v2 = Bytes(2, 100), v3 = Bytes(3, 100);
  std::atomic<int> calls{0};
  ASSERT_TRUE((*cache)->Acquire("k", 100, "", StreamOf(v1, &calls)));
  auto with = (*cache)->Acquire("k", 100, "", StreamOf(v2, &calls), "\"e\"");
  ASSERT_TRUE(with);
  EXPECT_EQ(ReadAll(*with), v2);
  EXPECT_EQ(Entries(tmp.path()), std::vector<std::string>{ShardCache::EntryName("k", "\"e\"")});
  auto without = (*cache)->Acquire("k", 100, "", StreamOf(v3, &calls));
  ASSERT_TRUE(without);
  EXPECT_EQ(ReadAll(*without), v3);
  EXPECT_EQ(Entries(tmp.path()), std::vector<std::string>{ShardCache::EntryName("k")});
  EXPECT_EQ(calls.load(), 3);
}

// Without versions only the size tells shards apart: one replaced by one of
// the same size is served from the cache (docs/remote.md, "Trust").
TEST(ShardCacheVersionTest, WithoutAVersionASameSizeReplacementIsAHit) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20);
  ASSERT_TRUE(cache) << cache.error().message;
  const auto v1 = Bytes(1, 100), v2 = Bytes(2, 100);
  std::atomic<int> calls{0};
  ASSERT_TRUE((*cache)->Acquire("k", 100, "", StreamOf(v1, &calls)));
  auto held = (*cache)->Acquire("k", 100, "", StreamOf(v2, &calls));
  ASSERT_TRUE(held);
  EXPECT_EQ(ReadAll(*held), v1);
  EXPECT_EQ(calls.load(), 1);
}

// Another key's entries are not another version of this one.
TEST(ShardCacheVersionTest, ANewVersionLeavesOtherKeysAlone) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20);
  ASSERT_TRUE(cache) << cache.error().message;
  const auto v1 = Bytes(1, 100), v2 = Bytes(2, 100);
  std::atomic<int> calls{0};
  ASSERT_TRUE((*cache)->Acquire("a", 100, "", StreamOf(v1, &calls), "\"1\""));
  ASSERT_TRUE((*cache)->Acquire("b", 100, "", StreamOf(v1, &calls)));
  ASSERT_TRUE((*cache)->Acquire("c", 100, "", StreamOf(v2, &calls), "\"2\""));
  EXPECT_EQ(Entries(tmp.path()).size(), 3u);
  EXPECT_EQ((*cache)->stats().stale_removed, 0u);
}

}  // namespace
}  // namespace sluice::runtime::remote
