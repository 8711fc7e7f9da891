#include "runtime/sources/tar_shards_source.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/sources/source_registry.h"
#include "runtime/sources/tar/index_store.h"
#include "runtime/sources/tar/shard_index.h"
#include "tests/runtime/sources/source_test_util.h"
#include "tests/runtime/sources/tar/tar_test_util.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime {
namespace {

using testing::Contents;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;
using testing::WriteShard;
namespace fs = std::filesystem;

// Shard k holds samples "s<k>_<j>" (j < per_shard): "img-k-j" as .jpg and
// label (k * per_shard + j) % 5 as .cls, plus a .json member.
std::vector<std::vector<uint64_t>> MakeShards(const fs::path& dir, int shards, int per_shard) {
  fs::create_directories(dir);
  std::vector<std::vector<uint64_t>> offsets;
  for (int k = 0; k < shards; ++k) {
    std::vector<std::pair<std::string, std::string>> members;
    for (int j = 0; j < per_shard; ++j) {
      const std::string key = "s" + std::to_string(k) + "_" + std::to_string(j);
      members.push_back({key + ".jpg", "img-" + std::to_string(k) + "-" + std::to_string(j)});
      members.push_back({key + ".cls", std::to_string((k * per_shard + j) % 5)});
      members.push_back({key + ".json", "{\"k\": " + std::to_string(j) + "}"});
    }
    char name[32];
    std::snprintf(name, sizeof(name), "shard-%06d.tar", k);
    offsets.push_back(WriteShard((dir / name).string(), members));
  }
  return offsets;
}

TarShardOptions Options(const std::string& path, const std::string& cache = "") {
  TarShardOptions o;
  o.path = path;
  o.index.cache_dir = cache;
  o.index.quiet = true;
  return o;
}

std::unique_ptr<TarShardSource> MustOpen(const TarShardOptions& o) {
  auto src = TarShardSource::Open(o);
  EXPECT_TRUE(src.has_value()) << (src ? "" : src.error().ToString());
  return src ? std::move(*src) : nullptr;
}

TEST(TarShardSource, BuildsAnIndexThenReadsAndReusesIt) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  MakeShards(data, 3, 4);
  auto src = MustOpen(Options(data.string()));
  ASSERT_NE(src, nullptr);
  EXPECT_TRUE(src->index_built());
  EXPECT_EQ(fs::path(src->index_path()).parent_path(), data);
  EXPECT_TRUE(fs::path(src->index_path()).filename().string().starts_with("sluice-index-"));
  ASSERT_EQ(src->size(), 12u);
  EXPECT_EQ(src->num_shards(), 3u);
  EXPECT_EQ(Contents(*src, 0), "img-0-0");
  EXPECT_EQ(Contents(*src, 5), "img-1-1");
  EXPECT_EQ(Contents(*src, 11), "img-2-3");
  EXPECT_EQ(src->label(7), 7 % 5);
  EXPECT_EQ(src->SampleName(5), "shard-000001.tar:s1_1");
  EXPECT_EQ(src->ShardStarts(), (std::vector<uint64_t>{0, 4, 8}));
  EXPECT_TRUE(src->class_names().empty());
  std::vector<uint8_t> buf;
  EXPECT_EQ(src->Read(12, buf).error().code, ErrorCode::kInvalidArgument);

  auto again = MustOpen(Options(data.string()));
  ASSERT_NE(again, nullptr);
  EXPECT_FALSE(again->index_built());
  EXPECT_EQ(again->index_path(), src->index_path());
  EXPECT_EQ(Contents(*again, 11), "img-2-3");
}

