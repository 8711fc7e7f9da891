#include "runtime/remote/shard_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime::remote {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// The bytes of shard `key`: a pattern that differs per key and per offset.
std::vector<uint8_t> ShardBytes(const std::string& key, size_t size) {
  std::vector<uint8_t> out(size);
  uint32_t h = 2166136261u;
  for (char c : key) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>((h >> (i % 24)) + i * 7);
  return out;
}

std::string Sha256Hex(const std::vector<uint8_t>& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned i = 0; i < length; ++i) {
    static constexpr char kHex[] = "0123456789abcdef";
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

// A fetch that streams `bytes` in chunks of 7 and counts its calls.
ShardCache::Fetch StreamOf(const std::vector<uint8_t>& bytes, std::atomic<int>* calls) {
  return [&bytes, calls](const ObjectStore::Sink& sink) -> Status {
    if (calls) calls->fetch_add(1);
    for (size_t at = 0; at < bytes.size(); at += 7) {
      if (auto st = sink(bytes.data() + at, std::min<size_t>(7, bytes.size() - at)); !st) return st;
    }
    return {};
  };
}

// Acquires `key`, whose content is `bytes` (size and SHA-256 checked), fetched
// by StreamOf(bytes, calls) on a miss.
Result<CachedShard> AcquireBytes(ShardCache& cache, const std::string& key,
                                 const std::vector<uint8_t>& bytes, std::atomic<int>* calls) {
  return cache.Acquire(key, bytes.size(), Sha256Hex(bytes), StreamOf(bytes, calls));
}

std::vector<uint8_t> ReadAll(const CachedShard& shard) {
  std::vector<uint8_t> out(shard.size());
  EXPECT_EQ(::pread(shard.fd(), out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  return out;
}

// Names in the cache directory that are neither entries nor lock files.
std::vector<std::string> OddFiles(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".shard") && !name.ends_with(".lock")) out.push_back(name);
  }
  return out;
}

void SetMtime(const std::string& path, int64_t seconds) {
  struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(ShardCacheTest, MissDownloadsOnceThenHits) {
  TempDir tmp;
  auto cache = ShardCache::Open((tmp.path() / "c").string(), 1 << 20);
  ASSERT_TRUE(cache) << cache.error().message;
  const auto bytes = ShardBytes("s3://b/shard-000000.tar", 1000);
  std::atomic<int> calls{0};
  for (int round = 0; round < 3; ++round) {
    auto held = AcquireBytes(**cache, "s3://b/shard-000000.tar", bytes, &calls);
    ASSERT_TRUE(held) << held.error().message;
    EXPECT_TRUE(held->kept());
    EXPECT_EQ(ReadAll(*held), bytes);
    EXPECT_EQ(fs::path(held->path()).filename().string(),
              ShardCache::EntryName("s3://b/shard-000000.tar"));
  }
  EXPECT_EQ(calls.load(), 1);
  const ShardCacheStats s = (*cache)->stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.bytes_written, 1000u);
  EXPECT_TRUE(OddFiles(tmp.path() / "c").empty());
}

// A presigned, SAS or token URL gets a new signature every job: the entry is
// keyed by the URL without its authentication, so the next job hits it.
TEST(ShardCacheTest, ARotatedSignatureHitsTheSameEntry) {
  TempDir tmp;
  auto cache = ShardCache::Open((tmp.path() / "c").string(), 1 << 20);
  ASSERT_TRUE(cache) << cache.error().message;
  const auto bytes = ShardBytes("https://h/d/shard-0.tar", 800);
  std::atomic<int> calls{0};
  for (const std::string query :
       {"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F1&X-Amz-Date=1&x-amz-signature=a",
        "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F2&X-Amz-Date=2&X-Amz-Signature=b",
        "?sv=2022&se=2099&sr=b&sp=r&sig=c", "?token=d", "?Expires=9&Signature=e&Key-Pair-Id=K",
        "?GoogleAccessId=g&Expires=1&Signature=f", "?X-Goog-Signature=g&X-Goog-Date=1", ""}) {
    auto held = AcquireBytes(**cache, "https://h/d/shard-0.tar" + query, bytes, &calls);
    ASSERT_TRUE(held) << held.error().message;
    EXPECT_TRUE(held->kept());
    EXPECT_EQ(ReadAll(*held), bytes);
  }
  EXPECT_EQ(calls.load(), 1);
  // Parameters that select the content keep their own entries.
  for (const std::string query : {"?versionId=v1", "?versionId=v2&X-Amz-Signature=z",
                                  "?generation=7", "?generation=7&token=t"}) {
    auto held = AcquireBytes(**cache, "https://h/d/shard-0.tar" + query, bytes, &calls);
    ASSERT_TRUE(held) << held.error().message;
  }
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ((*cache)->stats().hits, 8u);
  // No file name holds the query.
  for (const auto& e : fs::directory_iterator(tmp.path() / "c")) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find("sig"), std::string::npos) << name;
    EXPECT_EQ(name.find("version"), std::string::npos) << name;
  }
}

