#include "runtime/sources/tar/shard_index.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/sources/tar/tar_format.h"
#include "tests/runtime/sources/tar/tar_test_util.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime::tar {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;
using testing::WriteShard;
namespace fs = std::filesystem;

Result<std::vector<SampleRecord>> Build(const std::string& path, const FieldMapping& mapping = {}) {
  int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  struct stat st;
  ::fstat(fd, &st);
  auto r = BuildShardRecords(fd, static_cast<uint64_t>(st.st_size), "shard.tar", mapping);
  ::close(fd);
  return r;
}

TEST(BuildShardRecords, GroupsConsecutiveMembersByKey) {
  TempDir dir;
  const std::string path = (dir.path() / "s.tar").string();
  auto off = WriteShard(path, {
                                  {"a.jpg", "A"},        // 0: a, label 3
                                  {"a.cls", "3"},        // 1
                                  {"a.json", "{}"},      // 2
                                  {"d/b.cls", " 7\n"},   // 3: d/b, png, label 7
                                  {"d/b.PNG", "BB"},     // 4
                                  {"c.jpg", "C"},        // 5: c, no label
                                  {"e.json", "{}"},      // 6: e, no image
                                  {"e.cls", "1"},        // 7
                                  {"f.jpg", "F"},        // 8: f, bad label
                                  {"f.cls", "one"},      // 9
                                  {"g.seg.png", "G"},    // 10: g: seg.png is not png
                                  {"g.cls", "2"},        // 11
                                  {"README", "no dot"},  // 12: skipped
                                  {"h.png", "H"},        // 13: h: jpg preferred over png
                                  {"h.jpeg", "HH"},      // 14
                                  {"h.cls", "-4"},       // 15
                              });
  auto records = Build(path);
  ASSERT_TRUE(records.has_value()) << records.error().ToString();
  ASSERT_EQ(records->size(), 7u);
  const auto& r = *records;
  EXPECT_EQ(r[0].offset, off[0]);
  EXPECT_EQ(r[0].size, 1u);
  EXPECT_EQ(r[0].label, 3);
  EXPECT_EQ(r[1].offset, off[4]);
  EXPECT_EQ(r[1].size, 2u);
  EXPECT_EQ(r[1].label, 7);
  EXPECT_EQ(r[2].offset, off[5]);
  EXPECT_EQ(r[2].label, SampleRecord::kNoLabel);
  EXPECT_EQ(r[3].size, SampleRecord::kNoImage);
  EXPECT_EQ(r[3].offset, off[6]);  // its first member, so that messages can name it
  EXPECT_EQ(r[3].label, 1);
  EXPECT_EQ(r[4].label, SampleRecord::kBadLabel);
  EXPECT_EQ(r[5].size, SampleRecord::kNoImage);
  EXPECT_EQ(r[6].offset, off[14]);
  EXPECT_EQ(r[6].label, -4);
  for (int i : {2, 3, 4, 5}) EXPECT_TRUE(r[i].bad()) << i;
  for (int i : {0, 1, 6}) EXPECT_FALSE(r[i].bad()) << i;

  FieldMapping mapping;
  EXPECT_EQ(DescribeBadRecord(r[2], mapping), "no label member (cls)");
  EXPECT_EQ(DescribeBadRecord(r[3], mapping), "no image member (jpg, jpeg, png)");
  EXPECT_EQ(DescribeBadRecord(r[0], mapping), "");

  // Another mapping: seg.png images, no labels.
  FieldMapping seg{.image_exts = {"seg.png"}, .label_ext = ""};
  auto seg_records = Build(path, seg);
  ASSERT_TRUE(seg_records.has_value());
  EXPECT_EQ((*seg_records)[5].offset, off[10]);
  EXPECT_EQ((*seg_records)[5].label, -1);
  EXPECT_NE(seg.Fingerprint(), mapping.Fingerprint());
  EXPECT_EQ(mapping.Fingerprint(), "image=jpg;jpeg;png label=cls");
}

TEST(BuildShardRecords, CorruptShardKeepsItsPrefixAndEndsWithACorruptRecord) {
  TempDir dir;
  const std::string path = (dir.path() / "s.tar").string();
  auto off = WriteShard(path, {{"a.jpg", "A"},
                               {"a.cls", "0"},
                               {"b.jpg", "B"},
                               {"b.cls", "1"},
                               {"c.jpg", std::string(3000, 'c')},
                               {"c.cls", "2"}});
  const std::string bytes = ReadFile(path);
  WriteFile(path, bytes.substr(0, off[4] + 100));  // c.jpg truncated
  auto records = Build(path);
  ASSERT_TRUE(records.has_value()) << records.error().ToString();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[1].label, 1);
  const SampleRecord tail = (*records)[2];
  EXPECT_EQ(tail.label, SampleRecord::kCorruptTail);
  EXPECT_EQ(tail.offset, off[4] - 512);
  EXPECT_TRUE(tail.bad());
  EXPECT_EQ(DescribeBadRecord(tail, FieldMapping{}),
            "corrupt tar data at byte " + std::to_string(off[4] - 512) +
                " (truncated): the rest of the shard cannot be read");

  // b's label member cut off: b is kept without its label (a bad sample).
  WriteFile(path, bytes.substr(0, off[3] - 300));
  records = Build(path);
  ASSERT_TRUE(records.has_value());
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[1].offset, off[2]);
  EXPECT_EQ((*records)[1].label, SampleRecord::kNoLabel);
  EXPECT_EQ((*records)[2].label, SampleRecord::kCorruptTail);
}