// Reads are const and share only the shard descriptors: threads reading
// every sample at once get the same bytes (run under TSan by the sanitizer suite).
TEST(TarShardSource, ConcurrentReads) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  MakeShards(data, 4, 25);
  auto src = MustOpen(Options(data.string()));
  ASSERT_NE(src, nullptr);
  std::vector<std::string> want(src->size());
  for (size_t i = 0; i < src->size(); ++i) want[i] = Contents(*src, i);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> buf;
      for (int round = 0; round < 20; ++round) {
        for (size_t i = static_cast<size_t>(t); i < want.size(); i += 3) {
          auto n = src->Read(i, buf);
          if (!n || std::string(reinterpret_cast<const char*>(buf.data()), *n) != want[i] ||
              src->label(i) != static_cast<int64_t>(i % 5)) {
            ++mismatches[static_cast<size_t>(t)];
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
}

TEST(TarShardSource, BraceRangeAndGlobSelectShards) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  MakeShards(data, 4, 2);
  auto some = MustOpen(Options((data / "shard-{000001..000002}.tar").string()));
  ASSERT_NE(some, nullptr);
  ASSERT_EQ(some->size(), 4u);
  EXPECT_EQ(Contents(*some, 0), "img-1-0");
  EXPECT_EQ(Contents(*some, 3), "img-2-1");
  auto listed = MustOpen(Options((data / "shard-{000003,000000}.tar").string()));
  ASSERT_NE(listed, nullptr);
  EXPECT_EQ(Contents(*listed, 0), "img-3-0");
  EXPECT_EQ(listed->SampleName(2), "shard-000000.tar:s0_0");
  auto globbed = MustOpen(Options((data / "shard-00000[23].tar").string()));
  ASSERT_NE(globbed, nullptr);
  EXPECT_EQ(globbed->size(), 4u);
  EXPECT_EQ(Contents(*globbed, 3), "img-3-1");
}

TEST(TarShardSource, UsesAPackIndexInPlaceForASubsetOfItsShards) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  MakeShards(data, 3, 2);
  // An index.sluice as `sluice pack` writes it: built from the shards' records.
  tar::IndexWriter w(tar::FieldMapping{});
  for (int k = 0; k < 3; ++k) {
    const std::string name = "shard-00000" + std::to_string(k) + ".tar";
    int fd = ::open((data / name).c_str(), O_RDONLY);
    const uint64_t size = fs::file_size(data / name);
    auto r = tar::BuildShardRecords(fd, size, name, tar::FieldMapping{});
    ::close(fd);
    ASSERT_TRUE(r.has_value());
    ASSERT_TRUE(w.AddShard(name, size, *r).has_value());
  }
  for (const auto& e : fs::directory_iterator(data)) {  // only the pack index stays
    if (e.path().extension() == ".sluice") fs::remove(e.path());
  }
  ASSERT_TRUE(w.Write((data / tar::kPackIndexName).string()).has_value());
  auto src = MustOpen(Options((data / "shard-{000002,000001}.tar").string()));
  ASSERT_NE(src, nullptr);
  EXPECT_FALSE(src->index_built());
  EXPECT_EQ(src->index_path(), (data / "index.sluice").string());
  EXPECT_EQ(Contents(*src, 0), "img-2-0");
  EXPECT_EQ(Contents(*src, 3), "img-1-1");

  // Another field mapping cannot use it: a new index is built.
  TarShardOptions png = Options(data.string());
  png.mapping.image_exts = {"png"};
  auto other = TarShardSource::Open(png);
  ASSERT_TRUE(other.has_value());
  EXPECT_TRUE((*other)->index_built());
  std::vector<uint8_t> buf;
  auto bad = (*other)->Read(0, buf);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "shard-000000.tar:s0_0: no image member (png)");
}

TEST(TarShardSource, ReadOnlyDataDirectoryWritesTheIndexToTheCacheDir) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  const fs::path cache = dir.path() / "cache";
  MakeShards(data, 2, 2);
  ASSERT_EQ(::chmod(data.c_str(), 0555), 0);
  auto src = MustOpen(Options(data.string(), cache.string()));
  ASSERT_NE(src, nullptr);
  EXPECT_TRUE(src->index_built());
  EXPECT_EQ(fs::path(src->index_path()).parent_path(), cache);
  EXPECT_EQ(Contents(*src, 3), "img-1-1");
  auto again = MustOpen(Options(data.string(), cache.string()));
  ASSERT_NE(again, nullptr);
  EXPECT_FALSE(again->index_built());
  EXPECT_EQ(again->index_path(), src->index_path());
  ::chmod(data.c_str(), 0755);
  for (const auto& e : fs::directory_iterator(data)) {
    EXPECT_NE(e.path().extension(), ".sluice") << e.path();
  }
}