TEST(ShardCacheTest, TheKeyDropsOnlyAuthenticationParameters) {
  EXPECT_EQ(ShardCache::KeyOf("https://h/d/s.tar?sv=1&sig=S&se=2&versionId=3"),
            "https://h/d/s.tar?versionId=3");
  EXPECT_EQ(ShardCache::KeyOf("https://h/d/s.tar?X-AMZ-Security-Token=t&partNumber=1"),
            "https://h/d/s.tar?partNumber=1");
  EXPECT_EQ(ShardCache::KeyOf("http://user:pw@h/s.tar?Policy=p&AWSAccessKeyId=a"),
            "http://h/s.tar");
  EXPECT_EQ(ShardCache::KeyOf("https://h/s.tar?skoid=1&sktid=2&skt=3&ske=4&sks=5&skv=6&sdd=7&"
                              "ss=b&srt=o&spr=https&st=1&generation=9"),
            "https://h/s.tar?generation=9");
  // Not http(s): no query ('?' is part of the key's name).
  EXPECT_EQ(ShardCache::KeyOf("s3://b/p?sig=1/s.tar"), "s3://b/p?sig=1/s.tar");
  EXPECT_EQ(ShardCache::KeyOf("https://h/s.tar"), "https://h/s.tar");
}

TEST(ShardCacheTest, ChecksumOrSizeMismatchKeepsNothing) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20);
  ASSERT_TRUE(cache);
  const auto bytes = ShardBytes("k", 500);
  auto wrong_sha = (*cache)->Acquire("http://h/k.tar", bytes.size(), std::string(64, '0'),
                                     StreamOf(bytes, nullptr));
  ASSERT_FALSE(wrong_sha);
  EXPECT_EQ(wrong_sha.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(wrong_sha.error().message.find("http://h/k.tar"), std::string::npos);
  EXPECT_NE(wrong_sha.error().message.find("SHA-256"), std::string::npos);

  auto short_body =
      (*cache)->Acquire("http://h/k.tar", bytes.size() + 10, "", StreamOf(bytes, nullptr));
  ASSERT_FALSE(short_body);
  EXPECT_EQ(short_body.error().code, ErrorCode::kCorruptData);
  auto long_body =
      (*cache)->Acquire("http://h/k.tar", bytes.size() - 10, "", StreamOf(bytes, nullptr));
  ASSERT_FALSE(long_body);
  EXPECT_EQ(long_body.error().code, ErrorCode::kCorruptData);
  EXPECT_EQ((*cache)->stats().checksum_failures, 3u);

  auto failing =
      (*cache)->Acquire("http://h/k.tar", bytes.size(), "", [](const ObjectStore::Sink&) -> Status {
        return MakeError(ErrorCode::kIo, "HTTP 503 after 5 retries");
      });
  ASSERT_FALSE(failing);
  EXPECT_EQ(failing.error().code, ErrorCode::kIo);
  EXPECT_TRUE(OddFiles(tmp.path()).empty());
  EXPECT_FALSE(fs::exists(tmp.path() / ShardCache::EntryName("http://h/k.tar")));
  EXPECT_EQ(*(*cache)->UsedBytes(), 0u);
}