// Hidden members (a top-level ".jpg", macOS "._x.jpg" and ".DS_Store") are
// skipped as WebDataset skips them: no sample, no bad sample, and they do not
// split the sample around them.
TEST(BuildShardRecords, HiddenMembersAreNoSamples) {
  TempDir dir;
  const std::string path = (dir.path() / "s.tar").string();
  auto off = WriteShard(path, {{".jpg", "J"},
                               {".DS_Store", "junk"},
                               {"a.jpg", "A"},
                               {"._a.jpg", "AppleDouble"},
                               {"a.cls", "3"},
                               {"d/._b.jpg", "AppleDouble"},
                               {"d/b.jpg", "B"},
                               {"d/b.cls", "4"}});
  auto records = Build(path);
  ASSERT_TRUE(records.has_value()) << records.error().ToString();
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[0].offset, off[2]);
  EXPECT_EQ((*records)[0].label, 3);
  EXPECT_EQ((*records)[1].offset, off[6]);
  EXPECT_EQ((*records)[1].label, 4);
  for (const SampleRecord& r : *records) EXPECT_FALSE(r.bad());
}

// A shard made by GNU tar --sparse: a sparse image or label member makes its
// sample one bad sample (its stored bytes are not the file's contents); a
// sparse member that is no field is ignored; the other samples are intact.
TEST(BuildShardRecords, SparseImageOrLabelMakesTheSampleBad) {
  TempDir dir;
  const fs::path src = dir.path() / "src";
  auto sparse = [&](const std::string& name, const std::string& head) {
    dir.Write("src/" + name, head);
    fs::resize_file(src / name, 1 << 20);
  };
  dir.Write("src/a.cls", "1");
  sparse("a.jpg", "JPEG");
  dir.Write("src/b.jpg", "B");
  sparse("b.cls", "2");
  dir.Write("src/c.cls", "3");
  dir.Write("src/c.jpg", "C");
  sparse("c.json", "{}");
  dir.Write("src/d.cls", "4");
  dir.Write("src/d.jpg", "D");
  struct stat st;
  ASSERT_EQ(::stat((src / "a.jpg").c_str(), &st), 0);
  if (static_cast<uint64_t>(st.st_blocks) * 512 >= (1 << 20)) {
    GTEST_SKIP() << "this file system stores no holes";
  }
  for (const std::string format : {"gnu", "posix"}) {
    SCOPED_TRACE(format);
    const std::string path = (dir.path() / "s.tar").string();
    const std::string cmd = "tar --sparse --format=" + format + " --sort=name -cf '" + path +
                            "' -C '" + src.string() + "' . 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto records = Build(path);
    ASSERT_TRUE(records.has_value()) << records.error().ToString();
    ASSERT_EQ(records->size(), 4u);  // a, b, c, d: none split
    const auto& r = *records;
    EXPECT_EQ(r[0].size, SampleRecord::kSparseMember);
    EXPECT_EQ(r[1].size, SampleRecord::kSparseMember);
    EXPECT_TRUE(r[0].bad());
    EXPECT_TRUE(r[1].bad());
    EXPECT_EQ(DescribeBadRecord(r[0], FieldMapping{}),
              "sparse tar member not supported: re-create the shard without --sparse");
    EXPECT_EQ(r[2].size, 1u);
    EXPECT_EQ(r[2].label, 3);
    EXPECT_EQ(r[3].size, 1u);
    EXPECT_EQ(r[3].label, 4);
    const std::string bytes = ReadFile(path);
    EXPECT_EQ(bytes.substr(r[3].offset, 1), "D");
    IndexWriter w(FieldMapping{});  // the sentinel passes the index's record checks
    EXPECT_TRUE(w.AddShard("s.tar", bytes.size(), r).has_value());
  }
}

// A GNU long-name record whose member is missing (the file ends inside the
// record's padding): the corrupt tail is reported at the end of the file, and
// the records still form a valid index (found by the tar_index fuzzer).
TEST(BuildShardRecords, LongNameRecordWithoutItsMember) {
  TempDir dir;
  const std::string long_name = std::string(150, 'L') + ".jpg";
  dir.Write("src/" + long_name, "x");
  const std::string path = (dir.path() / "s.tar").string();
  const std::string cmd =
      "tar --format=gnu -cf '" + path + "' -C '" + (dir.path() / "src").string() + "' " + long_name;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  WriteFile(path, ReadFile(path).substr(0, 512 + 200));  // 'L' header + its name
  auto records = Build(path);
  ASSERT_TRUE(records.has_value());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].label, SampleRecord::kCorruptTail);
  EXPECT_EQ((*records)[0].offset, 712u);
  IndexWriter w(FieldMapping{});
  EXPECT_TRUE(w.AddShard("s.tar", 712, *records).has_value());
}