TEST(TarShardSource, SaysWhereItWroteTheIndex) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  MakeShards(data, 1, 2);
  std::vector<tar::ShardFile> files(1);
  files[0].path = (data / "shard-000000.tar").string();
  files[0].absolute = files[0].path;
  files[0].fd = ::open(files[0].path.c_str(), O_RDONLY);
  files[0].size = fs::file_size(files[0].path);
  tar::IndexOptions o;
  o.quiet = true;
  auto chosen = tar::OpenShardIndex(files, tar::FieldMapping{}, o);
  ::close(files[0].fd);
  ASSERT_TRUE(chosen.has_value()) << chosen.error().ToString();
  ASSERT_EQ(chosen->notes.size(), 1u);
  EXPECT_NE(chosen->notes[0].find("indexed 1 shard(s) (2 samples)"), std::string::npos);
  EXPECT_NE(chosen->notes[0].find("index written to " + chosen->where), std::string::npos)
      << chosen->notes[0];
}

TEST(TarShardSource, MissingFieldsAreBadSamplesNamingShardAndKey) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  fs::create_directories(data);
  WriteShard((data / "shard-000000.tar").string(), {{"a.jpg", "A"},
                                                    {"a.cls", "1"},
                                                    {"b.jpg", "B"},
                                                    {"c.cls", "2"},
                                                    {"d.jpg", "D"},
                                                    {"d.cls", "x"}});
  auto src = MustOpen(Options(data.string()));
  ASSERT_NE(src, nullptr);
  ASSERT_EQ(src->size(), 4u);
  EXPECT_EQ(Contents(*src, 0), "A");
  std::vector<uint8_t> buf;
  const std::vector<std::string> want = {
      "", "shard-000000.tar:b: no label member (cls)",
      "shard-000000.tar:c: no image member (jpg, jpeg, png)",
      "shard-000000.tar:d: label member (cls) is not a decimal integer"};
  for (size_t i = 1; i < 4; ++i) {
    auto r = src->Read(i, buf);
    ASSERT_FALSE(r.has_value()) << i;
    EXPECT_EQ(r.error().code, ErrorCode::kCorruptData);
    EXPECT_EQ(r.error().message, want[i]);
    EXPECT_EQ(src->label(i), -1);
  }
}

// True when none of `path`'s pages is in the page cache (mincore).
bool NoneResident(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const size_t size = fs::file_size(path);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return false;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size + page - 1) / page);
  const bool ok = ::mincore(map, size, resident.data()) == 0;
  ::munmap(map, size);
  return ok &&
         std::all_of(resident.begin(), resident.end(), [](unsigned char c) { return !(c & 1); });
}

TEST(TarShardSource, ReadIfReadyReadsMembersInThePageCacheAndFailsBadSamplesAtOnce) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  MakeShards(data, 2, 4);
  WriteShard((data / "shard-000002.tar").string(), {{"x.jpg", "X"}});  // no label: bad
  auto src = MustOpen(Options(data.string()));
  ASSERT_NE(src, nullptr);
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < 8; ++i) {  // just written: in the page cache
    std::optional<Result<size_t>> got = src->ReadIfReady(i, buf);
    ASSERT_TRUE(got.has_value()) << i;
    ASSERT_TRUE(got->has_value()) << got->error().ToString();
    EXPECT_EQ(std::string(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(**got)),
              Contents(*src, i));
  }
  auto bad = src->ReadIfReady(8, buf);  // fails without any I/O
  ASSERT_TRUE(bad.has_value());
  ASSERT_FALSE(bad->has_value());
  EXPECT_EQ(bad->error().code, ErrorCode::kCorruptData);

  // Evicted from the page cache (where the file system lets it be: tmpfs
  // does not), a member would need the disk: not ready, and Read still works.
  const fs::path shard1 = data / "shard-000001.tar";
  const int fd = ::open(shard1.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  if (NoneResident(shard1)) {
    EXPECT_FALSE(src->ReadIfReady(5, buf).has_value());
    EXPECT_EQ(Contents(*src, 5), "img-1-1");
  }
}

// Evicts `path` from the page cache; true when nothing of it stays resident
// (tmpfs keeps its pages: then the caller skips).
bool Evict(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return NoneResident(path);
}