TEST(ShardCacheTest, EvictsLeastRecentlyUsedWithinMaxBytes) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 300);
  ASSERT_TRUE(cache);
  std::vector<std::vector<uint8_t>> bytes;
  const std::vector<std::string> keys = {"a", "b", "c", "d"};
  for (const auto& k : keys) bytes.push_back(ShardBytes(k, 100));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*cache)->Acquire(keys[i], 100, "", StreamOf(bytes[i], nullptr)));
  }
  // Recency: a oldest, then b, then c; then a hit makes a the newest.
  for (int i = 0; i < 3; ++i) {
    SetMtime((tmp.path() / ShardCache::EntryName(keys[i])).string(), 1000000 + i);
  }
  ASSERT_TRUE((*cache)->Acquire("a", 100, "", StreamOf(bytes[0], nullptr)));
  auto d = (*cache)->Acquire("d", 100, "", StreamOf(bytes[3], nullptr));
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->kept());
  EXPECT_TRUE(fs::exists(tmp.path() / ShardCache::EntryName("a")));
  EXPECT_FALSE(fs::exists(tmp.path() / ShardCache::EntryName("b")));
  EXPECT_TRUE(fs::exists(tmp.path() / ShardCache::EntryName("c")));
  EXPECT_EQ((*cache)->stats().evictions, 1u);
  EXPECT_LE(*(*cache)->UsedBytes(), 300u);
}

TEST(ShardCacheTest, HeldEntriesAreNeverEvicted) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 200);
  ASSERT_TRUE(cache);
  const auto a = ShardBytes("a", 100), b = ShardBytes("b", 100), c = ShardBytes("c", 100);
  auto held_a = (*cache)->Acquire("a", 100, "", StreamOf(a, nullptr));
  auto held_b = (*cache)->Acquire("b", 100, "", StreamOf(b, nullptr));
  ASSERT_TRUE(held_a && held_b);
  // No room without evicting a held entry: c passes through, readable, not kept.
  auto held_c = (*cache)->Acquire("c", 100, "", StreamOf(c, nullptr));
  ASSERT_TRUE(held_c) << held_c.error().message;
  EXPECT_FALSE(held_c->kept());
  EXPECT_EQ(ReadAll(*held_c), c);
  EXPECT_EQ(ReadAll(*held_a), a);
  EXPECT_EQ((*cache)->stats().passthrough, 1u);
  EXPECT_EQ((*cache)->stats().evictions, 0u);
  EXPECT_EQ(*(*cache)->UsedBytes(), 200u);
  // Released, b can go: c is kept now.
  *held_b = CachedShard();
  auto kept_c = (*cache)->Acquire("c", 100, "", StreamOf(c, nullptr));
  ASSERT_TRUE(kept_c);
  EXPECT_TRUE(kept_c->kept());
  EXPECT_EQ(ReadAll(*held_a), a);
  EXPECT_TRUE(fs::exists(tmp.path() / ShardCache::EntryName("a")));
  EXPECT_LE(*(*cache)->UsedBytes(), 200u);
}

TEST(ShardCacheTest, ShardLargerThanTheCachePassesThrough) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 50);
  ASSERT_TRUE(cache);
  const auto big = ShardBytes("big", 80);
  auto held = (*cache)->Acquire("big", 80, Sha256Hex(big), StreamOf(big, nullptr));
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_FALSE(held->kept());
  EXPECT_TRUE(held->path().empty());
  EXPECT_EQ(ReadAll(*held), big);
  EXPECT_EQ(*(*cache)->UsedBytes(), 0u);
}