std::string WriteIndex(const TempDir& dir, const std::string& name) {
  IndexWriter w(FieldMapping{});
  std::vector<SampleRecord> a = {{512, 10, 0}, {2048, 3, 1}};
  std::vector<SampleRecord> b = {{1024, SampleRecord::kNoImage, 2}};
  std::vector<SampleRecord> c = {{1024, 100, 5}, {4096, 0, SampleRecord::kCorruptTail}};
  EXPECT_TRUE(w.AddShard("shard-0.tar", 10240, a).has_value());
  EXPECT_TRUE(w.AddShard("shard-1.tar", 10240, b).has_value());
  EXPECT_TRUE(w.AddShard("/abs/shard-2.tar", 8192, c).has_value());
  EXPECT_EQ(w.num_samples(), 5u);
  const std::string path = (dir.path() / name).string();
  EXPECT_TRUE(w.Write(path).has_value());
  return path;
}

TEST(ShardIndex, RoundTrip) {
  TempDir dir;
  const std::string path = WriteIndex(dir, "index.sluice");
  auto index = ShardIndex::Load(path);
  ASSERT_TRUE(index.has_value()) << index.error().ToString();
  ASSERT_EQ(index->num_shards(), 3u);
  EXPECT_EQ(index->shard(0).name, "shard-0.tar");
  EXPECT_EQ(index->shard(2).name, "/abs/shard-2.tar");
  EXPECT_EQ(index->shard(2).file_size, 8192u);
  EXPECT_EQ(index->shard(2).first_sample, 3u);
  EXPECT_EQ(index->shard(2).sample_count, 2u);
  EXPECT_EQ(index->FindShard("shard-1.tar"), 1);
  EXPECT_EQ(index->FindShard("nope.tar"), -1);
  EXPECT_EQ(index->fingerprint(), FieldMapping{}.Fingerprint());
  ASSERT_EQ(index->records().size(), 5u);
  EXPECT_EQ(index->records()[1].offset, 2048u);
  EXPECT_EQ(index->records()[1].size, 3u);
  EXPECT_EQ(index->records()[3].label, 5);
  // 64-byte header + 3 * 32-byte shard entries + 5 * 16-byte records + strings.
  EXPECT_EQ(ReadFile(path).size(),
            64u + 96 + 80 + FieldMapping{}.Fingerprint().size() + 11 + 11 + 16);
  ShardIndex moved = std::move(*index);
  EXPECT_EQ(moved.FindShard("shard-0.tar"), 0);
  EXPECT_EQ(moved.records()[0].offset, 512u);
}

TEST(ShardIndex, LoadRejectsDamage) {
  TempDir dir;
  const std::string path = WriteIndex(dir, "index.sluice");
  const std::string good = ReadFile(path);
  auto load_with = [&](std::string bytes) {
    WriteFile(path, bytes);
    return ShardIndex::Load(path);
  };
  auto missing = ShardIndex::Load((dir.path() / "none.sluice").string());
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);

  std::string bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_EQ(load_with(bad_magic).error().code, ErrorCode::kCorruptData);

  std::string version = good;
  version[8] = 9;
  auto v = load_with(version);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().code, ErrorCode::kVersionMismatch);

  auto truncated = load_with(good.substr(0, good.size() - 40));
  ASSERT_FALSE(truncated.has_value());
  EXPECT_EQ(truncated.error().code, ErrorCode::kCorruptData);
  EXPECT_EQ(load_with(good.substr(0, 10)).error().code, ErrorCode::kCorruptData);

  // Record 1 (shard-0.tar, 10240 bytes) made to run past its shard's end.
  std::string past = good;
  const size_t record1 = 64 + 96 + 16;
  const uint64_t far = 10240;
  std::memcpy(&past[record1], &far, 8);
  auto p = load_with(past);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().message.find("past the shard's end"), std::string::npos) << p.error().message;

  // Shard 1's sample count made larger: the ranges no longer add up.
  std::string counts = good;
  const uint64_t two = 2;
  std::memcpy(&counts[64 + 32 + 16], &two, 8);
  EXPECT_EQ(load_with(counts).error().code, ErrorCode::kCorruptData);

  EXPECT_TRUE(load_with(good).has_value());
}

TEST(IndexWriter, RejectsDuplicatesAndOutOfBoundsRecords) {
  IndexWriter w(FieldMapping{});
  std::vector<SampleRecord> ok = {{512, 10, 0}};
  EXPECT_TRUE(w.AddShard("a.tar", 1024, ok).has_value());
  EXPECT_FALSE(w.AddShard("a.tar", 1024, ok).has_value());
  EXPECT_FALSE(w.AddShard("", 1024, ok).has_value());
  std::vector<SampleRecord> past = {{512, 600, 0}};
  EXPECT_FALSE(w.AddShard("b.tar", 1024, past).has_value());
  std::vector<SampleRecord> unaligned = {{700, 1, 0}};
  EXPECT_FALSE(w.AddShard("c.tar", 1024, unaligned).has_value());
}

}  // namespace
}  // namespace sluice::runtime::tar