TEST(TarShardSource, AnnouncedLocalMembersArePrefetchedIntoThePageCache) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  fs::create_directories(data);
  std::vector<std::pair<std::string, std::string>> members;
  for (int j = 0; j < 8; ++j) {  // 64 KiB images: pages of their own
    members.push_back({"k" + std::to_string(j) + ".jpg", std::string(65536, 'a' + j)});
    members.push_back({"k" + std::to_string(j) + ".cls", std::to_string(j)});
  }
  WriteShard((data / "shard-000000.tar").string(), members);
  auto src = MustOpen(Options(data.string()));
  ASSERT_NE(src, nullptr);
  EXPECT_TRUE(src->WantsReadHints());
  EXPECT_EQ(src->ReadHintWindow(), TarShardSource::kLocalHintWindow);
  if (!Evict(data / "shard-000000.tar")) GTEST_SKIP() << "this file system keeps its pages";
  std::vector<uint8_t> buf;
  ASSERT_FALSE(src->ReadIfReady(2, buf).has_value());  // needs the disk

  const std::vector<uint64_t> next = {2, 5, 6};
  src->WillRead(next);
  for (uint64_t i : next) {  // resident soon, with no read of ours
    std::optional<Result<size_t>> got;
    for (int tries = 0; tries < 1000 && !(got = src->ReadIfReady(i, buf)); ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(got.has_value()) << "sample " << i << " never became resident";
    ASSERT_TRUE(got->has_value()) << got->error().ToString();
    EXPECT_EQ(std::string(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(**got)),
              std::string(65536, 'a' + static_cast<char>(i)));
  }
  EXPECT_FALSE(src->ReadIfReady(3, buf).has_value());  // not announced: still on disk
  EXPECT_EQ(src->prefetch_counters().advised, 3u);
  EXPECT_EQ(src->prefetch_counters().dropped, 0u);

  // Off: no hints wanted, nothing prefetched.
  TarShardOptions off = Options(data.string());
  off.page_cache_prefetch = false;
  auto plain = MustOpen(off);
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->WantsReadHints());
  EXPECT_EQ(plain->ReadHintWindow(), 0u);
}

// Polls until the source's prefetcher has advised `n` ranges (at most 10 s).
bool WaitAdvised(const TarShardSource& src, uint64_t n) {
  for (int i = 0; i < 1000 && src.prefetch_counters().advised < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return src.prefetch_counters().advised == n;
}

TEST(TarShardSource, PrefetchPausesWhileThePageCacheServesEveryRead) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  MakeShards(data, 1, 4);
  auto src = MustOpen(Options(data.string()));
  ASSERT_NE(src, nullptr);
  const std::vector<uint64_t> one = {0};
  const uint64_t calls = TarShardSource::kPrefetchCallsAfterMiss;
  for (uint64_t c = 0; c < calls; ++c) src->WillRead(one);  // the first ones prefetch
  ASSERT_TRUE(WaitAdvised(*src, calls));
  std::vector<uint8_t> buf;
  ASSERT_TRUE(src->ReadIfReady(1, buf).has_value());  // resident: no miss
  src->WillRead(one);                                 // nothing missed: dropped
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(src->prefetch_counters().advised, calls);

  if (!Evict(data / "shard-000000.tar")) GTEST_SKIP() << "this file system keeps its pages";
  ASSERT_FALSE(src->ReadIfReady(2, buf).has_value());  // a miss: prefetch resumes
  src->WillRead(one);
  EXPECT_TRUE(WaitAdvised(*src, calls + 1));
}

