#include "runtime/sources/tar/shard_paths.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime::tar {
namespace {

using testing::TempDir;
using V = std::vector<std::string>;

V Expand(const std::string& p) {
  auto r = ExpandBraces(p);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
  return r ? *r : V{};
}

TEST(ExpandBraces, RangesListsNestingAndLiterals) {
  EXPECT_EQ(Expand("shard-{000000..000002}.tar"),
            (V{"shard-000000.tar", "shard-000001.tar", "shard-000002.tar"}));
  EXPECT_EQ(Expand("s{8..11}"), (V{"s8", "s9", "s10", "s11"}));
  EXPECT_EQ(Expand("s{3..1}"), (V{"s3", "s2", "s1"}));
  EXPECT_EQ(Expand("{train,val}-{0..1}.tar"),
            (V{"train-0.tar", "train-1.tar", "val-0.tar", "val-1.tar"}));
  EXPECT_EQ(Expand("a{b,c{1..2}}d"), (V{"abd", "ac1d", "ac2d"}));
  EXPECT_EQ(Expand("x{y}z{1,2}"), (V{"x{y}z1", "x{y}z2"}));  // {y}: literal
  EXPECT_EQ(Expand("open{1,2"), (V{"open{1,2"}));
  EXPECT_EQ(Expand("plain.tar"), (V{"plain.tar"}));
  EXPECT_EQ(Expand("{a..c}"), (V{"{a..c}"}));  // letters: not a range here
  auto huge = ExpandBraces("{0..99999999}");
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(ExpandBraces("{0..999}{0..999}{0..9}").has_value());
  EXPECT_NE(huge.error().message.find("over 1000000 shard names"), std::string::npos)
      << huge.error().message;
  // Fewer than 1,000,000 names, but long ones: over 256 MiB of text.
  auto long_names = ExpandBraces(std::string(300, 'x') + "{0..999}{0..999}");
  ASSERT_FALSE(long_names.has_value());
  EXPECT_EQ(long_names.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(long_names.error().message.find("over 268435456 bytes of shard names"),
            std::string::npos)
      << long_names.error().message;
  EXPECT_NE(long_names.error().message.find("..."), std::string::npos);  // the pattern, cut
  EXPECT_FALSE(long_names.error().hint.empty());
  // A long URL per shard is fine: 1,000,000 names of 80 bytes.
  EXPECT_EQ(ExpandBraces("s3://org-datasets/laion400m/webdataset/train/" + std::string(16, 'x') +
                         "shard-{000000..999999}.tar")
                ->size(),
            1000000u);
  EXPECT_FALSE(ExpandBraces(std::string(65537, 'a')).has_value());
  EXPECT_EQ(ExpandBraces(std::string(65536, 'a'))->size(), 1u);
  EXPECT_EQ(ExpandBraces(std::string(50, 'x') + "{0..999}{0..999}")->size(), 1000000u);
  // The limit counts nested groups exactly: 999 * 1000 + 1000 names is at it,
  // 1000 * 1000 + 1000 over it.
  EXPECT_EQ(ExpandBraces("{x{0..998},y}{0..999}")->size(), 1000000u);
  EXPECT_FALSE(ExpandBraces("{x{0..999},y}{0..999}").has_value());
  EXPECT_FALSE(ExpandBraces("{{0..999},{0..999}}{0..999}").has_value());
  EXPECT_EQ(Expand("{a,{b,c}x}{1,2}"), (V{"a1", "a2", "bx1", "bx2", "cx1", "cx2"}));
  // Other limits (the fuzz harness's): 4 names of 2 bytes.
  EXPECT_TRUE(ExpandBraces("{a,b}{1,2}", {.max_names = 4, .max_bytes = 8}).has_value());
  EXPECT_FALSE(ExpandBraces("{a,b}{1,2,3}", {.max_names = 4, .max_bytes = 100}).has_value());
  EXPECT_FALSE(ExpandBraces("{a,b}{1,2}", {.max_names = 4, .max_bytes = 7}).has_value());
}

TEST(ResolveShardPaths, DirectoryGlobBracesAndMissing) {
  TempDir dir;
  for (const char* name : {"b-1.tar", "b-0.tar", "a.tar", ".hidden.tar", "notes.txt"}) {
    dir.Write(name, "x");
  }
  const std::string d = dir.path().string();
  auto listed = ResolveShardPaths(d);
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(*listed, (V{d + "/a.tar", d + "/b-0.tar", d + "/b-1.tar"}));

  auto globbed = ResolveShardPaths(d + "/b-*.tar");
  ASSERT_TRUE(globbed.has_value());
  EXPECT_EQ(*globbed, (V{d + "/b-0.tar", d + "/b-1.tar"}));

  auto braced = ResolveShardPaths(d + "/{b-{1..0},a,b-1}.tar");  // b-1 twice: kept once
  ASSERT_TRUE(braced.has_value());
  EXPECT_EQ(*braced, (V{d + "/b-1.tar", d + "/b-0.tar", d + "/a.tar"}));

  auto missing = ResolveShardPaths(d + "/b-{0..2}.tar");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("b-2.tar"), std::string::npos);
  EXPECT_EQ(ResolveShardPaths(d + "/z-*.tar").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(ResolveShardPaths("").error().code, ErrorCode::kInvalidArgument);

  TempDir empty;
  EXPECT_EQ(ResolveShardPaths(empty.path().string()).error().code, ErrorCode::kNotFound);
}

// A glob over the shards' directory skips the files Sluice writes beside them
// (index, cached indexes, their temporary files, the manifest), so that
// opening `dir/*` twice reads the same shards.
TEST(ResolveShardPaths, GlobsSkipSluicesOwnFiles) {
  TempDir dir;
  for (const char* name :
       {"a.tar", "b.tar", "index.sluice", "manifest.json", "sluice-index-0123456789abcdef.sluice",
        "sluice-index-0123456789abcdef.sluice.tmp.123.0", "index.sluice.tmp.7.1", "notes.txt"}) {
    dir.Write(name, "x");
  }
  const std::string d = dir.path().string();
  auto globbed = ResolveShardPaths(d + "/*");
  ASSERT_TRUE(globbed.has_value());
  EXPECT_EQ(*globbed, (V{d + "/a.tar", d + "/b.tar", d + "/notes.txt"}));  // a user's file stays
  EXPECT_EQ(ResolveShardPaths(d + "/*.sluice").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(ResolveShardPaths(d + "/index.sluice").has_value());  // named: the user's choice

  EXPECT_TRUE(IsSluiceFile("index.sluice"));
  EXPECT_TRUE(IsSluiceFile("sluice-index-abc.sluice.tmp.1.2"));
  EXPECT_FALSE(IsSluiceFile("shard.tmp.1.tar"));
  EXPECT_FALSE(IsSluiceFile("my-index.sluice"));
  EXPECT_FALSE(IsSluiceFile("manifest.json.bak"));
}

// One shard spelled two ways (relative, with "./", "..", doubled slashes, or
// absolute) is one shard, kept in its first spelling and order.
TEST(ResolveShardPaths, OneShardSpelledTwoWaysIsSelectedOnce) {
  TempDir dir;
  dir.Write("dup/full.tar", "x");
  dir.Write("dup/other.tar", "x");
  const std::string d = dir.path().string();
  auto paths = ResolveShardPaths(d + "/{dup/full.tar,./dup/full.tar,dup//full.tar,dup/../dup/" +
                                 "full.tar,dup/other.tar,dup/*.tar}");
  ASSERT_TRUE(paths.has_value());
  EXPECT_EQ(*paths, (V{d + "/dup/full.tar", d + "/dup/other.tar"}));
}

}  // namespace
}  // namespace sluice::runtime::tar