// A child process that holds LOCK_EX on `path` (as a downloader holds its
// partial file) until destroyed.
class LockingChild {
 public:
  explicit LockingChild(const std::string& path) {
    int ready[2], release[2];
    EXPECT_EQ(::pipe(ready), 0);
    EXPECT_EQ(::pipe(release), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(release[1]);  // so that the read below ends when the parent closes its end
      const int fd = ::open(path.c_str(), O_RDWR);
      const char ok = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? '1' : '0';
      (void)!::write(ready[1], &ok, 1);
      char byte;
      (void)!::read(release[0], &byte, 1);  // until the parent closes it
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    release_ = release[1];
    char ok = '0';
    EXPECT_EQ(::read(ready[0], &ok, 1), 1);
    EXPECT_EQ(ok, '1') << "the child could not lock " << path;
    ::close(ready[0]);
  }
  ~LockingChild() {
    ::close(release_);
    ::waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
};

// Whether a partial file is abandoned is judged by its lock, not by the PID in
// its name: a loader in another PID namespace (a container sharing the
// directory) may carry any PID, dead or reused here.
TEST(ShardCacheTest, OpenRemovesOnlyPartialFilesNoProcessHolds) {
  TempDir tmp;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string dead = ".partial-" + std::to_string(child) + "-0";
  const std::string unlocked = ".partial-" + std::to_string(::getpid()) + "-98";
  const std::string live = ".partial-" + std::to_string(child) + "-99";
  tmp.Write(dead, std::string(64, 'x'));
  tmp.Write(unlocked, std::string(32, 'z'));
  const std::string live_path = tmp.Write(live, std::string(10, 'y'));
  LockingChild downloader(live_path);  // its PID in the name is of no process here
  auto cache = ShardCache::Open(tmp.path().string(), 1000);
  ASSERT_TRUE(cache);
  EXPECT_FALSE(fs::exists(tmp.path() / dead));
  EXPECT_FALSE(fs::exists(tmp.path() / unlocked));  // a live PID does not keep it
  // A download in progress stays, and counts against the budget.
  EXPECT_TRUE(fs::exists(live_path));
  EXPECT_EQ(*(*cache)->UsedBytes(), 10u);
  // Eviction's scan spares it too, while the process holds it.
  const auto bytes = ShardBytes("k", 100);
  ASSERT_TRUE(AcquireBytes(**cache, "k", bytes, nullptr));
  EXPECT_TRUE(fs::exists(live_path));
}

// Opens the cache at `dir` in a child process (which cleans abandoned partial
// files) and returns 0 when one partial file is still there after it.
int RunInChildrenForScan(const std::string& dir) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!ShardCache::Open(dir, 1 << 20)) ::_exit(2);
    int partials = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      partials += e.path().filename().string().starts_with(".partial-");
    }
    ::_exit(partials == 1 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

// The cache's own downloads hold their partial file locked: another cache
// scanning the directory mid-download leaves it alone.
TEST(ShardCacheTest, AnotherCacheScanningMidDownloadLeavesThePartialFile) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20);
  ASSERT_TRUE(cache);
  const auto bytes = ShardBytes("s3://b/slow.tar", 1000);
  bool scanned = false;
  auto held = (*cache)->Acquire("s3://b/slow.tar", bytes.size(), Sha256Hex(bytes),
                                [&](const ObjectStore::Sink& sink) -> Status {
                                  if (auto st = sink(bytes.data(), 500); !st) return st;
                                  // A second loader opens the directory (in a child: its own
                                  // locks).
                                  const int ok = RunInChildrenForScan(tmp.path().string());
                                  scanned = ok == 0;
                                  return sink(bytes.data() + 500, 500);
                                });
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_TRUE(scanned);
  EXPECT_TRUE(held->kept());
  EXPECT_EQ(ReadAll(*held), bytes);
}

