// What is hedged: small range reads are; ranges over kMaxHedgedRangeBytes and
// whole-object fetches (an index, a manifest) are not, so a slow server never
// makes them download several times. Against a scripted loopback server
// (http_scripted_server.h) that answers every GET slowly and counts them.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/remote/http_store.h"
#include "runtime/sources/tar/remote_index.h"
#include "tests/runtime/remote/http_scripted_server.h"

namespace sluice::runtime::remote {
namespace {

using remote_testing::ScriptedReply;
using remote_testing::ScriptedRequest;
using remote_testing::ScriptedServer;

constexpr size_t kSize = (3 << 20) + 123;  // over kMaxHedgedRangeBytes

std::string Bytes(size_t n) {
  std::mt19937 rng(7);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Serves `body` with ranges; every GET waits `delay_s` before answering.
ScriptedServer::Handler Slow(const std::string& body, double delay_s) {
  return [=](const ScriptedRequest& r) {
    ScriptedReply reply{200, {{"ETag", "\"e\""}}, body};
    const std::string range = r.Header("range");
    if (!range.empty()) {
      const size_t dash = range.find('-');
      const size_t first = std::stoul(range.substr(6, dash - 6));
      const size_t last =
          dash + 1 < range.size() ? std::stoul(range.substr(dash + 1)) : body.size() - 1;
      reply.status = 206;
      reply.body = body.substr(first, last - first + 1);
      reply.headers.emplace_back("Content-Range", "bytes " + std::to_string(first) + "-" +
                                                      std::to_string(last) + "/" +
                                                      std::to_string(body.size()));
    }
    if (r.method == "GET") reply.delay_s = delay_s;
    return reply;
  };
}

std::shared_ptr<ObjectStore> Open(const ScriptedServer& server) {
  RemoteOptions o;
  o.deadline_s = 20;
  o.hedge_delay_s = 0.05;  // every slow GET would be hedged twice
  auto store = OpenHttpStore(server.url(), o);
  EXPECT_TRUE(store) << store.error().ToString();
  return *store;
}

TEST(HttpStoreHedgeTest, ASmallRangeIsHedged) {
  const std::string body = Bytes(kSize);
  ScriptedServer server(Slow(body, 0.4));
  auto store = Open(server);
  std::vector<uint8_t> out(64 << 10);
  ASSERT_TRUE(store->ReadRange(server.url() + "/o", 1000, out.size(), out.data()));
  EXPECT_EQ(std::memcmp(out.data(), body.data() + 1000, out.size()), 0);
  EXPECT_GE(store->stats().hedges, 1u);
}

TEST(HttpStoreHedgeTest, ARangeOverTheBoundIsNotHedged) {
  const std::string body = Bytes(kSize);
  ScriptedServer server(Slow(body, 0.4));
  auto store = Open(server);
  std::vector<uint8_t> out(kMaxHedgedRangeBytes + 1);
  ASSERT_TRUE(store->ReadRange(server.url() + "/o", 5, out.size(), out.data()));
  EXPECT_EQ(std::memcmp(out.data(), body.data() + 5, out.size()), 0);
  EXPECT_EQ(store->stats().hedges, 0u);
  EXPECT_EQ(server.count("GET"), 1u);
  EXPECT_EQ(server.body_bytes_sent(), out.size());
}

TEST(HttpStoreHedgeTest, AWholeObjectFetchIsNotHedged) {
  const std::string body = Bytes(kSize);
  ScriptedServer server(Slow(body, 0.4));
  auto store = Open(server);
  auto fetched = tar::FetchObject(*store, server.url() + "/index.sluice");
  ASSERT_TRUE(fetched) << fetched.error().ToString();
  EXPECT_TRUE(*fetched == body);
  EXPECT_EQ(store->stats().hedges, 0u);
  EXPECT_EQ(server.count("HEAD"), 1u);
  EXPECT_EQ(server.count("GET"), 1u);
  EXPECT_EQ(server.body_bytes_sent(), body.size());  // downloaded once
}

}  // namespace
}  // namespace sluice::runtime::remote