TEST(TarShardSource, TruncatedAndBadChecksumShardsKeepTheirReadablePrefix) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  auto offsets = MakeShards(data, 2, 3);
  const std::string s0 = (data / "shard-000000.tar").string();
  const std::string s1 = (data / "shard-000001.tar").string();
  // Shard 0: cut inside sample 2's image. Shard 1: sample 1's .cls header damaged.
  WriteFile(s0, ReadFile(s0).substr(0, offsets[0][6] + 3));
  std::string b1 = ReadFile(s1);
  b1[offsets[1][4] - 512 + 1] ^= 0x11;
  WriteFile(s1, b1);
  auto src = MustOpen(Options(data.string()));
  ASSERT_NE(src, nullptr);
  // Shard 0: s0_0, s0_1, corrupt tail. Shard 1: s1_0, s1_1 (its label was
  // past the bad header), corrupt tail.
  ASSERT_EQ(src->size(), 6u);
  EXPECT_EQ(src->ShardStarts(), (std::vector<uint64_t>{0, 3}));
  EXPECT_EQ(Contents(*src, 1), "img-0-1");
  EXPECT_EQ(Contents(*src, 3), "img-1-0");
  std::vector<uint8_t> buf;
  auto cut = src->Read(2, buf);
  ASSERT_FALSE(cut.has_value());
  EXPECT_EQ(cut.error().code, ErrorCode::kCorruptData);
  EXPECT_EQ(cut.error().message, "shard-000000.tar@" + std::to_string(offsets[0][6] - 512) +
                                     ": corrupt tar data at byte " +
                                     std::to_string(offsets[0][6] - 512) +
                                     " (truncated): the rest of the shard cannot be read");
  EXPECT_EQ(src->Read(4, buf).error().message, "shard-000001.tar:s1_1: no label member (cls)");
  auto checksum = src->Read(5, buf);
  ASSERT_FALSE(checksum.has_value());
  EXPECT_NE(checksum.error().message.find("(bad header checksum)"), std::string::npos)
      << checksum.error().message;
}

TEST(TarShardSource, AShardThatDisagreesWithItsIndexGivesBadSamples) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  auto offsets = MakeShards(data, 2, 2);
  const std::string s0 = (data / "shard-000000.tar").string();
  const std::string s1 = (data / "shard-000001.tar").string();
  auto built = MustOpen(Options(data.string()));
  ASSERT_NE(built, nullptr);
  const std::string index = built->index_path();
  built.reset();

  // Same size, changed bytes: sample 1's image header now claims another size.
  std::string b0 = ReadFile(s0);
  const uint64_t h = offsets[0][3] - 512;
  b0.replace(h + 124, 12, std::string("00000000077\0", 12));
  testing::FixChecksum(b0, h);
  WriteFile(s0, b0);
  // Shard 1 grows: its size no longer matches the index.
  WriteFile(s1, ReadFile(s1) + std::string(10240, '\0'));

  TarShardOptions o = Options(data.string());
  o.index.explicit_index = index;
  auto src = MustOpen(o);
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(Contents(*src, 0), "img-0-0");
  std::vector<uint8_t> buf;
  auto changed = src->Read(1, buf);
  ASSERT_FALSE(changed.has_value());
  EXPECT_EQ(changed.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(changed.error().message.find("changed after it was indexed"), std::string::npos)
      << changed.error().message;
  for (size_t i : {2, 3}) {
    auto r = src->Read(i, buf);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("shard-000001.tar"), std::string::npos);
    EXPECT_NE(r.error().message.find("lists " + std::to_string(fs::file_size(s1) - 10240)),
              std::string::npos)
        << r.error().message;
  }

  // Without the explicit index the stale cache is not used: a new one is built.
  auto rebuilt = MustOpen(Options(data.string()));
  ASSERT_NE(rebuilt, nullptr);
  EXPECT_TRUE(rebuilt->index_built());
  EXPECT_NE(rebuilt->index_path(), index);
  EXPECT_EQ(Contents(*rebuilt, 3), "img-1-1");

  // An explicit index that does not list a shard is an error.
  WriteShard((data / "extra.tar").string(), {{"x.jpg", "X"}, {"x.cls", "0"}});
  o.path = data.string();
  auto missing = TarShardSource::Open(o);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("does not list shard"), std::string::npos);
}