// A disk that refuses the space (full, over quota, over the file size limit)
// reads the shard without the cache (in memory when the directory cannot hold
// even a pass-through file), counted; the cache is used again once it can be.
TEST(ShardCacheTest, ADiskWithoutSpaceReadsTheShardPastTheCache) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20);
  ASSERT_TRUE(cache);
  for (int err : {ENOSPC, EDQUOT, EFBIG}) {
    ShardCache::FailReservationsForTest(err);
    const std::string key = "s3://b/full-" + std::to_string(err) + ".tar";
    const auto bytes = ShardBytes(key, 5000);
    auto held = AcquireBytes(**cache, key, bytes, nullptr);
    ShardCache::FailReservationsForTest(0);
    ASSERT_TRUE(held) << held.error().message;
    EXPECT_FALSE(held->kept());
    EXPECT_EQ(ReadAll(*held), bytes);
  }
  EXPECT_EQ((*cache)->stats().no_space, 3u);
  EXPECT_EQ((*cache)->stats().passthrough, 3u);
  EXPECT_TRUE(OddFiles(tmp.path()).empty());  // no partial file left behind
  EXPECT_EQ(*(*cache)->UsedBytes(), 0u);
  const auto bytes = ShardBytes("s3://b/later.tar", 5000);
  auto held = AcquireBytes(**cache, "s3://b/later.tar", bytes, nullptr);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_TRUE(held->kept());
}

// A disk that takes the reservation but then refuses a write (copy-on-write
// file systems such as btrfs, overlays, thin volumes) reads the shard past
// the cache too: the bytes already written move to memory, the partial file
// is dropped, and the shard is served, counted and warned about once.
TEST(ShardCacheTest, AWriteRefusedAfterTheReservationReadsTheShardPastTheCache) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20);
  ASSERT_TRUE(cache);
  for (int err : {ENOSPC, EDQUOT}) {
    ShardCache::FailDiskWritesForTest(err, 3000);  // part-way through the shard
    const std::string key = "s3://b/cow-" + std::to_string(err) + ".tar";
    const auto bytes = ShardBytes(key, 5000);
    std::atomic<int> calls{0};
    auto held = AcquireBytes(**cache, key, bytes, &calls);
    ShardCache::FailDiskWritesForTest(0);
    ASSERT_TRUE(held) << held.error().message;
    EXPECT_FALSE(held->kept());
    EXPECT_EQ(held->path(), "");
    EXPECT_EQ(ReadAll(*held), bytes);
    EXPECT_EQ(calls.load(), 1);  // one download, not restarted
  }
  // A pass-through file on the disk (the shard is larger than max_bytes)
  // refused the same way moves to memory as well.
  TempDir other;
  auto small = ShardCache::Open(other.path().string(), 1000);
  ASSERT_TRUE(small);
  ShardCache::FailDiskWritesForTest(ENOSPC, 0);
  const auto big = ShardBytes("s3://b/big.tar", 4000);
  auto held = AcquireBytes(**small, "s3://b/big.tar", big, nullptr);
  ShardCache::FailDiskWritesForTest(0);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_FALSE(held->kept());
  EXPECT_EQ(ReadAll(*held), big);
  EXPECT_EQ((*small)->stats().passthrough, 1u);
  EXPECT_EQ((*small)->stats().no_space, 0u);  // passed through for its size, not the disk
  EXPECT_TRUE(OddFiles(other.path()).empty());

  const ShardCacheStats s = (*cache)->stats();
  EXPECT_EQ(s.no_space, 2u);
  EXPECT_EQ(s.passthrough, 2u);
  EXPECT_EQ(s.bytes_written, 10000u);
  EXPECT_TRUE(OddFiles(tmp.path()).empty());  // no partial file left behind
  EXPECT_EQ(*(*cache)->UsedBytes(), 0u);
  // The cache is used again once the disk takes writes.
  const auto later = ShardBytes("s3://b/later.tar", 5000);
  auto kept = AcquireBytes(**cache, "s3://b/later.tar", later, nullptr);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_TRUE(kept->kept());
}

