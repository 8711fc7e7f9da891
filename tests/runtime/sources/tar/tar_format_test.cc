#include "runtime/sources/tar/tar_format.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/runtime/sources/tar/tar_test_util.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime::tar {
namespace {

using testing::Bytes;
using testing::ReadFile;
using testing::ScanFile;
using testing::TempDir;
using testing::WriteFile;
using testing::WriteShard;
namespace fs = std::filesystem;

const std::string kLongDir = std::string(60, 'd') + "/" + std::string(60, 'e');
const std::string kLongName = kLongDir + "/" + std::string(90, 'n') + ".jpg";

TEST(TarWriter, RoundTripThroughScanner) {
  TempDir dir;
  const std::string path = (dir.path() / "a.tar").string();
  const std::string big(1000, 'x');
  auto offsets = WriteShard(
      path, {{"s0.jpg", "JPEG0"}, {"s0.cls", "3"}, {"dir/s1.png", ""}, {kLongName, big}});
  const std::string bytes = ReadFile(path);
  EXPECT_EQ(bytes.size() % 10240, 0u);

  auto members = ScanFile(path);
  ASSERT_EQ(members.size(), 4u);
  const std::vector<std::string> names = {"s0.jpg", "s0.cls", "dir/s1.png", kLongName};
  const std::vector<std::string> contents = {"JPEG0", "3", "", big};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(members[i].name, names[i]);
    EXPECT_EQ(members[i].data_offset, offsets[i]);
    EXPECT_EQ(members[i].header_offset + 512, members[i].data_offset);
    EXPECT_EQ(members[i].size, contents[i].size());
    EXPECT_EQ(bytes.substr(offsets[i], contents[i].size()), contents[i]);
    auto header = Bytes(bytes).subspan(members[i].header_offset, 512);
    EXPECT_TRUE(VerifyHeaderFor(header, contents[i].size()).has_value());
    EXPECT_EQ(HeaderName(header), names[i]);
  }
}

TEST(TarWriter, DeterministicBytes) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> members = {{"k.jpg", "abc"},
                                                                    {"k.cls", "1"}};
  WriteShard((dir.path() / "1.tar").string(), members);
  WriteShard((dir.path() / "2.tar").string(), members);
  EXPECT_EQ(ReadFile((dir.path() / "1.tar").string()), ReadFile((dir.path() / "2.tar").string()));
}

TEST(TarWriter, RejectsNamesUstarCannotHold) {
  TempDir dir;
  auto w = Writer::Create((dir.path() / "a.tar").string());
  ASSERT_TRUE(w.has_value());
  EXPECT_FALSE(w->Add("", Bytes("x")).has_value());
  EXPECT_FALSE(w->Add(std::string(101, 'a'), Bytes("x")).has_value());  // no '/' to split at
  EXPECT_FALSE(w->Add("dir/", Bytes("x")).has_value());
  EXPECT_FALSE(w->Add(std::string("a\0b", 3), Bytes("x")).has_value());
  ASSERT_TRUE(w->Finish().has_value());
  EXPECT_FALSE(w->Add("late.jpg", Bytes("x")).has_value());
}

TEST(TarWriter, GnuTarListsTheShard) {
  TempDir dir;
  const std::string path = (dir.path() / "a.tar").string();
  WriteShard(path, {{"s0.jpg", "JPEG0"}, {kLongName, "x"}});
  const std::string list = (dir.path() / "list.txt").string();
  ASSERT_EQ(std::system(("TZ=UTC tar tvf '" + path + "' > '" + list + "' 2>&1").c_str()), 0)
      << ReadFile(list);
  const std::string out = ReadFile(list);
  EXPECT_EQ(out.rfind("-rw-r--r-- 0/0 ", 0), 0u) << out;
  EXPECT_NE(out.find(" 5 1970-01-01 00:00 s0.jpg\n"), std::string::npos) << out;
  EXPECT_NE(out.find(kLongName), std::string::npos) << out;
}

