// URLs with a query string (presigned, SAS or token URLs) over HTTP: the
// query is no glob, is kept on every request, never enters an index, and is
// hidden in every message. Against a scripted loopback server
// (http_scripted_server.h) that records each request's target.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/remote/http_store.h"
#include "runtime/sources/tar/remote_index.h"
#include "tests/runtime/remote/http_scripted_server.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime::remote {
namespace {

using remote_testing::ScriptedReply;
using remote_testing::ScriptedRequest;
using remote_testing::ScriptedServer;

constexpr char kQuery[] = "?sv=1&sig=S3CRET%2Fx/y&se=2099";

// Serves /d/shard-0.tar and /d/shard-1.tar (8 bytes each), 404 otherwise.
ScriptedReply Serve(const ScriptedRequest& r) {
  const std::string path = r.target.substr(0, r.target.find('?'));
  if (path != "/d/shard-0.tar" && path != "/d/shard-1.tar") return {404, {}, "no"};
  return {200, {{"ETag", "\"e\""}}, "01234567"};
}

std::shared_ptr<ObjectStore> Open(const ScriptedServer& server) {
  RemoteOptions o;
  o.deadline_s = 10;
  o.hedge_delay_s = 0;
  auto store = OpenHttpStore(server.url(), o);
  EXPECT_TRUE(store) << store.error().ToString();
  return *store;
}

TEST(HttpQueryUrlTest, AQueryIsNoGlobAndGoesOnEveryRequest) {
  ScriptedServer server(Serve);
  auto store = Open(server);
  const std::string pattern = server.url() + "/d/shard-{0..1}.tar" + kQuery;
  auto found = tar::ResolveShardUrls(*store, pattern);
  ASSERT_TRUE(found) << found.error().ToString();
  ASSERT_EQ(found->size(), 2u);
  EXPECT_EQ((*found)[0].url, server.url() + "/d/shard-0.tar" + kQuery);
  EXPECT_EQ((*found)[1].size, 8u);
  auto bytes = tar::FetchObject(*store, (*found)[1].url);
  ASSERT_TRUE(bytes) << bytes.error().ToString();
  EXPECT_EQ(*bytes, "01234567");
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 4u);  // two HEADs, then a HEAD and a GET
  for (const ScriptedRequest& r : requests) {
    EXPECT_TRUE(r.target.ends_with(kQuery)) << r.method << " " << r.target;
  }
}

TEST(HttpQueryUrlTest, TheDirectoryAndSiblingsOfAUrlWithAQuery) {
  const std::string url = std::string("https://h/c/d/shard-0.tar") + kQuery;
  EXPECT_EQ(tar::UrlDirectory(url), "https://h/c/d");
  EXPECT_EQ(tar::SiblingUrl(url, "index.sluice"),
            std::string("https://h/c/d/index.sluice") + kQuery);
  EXPECT_EQ(tar::SiblingUrl("https://h/c/shard-0.tar", "manifest.json"),
            "https://h/c/manifest.json");
  // Not http(s): a '?' is part of the name (and a glob character).
  EXPECT_EQ(tar::UrlDirectory("s3://b/p?x/shard-0.tar"), "s3://b/p?x");
}

TEST(HttpQueryUrlTest, MessagesHideTheQuery) {
  ScriptedServer server(Serve);
  auto store = Open(server);
  auto missing = tar::ResolveShardUrls(*store, server.url() + "/d/shard-{0..2}.tar" + kQuery);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("/d/shard-2.tar?***"), std::string::npos)
      << missing.error().ToString();
  std::vector<uint8_t> out(4);
  auto listed = store->List(server.url() + "/d/" + kQuery);
  ASSERT_FALSE(listed);
  const std::vector<Error> errors = {
      store
          ->Stream(server.url() + "/d/nothing.tar" + kQuery,
                   [](const uint8_t*, size_t) { return Ok(); })
          .error(),
      store->ReadRange(server.url() + "/d/nothing.tar" + kQuery, 0, 4, out.data()).error(),
      listed.error()};
  for (const Error& e : errors) {
    EXPECT_EQ(e.ToString().find("S3CRET"), std::string::npos) << e.ToString();
    EXPECT_EQ(e.ToString().find("sv=1"), std::string::npos) << e.ToString();
    EXPECT_NE(e.ToString().find("?***"), std::string::npos) << e.ToString();
  }
}

// A HEAD's ETag, else its Last-Modified date, is the object's version (what
// tells a shard replaced by one of the same size from the old one).
TEST(HttpQueryUrlTest, StatGivesTheObjectsVersion) {
  ScriptedServer server([](const ScriptedRequest& r) -> ScriptedReply {
    if (r.target == "/etag.tar") return {200, {{"ETag", "\"v1\""}}, "0123"};
    if (r.target == "/dated.tar") {
      return {200, {{"Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT"}}, "0123"};
    }
    return {200, {}, "0123"};
  });
  auto store = Open(server);
  auto etag = store->Stat(server.url() + "/etag.tar");
  auto dated = store->Stat(server.url() + "/dated.tar");
  auto none = store->Stat(server.url() + "/none.tar");
  ASSERT_TRUE(etag && dated && none);
  EXPECT_EQ(etag->version, "\"v1\"");
  EXPECT_EQ(dated->version, "Last-Modified: Wed, 21 Oct 2015 07:28:00 GMT");
  EXPECT_EQ(none->version, "");
}

// A presigned or SAS URL signed anew for the next job finds the index the
// last job built: the cached index is named without the authentication.
TEST(HttpQueryUrlTest, ANewSignatureReusesTheCachedIndex) {
  ScriptedServer server(Serve);
  auto store = Open(server);
  testing::TempDir tmp;
  tar::IndexOptions options;
  options.cache_dir = tmp.path().string();
  options.quiet = true;
  bool built[2] = {};
  for (int job = 0; job < 2; ++job) {
    const std::string query = "?sv=1&se=2099&sig=JOB" + std::to_string(job);
    auto shards = tar::ResolveShardUrls(*store, server.url() + "/d/shard-{0..1}.tar" + query);
    ASSERT_TRUE(shards) << shards.error().ToString();
    auto index = tar::OpenRemoteShardIndex(*store, *shards, tar::FieldMapping{}, options);
    ASSERT_TRUE(index) << index.error().ToString();
    built[job] = index->built;
  }
  EXPECT_TRUE(built[0]);
  EXPECT_FALSE(built[1]);
}

}  // namespace
}  // namespace sluice::runtime::remote