// The real limit, not the hook: a process over RLIMIT_FSIZE gets EFBIG from
// the reservation before a byte is downloaded, and the shard is not failed.
TEST(ShardCacheTest, AFileSizeLimitBelowTheShardIsRefusedBeforeTheDownload) {
  TempDir tmp;
  const std::string dir = tmp.path().string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    auto cache = ShardCache::Open(dir, 1 << 20);
    const struct rlimit limit = {4096, 4096};
    if (!cache || ::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(2);
    const auto bytes = ShardBytes("k", 3000);
    std::atomic<int> calls{0};
    // Within the limit: cached. Past it: refused at reservation, never
    // half-written; the pass-through file (also over the limit) is refused
    // too, so this one fails, but as kIo naming the limit's error, no hang.
    auto small = AcquireBytes(**cache, "small", bytes, &calls);
    if (!small || !small->kept()) ::_exit(3);
    auto big = (*cache)->Acquire("big", 8000, "", [](const ObjectStore::Sink&) -> Status {
      return MakeError(ErrorCode::kIo, "not fetched");
    });
    const bool refused_first = (*cache)->stats().no_space >= 1;
    ::_exit(refused_first && !big ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(OddFiles(dir).empty());
}

// A cache directory that cannot be written is no error: the shards already
// there are read, the others pass through.
TEST(ShardCacheTest, AReadOnlyDirectoryServesItsEntriesAndPassesTheRestThrough) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "ro").string();
  const auto cached = ShardBytes("s3://b/cached.tar", 2000);
  {
    auto cache = ShardCache::Open(dir, 1 << 20);
    ASSERT_TRUE(cache);
    ASSERT_TRUE(AcquireBytes(**cache, "s3://b/cached.tar", cached, nullptr));
  }
  ::chmod(tmp.path().c_str(), 0755);
  ::chmod(dir.c_str(), 0555);
  const pid_t pid = ::fork();
  if (pid == 0) {  // not root (root writes anyway): nobody
    if (::geteuid() == 0 && ::setuid(65534) != 0) ::_exit(77);
    auto cache = ShardCache::Open(dir, 1 << 20);
    if (!cache) ::_exit(2);
    std::atomic<int> calls{0};
    auto hit = AcquireBytes(**cache, "s3://b/cached.tar", cached, &calls);
    if (!hit || !hit->kept() || ReadAll(*hit) != cached || calls != 0) ::_exit(3);
    const auto other = ShardBytes("s3://b/other.tar", 2000);
    auto miss = AcquireBytes(**cache, "s3://b/other.tar", other, &calls);
    if (!miss || miss->kept() || ReadAll(*miss) != other || calls != 1) ::_exit(4);
    auto used = (*cache)->UsedBytes();
    ::_exit(used && *used == 2000 ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::chmod(dir.c_str(), 0755);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot drop root";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(OddFiles(dir), std::vector<std::string>{});
}

// Holds an exclusive flock on `path` through its own open file description,
// as another process's download would (flock conflicts across descriptions).
class HeldLock {
 public:
  explicit HeldLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT, 0644)) {
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(::flock(fd_, LOCK_EX | LOCK_NB), 0);
  }
  ~HeldLock() { ::close(fd_); }

 private:
  int fd_;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(ShardCacheTest, AStuckDownloaderIsWaitedForAtMostTheLockWaitThenReadPastTheCache) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20, /*lock_wait_s=*/0.3);
  ASSERT_TRUE(cache);
  const std::string key = "s3://b/stuck.tar";
  HeldLock peer((tmp.path() / ShardCache::KeyLockName(key)).string());
  const auto bytes = ShardBytes(key, 5000);
  std::atomic<int> calls{0};
  const auto start = std::chrono::steady_clock::now();
  auto held = AcquireBytes(**cache, key, bytes, &calls);
  const double waited = SecondsSince(start);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 5.0);
  EXPECT_FALSE(held->kept());
  EXPECT_EQ(ReadAll(*held), bytes);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ((*cache)->stats().lock_timeouts, 1u);
  EXPECT_EQ((*cache)->stats().passthrough, 1u);
  EXPECT_TRUE(OddFiles(tmp.path()).empty());
}

TEST(ShardCacheTest, AHeldDirectoryLockMakesTheDownloadAPassThrough) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20, /*lock_wait_s=*/0.2);
  ASSERT_TRUE(cache);
  HeldLock peer((tmp.path() / ".lock").string());
  const auto bytes = ShardBytes("k", 3000);
  auto held = AcquireBytes(**cache, "k", bytes, nullptr);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_FALSE(held->kept());
  EXPECT_EQ(ReadAll(*held), bytes);
  EXPECT_EQ((*cache)->stats().lock_timeouts, 1u);
  EXPECT_TRUE(OddFiles(tmp.path()).empty());
  EXPECT_FALSE((*cache)->UsedBytes());  // the directory lock is still held: an error, no hang
}