// Shards written by GNU tar in its own formats: long names (GNU 'L' records,
// pax 'x' records, ustar prefix), a directory and a symlink (skipped).
TEST(ScanArchive, ReadsGnuTarFormats) {
  for (const std::string format : {"gnu", "pax", "ustar"}) {
    SCOPED_TRACE(format);
    TempDir dir;
    const fs::path src = dir.path() / "src";
    const std::string long_rel =
        format == "ustar" ? kLongName : "x/" + std::string(150, 'L') + ".png";
    dir.Write("src/" + long_rel, "long");
    dir.Write("src/a.jpg", "AAA");
    dir.Write("src/a.cls", "7\n");
    fs::create_symlink("a.jpg", src / "link.jpg");
    const std::string path = (dir.path() / "shard.tar").string();
    const std::string cmd = "tar --format=" + format + " --sort=name -cf '" + path + "' -C '" +
                            src.string() + "' a.cls a.jpg link.jpg " +
                            long_rel.substr(0, long_rel.find('/')) + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const std::string bytes = ReadFile(path);
    auto members = ScanFile(path);
    ASSERT_EQ(members.size(), 3u);
    EXPECT_EQ(members[0].name, "a.cls");
    EXPECT_EQ(members[1].name, "a.jpg");
    EXPECT_EQ(members[2].name, long_rel);
    EXPECT_EQ(bytes.substr(members[1].data_offset, members[1].size), "AAA");
    EXPECT_EQ(bytes.substr(members[2].data_offset, members[2].size), "long");
  }
}

// GNU tar's sparse members (`tar --sparse`): in pax formats 0.1 and 1.0 the
// header names ./GNUSparseFile.N/a.jpg and GNU.sparse.name the real name; in
// pax 0.0 and the GNU format (type 'S') the header holds the real name. Each
// is listed under its real name with `sparse` set, so the sample is not split.
TEST(ScanArchive, GnuSparseMembersKeepTheirRealName) {
  TempDir dir;
  const fs::path src = dir.path() / "src";
  dir.Write("src/a.cls", "7");
  dir.Write("src/a.jpg", "JPEGDATA");
  fs::resize_file(src / "a.jpg", 1 << 20);  // a hole after the first bytes
  dir.Write("src/b.jpg", "BBB");
  struct stat st;
  ASSERT_EQ(::stat((src / "a.jpg").c_str(), &st), 0);
  if (static_cast<uint64_t>(st.st_blocks) * 512 >= (1 << 20)) {
    GTEST_SKIP() << "this file system stores no holes";
  }
  for (const std::string format :
       {"--format=gnu", "--format=posix --sparse-version=0.0",
        "--format=posix --sparse-version=0.1", "--format=posix --sparse-version=1.0"}) {
    SCOPED_TRACE(format);
    const std::string path = (dir.path() / "shard.tar").string();
    const std::string cmd = "tar --sparse " + format + " --sort=name -cf '" + path + "' -C '" +
                            src.string() + "' a.cls a.jpg b.jpg 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto members = ScanFile(path);
    ASSERT_EQ(members.size(), 3u);
    EXPECT_EQ(members[0].name, "a.cls");
    EXPECT_EQ(members[1].name, "a.jpg");
    EXPECT_EQ(members[2].name, "b.jpg");
    EXPECT_FALSE(members[0].sparse);
    EXPECT_TRUE(members[1].sparse);
    EXPECT_FALSE(members[2].sparse);
    EXPECT_EQ(ReadFile(path).substr(members[2].data_offset, members[2].size), "BBB");
  }
}

