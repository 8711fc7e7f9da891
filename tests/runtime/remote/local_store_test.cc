#include "runtime/remote/local_store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/remote/object_store.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime::remote {
namespace {

using runtime::testing::TempDir;

TEST(ObjectStoreUrls, IsUrlAndRedaction) {
  EXPECT_TRUE(IsUrl("s3://bucket/key"));
  EXPECT_TRUE(IsUrl("HTTPS://host/x"));
  EXPECT_TRUE(IsUrl("http://host/x"));
  EXPECT_TRUE(IsUrl("file:///data"));
  EXPECT_FALSE(IsUrl("/data/shards"));
  EXPECT_FALSE(IsUrl("relative/dir:with:colons"));
  EXPECT_FALSE(IsUrl("ftp://host/x"));
  EXPECT_EQ(RedactUrl("https://user:secret@host/a.tar"), "https://***@host/a.tar");
  EXPECT_EQ(RedactUrl("https://host/a.tar?X-Amz-Signature=abc"), "https://host/a.tar?***");
  EXPECT_EQ(RedactUrl("s3://bucket/key.tar"), "s3://bucket/key.tar");
  const std::vector<std::string> secrets = UrlSecrets("https://u:pw@host/a.tar?sig=xyz");
  EXPECT_EQ(secrets, (std::vector<std::string>{"u:pw", "sig=xyz"}));
  Error e{ErrorCode::kIo, "GET https://u:pw@host/a.tar?sig=xyz: HTTP 403", "check u:pw", {}};
  e = ScrubSecrets(e, secrets);
  EXPECT_EQ(e.message, "GET https://***@host/a.tar?***: HTTP 403");
  EXPECT_EQ(e.hint, "check ***");
}

TEST(ObjectStoreUrls, OpenPicksTheLocalStoreOrSaysWhy) {
  EXPECT_TRUE(OpenObjectStore("/tmp/x", {}).has_value());
  EXPECT_TRUE(OpenObjectStore("file:///tmp/x", {}).has_value());
  auto bad = OpenObjectStore("ftp://host/x", {});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  auto host = OpenObjectStore("file://otherhost/x", {});
  ASSERT_FALSE(host.has_value());
  EXPECT_EQ(host.error().code, ErrorCode::kInvalidArgument);
}

TEST(LocalStore, PathsOfFileUrls) {
  EXPECT_EQ(*LocalPathOf("file:///a/b%20c.tar"), "/a/b c.tar");
  EXPECT_EQ(*LocalPathOf("file://localhost/a"), "/a");
  EXPECT_EQ(*LocalPathOf("/plain/path"), "/plain/path");
  EXPECT_FALSE(LocalPathOf("file:relative").has_value());
}

TEST(LocalStore, StatReadStreamAndList) {
  TempDir dir;
  const std::string content = "0123456789abcdef";
  dir.Write("d/a.tar", content);
  dir.Write("d/b.tar", std::string("xy"));
  dir.Write("d/train-1.tar", std::string("z"));
  const std::string base = "file://" + (dir.path() / "d").string();
  LocalStore store;

  auto info = store.Stat(base + "/a.tar");
  ASSERT_TRUE(info.has_value()) << info.error().ToString();
  EXPECT_EQ(info->size, content.size());
  auto missing = store.Stat(base + "/none.tar");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("none.tar"), std::string::npos);

  std::vector<uint8_t> out(4);
  ASSERT_TRUE(store.ReadRange(base + "/a.tar", 10, 4, out.data()).has_value());
  EXPECT_EQ(std::string(out.begin(), out.end()), "abcd");
  auto past = store.ReadRange(base + "/a.tar", 14, 4, out.data());
  ASSERT_FALSE(past.has_value());
  EXPECT_EQ(past.error().code, ErrorCode::kCorruptData);

  std::string streamed;
  ASSERT_TRUE(store
                  .Stream(base + "/a.tar",
                          [&](const uint8_t* d, size_t n) {
                            streamed.append(reinterpret_cast<const char*>(d), n);
                            return Ok();
                          })
                  .has_value());
  EXPECT_EQ(streamed, content);

  auto all = store.List(base + "/");
  ASSERT_TRUE(all.has_value()) << all.error().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].url, base + "/a.tar");
  EXPECT_EQ((*all)[1].size, 2u);
  auto train = store.List(base + "/train-");
  ASSERT_TRUE(train.has_value());
  ASSERT_EQ(train->size(), 1u);
  EXPECT_EQ((*train)[0].url, base + "/train-1.tar");

  const RequestStats s = store.stats();
  EXPECT_EQ(s.requests, 3u);  // two range reads (one failed) and one stream
  EXPECT_EQ(s.failures, 1u);
  EXPECT_EQ(s.bytes_fetched, 4u + 2u + content.size());

  store.Cancel();
  auto cancelled = store.ReadRange(base + "/a.tar", 0, 4, out.data());
  ASSERT_FALSE(cancelled.has_value());
  EXPECT_EQ(cancelled.error().code, ErrorCode::kIo);
  EXPECT_NE(cancelled.error().message.find("cancelled"), std::string::npos);
}

}  // namespace
}  // namespace sluice::runtime::remote