// A peer stopped while holding the directory lock costs one wait, not one
// per shard: later shards try the lock without waiting (each still counted),
// and once the peer lets go the cache is used again.
TEST(ShardCacheTest, AfterOneLockTimeoutTheSameLockIsOnlyTriedUntilItIsFree) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20, /*lock_wait_s=*/0.5);
  ASSERT_TRUE(cache);
  auto peer = std::make_unique<HeldLock>((tmp.path() / ".lock").string());
  const auto first = ShardBytes("first", 3000);
  auto held = AcquireBytes(**cache, "first", first, nullptr);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_FALSE(held->kept());
  const auto second = ShardBytes("second", 3000);
  const auto start = std::chrono::steady_clock::now();
  held = AcquireBytes(**cache, "second", second, nullptr);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_LT(SecondsSince(start), 0.4);  // not another lock_wait_s
  EXPECT_FALSE(held->kept());
  EXPECT_EQ(ReadAll(*held), second);
  EXPECT_EQ((*cache)->stats().lock_timeouts, 2u);
  peer.reset();  // the peer lets go: the next shard is kept again
  const auto third = ShardBytes("third", 3000);
  held = AcquireBytes(**cache, "third", third, nullptr);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_TRUE(held->kept());
  EXPECT_EQ((*cache)->stats().lock_timeouts, 2u);
}

// An entry another process holds exclusively (it is evicting it, and stopped
// there) is waited for at most lock_wait_s, then treated as a miss.
TEST(ShardCacheTest, AnEntryHeldExclusivelyByAPeerIsAMissAfterTheLockWait) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20, /*lock_wait_s=*/0.3);
  ASSERT_TRUE(cache);
  const std::string key = "s3://b/entry.tar";
  const auto bytes = ShardBytes(key, 4000);
  std::atomic<int> calls{0};
  {
    auto held = AcquireBytes(**cache, key, bytes, &calls);
    ASSERT_TRUE(held) << held.error().message;
    ASSERT_TRUE(held->kept());
  }
  std::string entry;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    const std::string name = e.path().filename().string();
    if (name[0] != '.' && name.find("lock") == std::string::npos) entry = e.path().string();
  }
  ASSERT_FALSE(entry.empty());
  HeldLock peer(entry);  // LOCK_EX, as an eviction takes it
  const auto start = std::chrono::steady_clock::now();
  auto held = AcquireBytes(**cache, key, bytes, &calls);
  const double waited = SecondsSince(start);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(ReadAll(*held), bytes);
  EXPECT_EQ(calls.load(), 2);  // downloaded again: the pinned copy was not usable
}

TEST(ShardCacheTest, CancelEndsAWaitForAnotherProcessAtOnce) {
  TempDir tmp;
  auto cache = ShardCache::Open(tmp.path().string(), 1 << 20, /*lock_wait_s=*/60);
  ASSERT_TRUE(cache);
  const std::string key = "s3://b/waited.tar";
  HeldLock peer((tmp.path() / ShardCache::KeyLockName(key)).string());
  const auto bytes = ShardBytes(key, 100);
  std::atomic<int> calls{0};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (*cache)->Cancel();
  });
  const auto start = std::chrono::steady_clock::now();
  auto held = (*cache)->Acquire(key, bytes.size(), "", StreamOf(bytes, &calls));
  const double waited = SecondsSince(start);
  canceller.join();
  ASSERT_FALSE(held);
  EXPECT_EQ(held.error().code, ErrorCode::kIo);
  EXPECT_NE(held.error().message.find("cancelled"), std::string::npos) << held.error().message;
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(calls.load(), 0);
}