// A member's full name from its header offset, scanning from the previous
// sample's record (what a bad sample's message needs): GNU long names and pax
// paths are applied, where the ustar header alone holds a cut name.
TEST(MemberNameAt, AppliesLongNamesScanningFromAnEarlierMember) {
  const std::string long_key = "x/" + std::string(150, 'L');
  for (const std::string format : {"gnu", "pax"}) {
    SCOPED_TRACE(format);
    TempDir dir;
    const fs::path src = dir.path() / "src";
    dir.Write("src/a.cls", "1");
    dir.Write("src/a.jpg", "A");
    dir.Write("src/" + long_key + ".cls", "2");
    dir.Write("src/" + long_key + ".jpg", "L");
    dir.Write("src/z.jpg", "Z");
    const std::string path = (dir.path() / "shard.tar").string();
    const std::string cmd = "tar --format=" + format + " --sort=name -cf '" + path + "' -C '" +
                            src.string() + "' a.cls a.jpg x z.jpg 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto members = ScanFile(path);
    ASSERT_EQ(members.size(), 5u);
    const std::string bytes = ReadFile(path);
    const uint64_t at = members[3].header_offset;                             // the long .jpg
    EXPECT_NE(HeaderName(Bytes(bytes).subspan(at, 512)), long_key + ".jpg");  // cut
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(MemberNameAt(fd, 0, at), long_key + ".jpg");
    EXPECT_EQ(MemberNameAt(fd, members[1].header_offset, at), long_key + ".jpg");
    EXPECT_EQ(MemberNameAt(fd, members[1].header_offset, members[4].header_offset), "z.jpg");
    EXPECT_EQ(MemberNameAt(fd, 0, members[0].header_offset), "a.cls");
    EXPECT_EQ(MemberNameAt(fd, 0, members[3].data_offset), "");     // no header there
    EXPECT_EQ(MemberNameAt(fd, at, members[1].header_offset), "");  // from after it
    EXPECT_EQ(MemberNameAt(fd, 0, bytes.size() + 512), "");
    ::close(fd);
  }
}

TEST(ScanArchive, BadChecksumNamesShardAndOffset) {
  TempDir dir;
  const std::string path = (dir.path() / "a.tar").string();
  auto offsets = WriteShard(path, {{"a.jpg", "AAA"}, {"b.jpg", "BBB"}});
  std::string bytes = ReadFile(path);
  const uint64_t second_header = offsets[1] - 512;
  bytes[second_header + 3] ^= 0x20;  // a name byte: the checksum no longer matches
  WriteFile(path, bytes);
  Status st;
  ScanStop stop;
  auto members = ScanFile(path, &st, &stop);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(st.error().message.find("shard.tar"), std::string::npos);
  EXPECT_NE(st.error().message.find("at byte " + std::to_string(second_header)), std::string::npos)
      << st.error().message;
  EXPECT_EQ(stop.kind, ScanErrorKind::kBadChecksum);
  EXPECT_EQ(stop.offset, second_header);
  EXPECT_EQ(members.size(), 1u);  // the first member was listed before the bad header
  EXPECT_FALSE(VerifyHeaderFor(Bytes(bytes).subspan(second_header, 512), 3).has_value());
}

TEST(ScanArchive, TruncatedMemberAndPartialHeader) {
  TempDir dir;
  const std::string path = (dir.path() / "a.tar").string();
  auto offsets = WriteShard(path, {{"a.jpg", "AAA"}, {"b.jpg", std::string(2000, 'b')}});
  const std::string bytes = ReadFile(path);
  WriteFile(path, bytes.substr(0, offsets[1] + 1000));
  Status st;
  ScanStop stop;
  auto members = ScanFile(path, &st, &stop);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(st.error().message.find("truncated"), std::string::npos) << st.error().message;
  EXPECT_EQ(stop.kind, ScanErrorKind::kTruncated);
  EXPECT_EQ(stop.offset, offsets[1] - 512);
  EXPECT_EQ(members.size(), 1u);

  WriteFile(path, bytes.substr(0, offsets[1] - 200));  // cut inside the second header
  ScanFile(path, &st, &stop);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(stop.kind, ScanErrorKind::kTruncated);

  WriteFile(path, bytes.substr(0, offsets[1] - 512));  // EOF on a block boundary: a clean end
  EXPECT_EQ(ScanFile(path).size(), 1u);
}

