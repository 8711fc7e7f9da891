// A whole-object stream broken part-way is resumed only when the resumed
// response provably sends the version the stream started with (ETag, else
// Last-Modified through If-Range): against a scripted loopback server
// (http_scripted_server.h) that swaps the object between the two responses.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "runtime/remote/http_store.h"
#include "tests/runtime/remote/http_scripted_server.h"

namespace sluice::runtime::remote {
namespace {

using remote_testing::ScriptedReply;
using remote_testing::ScriptedRequest;
using remote_testing::ScriptedServer;

constexpr size_t kSize = 1 << 20;
constexpr char kDate[] = "Wed, 21 Oct 2015 07:28:00 GMT";

std::string Bytes(uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(kSize, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// The first byte of a "bytes=N-" range; 0 without one.
size_t RangeStart(const ScriptedRequest& r) {
  const std::string range = r.Header("range");
  return range.empty() ? 0 : std::stoul(range.substr(6));
}

// The first GET sends `first` with `validators`, cut off half-way (a TCP
// reset); a resumed GET (a Range) gets resumed(request).
ScriptedServer::Handler BreaksThen(std::string first,
                                   std::vector<std::pair<std::string, std::string>> validators,
                                   std::function<ScriptedReply(const ScriptedRequest&)> resumed) {
  return [=](const ScriptedRequest& r) {
    if (!r.Header("range").empty()) return resumed(r);
    ScriptedReply reply{200, validators, first};
    reply.send_bytes = kSize / 2;
    return reply;
  };
}

ScriptedReply Partial(const std::string& body, size_t start,
                      std::vector<std::pair<std::string, std::string>> headers) {
  headers.emplace_back("Content-Range", "bytes " + std::to_string(start) + "-" +
                                            std::to_string(body.size() - 1) + "/" +
                                            std::to_string(body.size()));
  return ScriptedReply{206, std::move(headers), body.substr(start)};
}

std::shared_ptr<ObjectStore> Open(const ScriptedServer& server) {
  RemoteOptions o;
  o.deadline_s = 10;
  o.backoff_initial_s = 0.005;
  o.backoff_max_s = 0.02;
  o.hedge_delay_s = 0;
  auto store = OpenHttpStore(server.url(), o);
  EXPECT_TRUE(store) << store.error().ToString();
  return *store;
}

Status StreamInto(ObjectStore& store, const std::string& url, std::string& out) {
  return store.Stream(url, [&](const uint8_t* p, size_t n) {
    out.append(reinterpret_cast<const char*>(p), n);
    return Ok();
  });
}

// What the sink got is a prefix of `v1` (never a byte of another version).
void ExpectPrefixOf(const std::string& got, const std::string& v1) {
  EXPECT_GT(got.size(), 0u);
  EXPECT_LE(got.size(), kSize / 2);
  EXPECT_TRUE(v1.compare(0, got.size(), got) == 0) << "the sink got bytes of another version";
}

TEST(HttpStoreResumeTest, AResumeAnsweredWithAnotherETagUsesNoneOfItsBytes) {
  const std::string v1 = Bytes(1), v2 = Bytes(2);
  // A server that ignores If-Match: the resumed 206 comes from a new version.
  ScriptedServer server(BreaksThen(v1, {{"ETag", "\"abc\""}}, [&](const ScriptedRequest& r) {
    return Partial(v2, RangeStart(r), {{"ETag", "\"v2\""}});
  }));
  auto store = Open(server);
  std::string got;
  Status st = StreamInto(*store, server.url() + "/shard.tar", got);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kCorruptData) << st.error().ToString();
  EXPECT_NE(st.error().message.find("changed while it was being read"), std::string::npos)
      << st.error().ToString();
  EXPECT_NE(st.error().message.find(server.url() + "/shard.tar"), std::string::npos);
  ExpectPrefixOf(got, v1);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);  // a changed object is not retried
  EXPECT_EQ(requests[1].Header("if-match"), "\"abc\"");
  EXPECT_EQ(RangeStart(requests[1]), got.size());
  EXPECT_EQ(store->stats().failures, 1u);
}

TEST(HttpStoreResumeTest, AResumeAnsweredWithTheSameETagCompletesTheObject) {
  const std::string v1 = Bytes(3);
  ScriptedServer server(BreaksThen(v1, {{"ETag", "\"abc\""}}, [&](const ScriptedRequest& r) {
    return Partial(v1, RangeStart(r), {{"ETag", "\"abc\""}});
  }));
  auto store = Open(server);
  std::string got;
  Status st = StreamInto(*store, server.url() + "/shard.tar", got);
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_TRUE(got == v1);
  EXPECT_EQ(server.count("GET"), 2u);
}

TEST(HttpStoreResumeTest, WithOnlyLastModifiedTheResumeAsksIfRange) {
  const std::string v1 = Bytes(4);
  ScriptedServer server(BreaksThen(v1, {{"Last-Modified", kDate}}, [&](const ScriptedRequest& r) {
    // Unchanged (If-Range matches): the rest of the same version.
    if (r.Header("if-range") == kDate)
      return Partial(v1, RangeStart(r), {{"Last-Modified", kDate}});
    return ScriptedReply{200, {{"Last-Modified", kDate}}, v1};
  }));
  auto store = Open(server);
  std::string got;
  Status st = StreamInto(*store, server.url() + "/shard.tar", got);
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_TRUE(got == v1);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].Header("if-range"), kDate);
  EXPECT_EQ(requests[1].Header("if-match"), "");
}

TEST(HttpStoreResumeTest, AnIfRangeAnsweredWithTheWholeObjectUsesNoneOfIt) {
  const std::string v1 = Bytes(5), v2 = Bytes(6);
  // The object changed: If-Range fails and the server sends the whole new one.
  ScriptedServer server(BreaksThen(v1, {{"Last-Modified", kDate}}, [&](const ScriptedRequest&) {
    return ScriptedReply{200, {{"Last-Modified", "Thu, 22 Oct 2015 07:28:00 GMT"}}, v2};
  }));
  auto store = Open(server);
  std::string got;
  Status st = StreamInto(*store, server.url() + "/shard.tar", got);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kCorruptData) << st.error().ToString();
  EXPECT_NE(st.error().message.find("changed while it was being read"), std::string::npos)
      << st.error().ToString();
  ExpectPrefixOf(got, v1);
  EXPECT_EQ(server.count("GET"), 2u);
}

TEST(HttpStoreResumeTest, WithoutValidatorsABrokenStreamIsNotResumed) {
  const std::string v1 = Bytes(7), v2 = Bytes(8);
  ScriptedServer server(
      BreaksThen(v1, {}, [&](const ScriptedRequest& r) { return Partial(v2, RangeStart(r), {}); }));
  auto store = Open(server);
  std::string got;
  Status st = StreamInto(*store, server.url() + "/shard.tar", got);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("neither an ETag nor a Last-Modified"), std::string::npos)
      << st.error().ToString();
  ExpectPrefixOf(got, v1);
  EXPECT_EQ(server.count("GET"), 1u);
}

TEST(HttpStoreResumeTest, AStreamThatFailsBeforeItsFirstByteStartsAgainWithoutValidators) {
  const std::string v1 = Bytes(9);
  int calls = 0;
  ScriptedServer server([&](const ScriptedRequest&) {
    if (calls++ == 0) return ScriptedReply{503, {}, "busy"};
    return ScriptedReply{200, {}, v1};
  });
  auto store = Open(server);
  std::string got;
  Status st = StreamInto(*store, server.url() + "/shard.tar", got);
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_TRUE(got == v1);
}

}  // namespace
}  // namespace sluice::runtime::remote