// Runs `body` in `n` child processes and returns how many exited 0.
template <typename Body>
int RunInChildren(int n, Body body) {
  std::vector<pid_t> kids;
  for (int k = 0; k < n; ++k) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(body(k) ? 0 : 1);
    kids.push_back(pid);
  }
  int ok = 0;
  for (pid_t pid : kids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

TEST(ShardCacheTest, ProcessesSharingADirectoryDownloadEachKeyOnce) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "cache").string();
  const std::string counter = (tmp.path() / "downloads").string();
  const auto bytes = ShardBytes("s3://b/shared.tar", 200000);
  const int ok = RunInChildren(4, [&](int) {
    auto cache = ShardCache::Open(dir, 1 << 20);
    if (!cache) return false;
    auto held = (*cache)->Acquire("s3://b/shared.tar", bytes.size(), Sha256Hex(bytes),
                                  [&](const ObjectStore::Sink& sink) -> Status {
                                    // Record the download (O_APPEND: one byte each).
                                    const int fd = ::open(counter.c_str(),
                                                          O_WRONLY | O_CREAT | O_APPEND, 0644);
                                    (void)!::write(fd, "x", 1);
                                    ::close(fd);
                                    return StreamOf(bytes, nullptr)(sink);
                                  });
    return held && held->kept() && ReadAll(*held) == bytes;
  });
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(fs::file_size(counter), 1u);
  EXPECT_TRUE(OddFiles(dir).empty());
}

TEST(ShardCacheTest, ConcurrentProcessesStayWithinMaxBytesAndShowNoPartialEntry) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "cache").string();
  constexpr uint64_t kShard = 4096, kMax = 5 * kShard;
  std::vector<std::string> keys;
  for (int i = 0; i < 36; ++i) keys.push_back("https://h/shard-" + std::to_string(i) + ".tar");
  ASSERT_TRUE(ShardCache::Open(dir, kMax));
  // A watcher process: every *.shard it can open is whole and holds the
  // right bytes for its key, however the loaders interleave.
  const std::string done = (tmp.path() / "done").string();
  const pid_t watcher = ::fork();
  if (watcher == 0) {
    std::vector<std::pair<std::string, std::vector<uint8_t>>> expect;
    for (const auto& k : keys) expect.emplace_back(ShardCache::EntryName(k), ShardBytes(k, kShard));
    bool seen_any = false;
    for (int round = 0; round < 1000000 && !(fs::exists(done) && seen_any); ++round) {
      for (const auto& [name, bytes] : expect) {
        const int fd = ::open((dir + "/" + name).c_str(), O_RDONLY);
        if (fd < 0) continue;
        seen_any = true;
        std::vector<uint8_t> got(kShard + 1);
        const ssize_t n = ::pread(fd, got.data(), got.size(), 0);
        ::close(fd);
        got.resize(n < 0 ? 0 : static_cast<size_t>(n));
        if (got != bytes) ::_exit(1);
      }
    }
    ::_exit(seen_any ? 0 : 2);
  }
  ASSERT_GT(watcher, 0);
  // Two loaders, 24 shards each, 12 of them shared, two passes.
  const int ok = RunInChildren(2, [&](int who) {
    auto cache = ShardCache::Open(dir, kMax);
    if (!cache) return false;
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < 24; ++i) {
        const std::string& key = keys[who * 12 + i];
        const auto bytes = ShardBytes(key, kShard);
        auto held = (*cache)->Acquire(key, kShard, Sha256Hex(bytes), StreamOf(bytes, nullptr));
        if (!held || ReadAll(*held) != bytes) return false;
        auto used = (*cache)->UsedBytes();
        if (!used || *used > kMax) return false;
      }
    }
    return (*cache)->stats().evictions > 0;
  });
  EXPECT_EQ(ok, 2);
  { std::ofstream(done) << "1"; }
  int status = 0;
  ASSERT_EQ(::waitpid(watcher, &status, 0), watcher);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "watcher saw a bad entry";
  EXPECT_TRUE(OddFiles(dir).empty());
  auto cache = ShardCache::Open(dir, kMax);
  ASSERT_TRUE(cache);
  EXPECT_LE(*(*cache)->UsedBytes(), kMax);
}

}  // namespace
}  // namespace sluice::runtime::remote