TEST(ScanArchive, Base256SizeAndBadSizeField) {
  TempDir dir;
  const std::string path = (dir.path() / "a.tar").string();
  WriteShard(path, {{"a.jpg", std::string(700, 'a')}});
  std::string bytes = ReadFile(path);
  auto rewrite_checksum = [&] { testing::FixChecksum(bytes, 0); };
  std::string field(12, '\0');  // GNU base-256: 0x80 then big-endian 700
  field[0] = static_cast<char>(0x80);
  field[10] = static_cast<char>(700 >> 8);
  field[11] = static_cast<char>(700 & 0xff);
  bytes.replace(124, 12, field);
  rewrite_checksum();
  WriteFile(path, bytes);
  auto members = ScanFile(path);
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members[0].size, 700u);

  bytes.replace(124, 12, std::string("0000000009x\0", 12));
  rewrite_checksum();
  WriteFile(path, bytes);
  Status st;
  ScanStop stop;
  ScanFile(path, &st, &stop);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(stop.kind, ScanErrorKind::kBadField);
}

TEST(ScanArchive, GarbageAndEmptyFiles) {
  TempDir dir;
  const std::string path = (dir.path() / "a.tar").string();
  WriteFile(path, std::string(4096, 'G'));
  Status st;
  ScanStop stop;
  EXPECT_TRUE(ScanFile(path, &st, &stop).empty());
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(stop.kind, ScanErrorKind::kBadChecksum);
  EXPECT_EQ(stop.offset, 0u);

  WriteFile(path, "");
  EXPECT_TRUE(ScanFile(path).empty());
  WriteFile(path, std::string(1024, '\0'));
  EXPECT_TRUE(ScanFile(path).empty());
}

TEST(SplitKey, WebDatasetConvention) {
  using P = std::pair<std::string_view, std::string_view>;
  EXPECT_EQ(SplitKey("a/b.seg.png"), (P{"a/b", "seg.png"}));
  EXPECT_EQ(SplitKey("n0001.jpg"), (P{"n0001", "jpg"}));
  EXPECT_EQ(SplitKey("dir.v2/x.cls"), (P{"dir.v2/x", "cls"}));
  EXPECT_EQ(SplitKey("noext"), (P{"noext", ""}));
  EXPECT_EQ(SplitKey("./k.JPG"), (P{"./k", "JPG"}));
  // Hidden base names are no field (WebDataset's key regex rejects them).
  EXPECT_EQ(SplitKey(".jpg"), (P{".jpg", ""}));
  EXPECT_EQ(SplitKey("d/._x.jpg"), (P{"d/._x.jpg", ""}));
  EXPECT_EQ(SplitKey(".DS_Store"), (P{".DS_Store", ""}));
  EXPECT_EQ(SplitKey(".hidden/x.jpg"), (P{".hidden/x", "jpg"}));  // only the base name counts
  EXPECT_TRUE(ExtensionEquals("JPG", "jpg"));
  EXPECT_FALSE(ExtensionEquals("jpeg", "jpg"));
}

TEST(VerifyHeaderFor, SizeMismatchAndNonRegular) {
  TempDir dir;
  const std::string path = (dir.path() / "a.tar").string();
  WriteShard(path, {{"a.jpg", "AAA"}});
  std::string bytes = ReadFile(path);
  EXPECT_TRUE(VerifyHeaderFor(Bytes(bytes).subspan(0, 512), 3).has_value());
  auto wrong = VerifyHeaderFor(Bytes(bytes).subspan(0, 512), 4);
  ASSERT_FALSE(wrong.has_value());
  EXPECT_NE(wrong.error().message.find("changed after it was indexed"), std::string::npos);
  EXPECT_FALSE(VerifyHeaderFor(Bytes(bytes).subspan(512, 512), 3).has_value());  // data block
}

}  // namespace
}  // namespace sluice::runtime::tar