TEST(TarShardSource, GnuTarShardAndManifestClassNames) {
  TempDir dir;
  dir.Write("src/n01/img_1.JPG", "one");
  dir.Write("src/n01/img_1.cls", "1\n");
  dir.Write("src/n01/img_2.png", "two");
  dir.Write("src/n01/img_2.cls", "0");
  const fs::path data = dir.path() / "data";
  fs::create_directories(data);
  const std::string cmd = "tar --format=gnu --sort=name -cf '" + (data / "a.tar").string() +
                          "' -C '" + (dir.path() / "src").string() + "' n01";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  dir.Write("data/manifest.json", R"({"class_names": ["cat", "dog"], "samples": 2})");
  auto src = MustOpen(Options(data.string()));
  ASSERT_NE(src, nullptr);
  ASSERT_EQ(src->size(), 2u);
  EXPECT_EQ(Contents(*src, 0), "one");
  EXPECT_EQ(src->label(0), 1);
  EXPECT_EQ(Contents(*src, 1), "two");
  EXPECT_EQ(src->SampleName(1), "a.tar:n01/img_2");
  EXPECT_EQ(src->class_names(), (std::vector<std::string>{"cat", "dog"}));

  dir.Write("data/manifest.json", R"({"class_names": "cat"})");
  auto bad = TarShardSource::Open(Options(data.string()));
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

TEST(TarShardSource, RegistryOpensItFromParams) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  fs::create_directories(data);
  WriteShard((data / "s.tar").string(),
             {{"a.seg.png", "SEG"}, {"a.jpg", "JPG"}, {"a.label", " 4 "}});
  ParamList params;
  params["path"].value = (data / "*.tar").string();
  params["image"].value = std::string(".SEG.png; jpg");
  params["label"].value = std::string("label");
  params["cache_dir"].value = std::string("");
  params["index"].value = std::string("");
  auto src = OpenSource("tar_shards", params);
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  ASSERT_EQ((*src)->size(), 1u);
  EXPECT_EQ(Contents(**src, 0), "SEG");
  EXPECT_EQ((*src)->label(0), 4);
  EXPECT_EQ(SplitExtensions(".SEG.png; jpg,,PNG"),
            (std::vector<std::string>{"seg.png", "jpg", "png"}));

  params["path"].value = (data / "none-*.tar").string();
  auto none = OpenSource("tar_shards", params);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
}

TEST(TarShardSource, MemberNamesAreNeverPaths) {
  // Members named like paths that leave the shard's folder ("..", absolute),
  // with real files at the places those names would resolve to: every read
  // returns the member's bytes from the shard, never the outside file, and
  // nothing is created outside.
  TempDir dir;
  const fs::path data = dir.path() / "a/b/data";
  fs::create_directories(data);
  WriteFile((dir.path() / "a/escape.jpg").string(), "OUTSIDE-REL");
  const std::string abs_key = (dir.path() / "abs").string();  // "/tmp/.../abs"
  WriteFile(abs_key + ".jpg", "OUTSIDE-ABS");
  WriteShard((data / "s.tar").string(), {{"../../escape.jpg", "IN-1"},
                                         {"../../escape.cls", "1"},
                                         {abs_key + ".jpg", "IN-2"},
                                         {abs_key + ".cls", "2"}});
  auto before = std::distance(fs::recursive_directory_iterator(dir.path()), {});
  auto src = MustOpen(Options(data.string()));
  ASSERT_NE(src, nullptr);
  ASSERT_EQ(src->size(), 2u);
  EXPECT_EQ(Contents(*src, 0), "IN-1");
  EXPECT_EQ(src->label(0), 1);
  EXPECT_EQ(Contents(*src, 1), "IN-2");
  EXPECT_EQ(src->label(1), 2);
  EXPECT_NE(src->SampleName(0).find("../../escape"), std::string::npos) << src->SampleName(0);
  EXPECT_EQ(ReadFile((dir.path() / "a/escape.jpg").string()), "OUTSIDE-REL");
  EXPECT_EQ(ReadFile(abs_key + ".jpg"), "OUTSIDE-ABS");
  // The only new file is the shard's index, in the data folder.
  auto after = std::distance(fs::recursive_directory_iterator(dir.path()), {});
  EXPECT_LE(after, before + 1);
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_TRUE(e.path().filename() == "a" || e.path().filename() == "abs.jpg") << e.path();
  }
}

TEST(TarShardSource, NoSamplesIsAnError) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  fs::create_directories(data);
  WriteShard((data / "s.tar").string(), {{"README", "no key"}});
  auto src = TarShardSource::Open(Options(data.string()));
  ASSERT_FALSE(src.has_value());
  EXPECT_EQ(src.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::runtime
