// How one HTTP attempt's answer is read (runtime/remote/http_request.cc): a 206
// is used from the byte asked for, whatever its Content-Range says. The fault
// proxy (tests/remote/fixtures/serve.py) forwards ranged requests asking for
// 100 bytes earlier (`early`) or later (`late`) than the client did, so the
// server's honest 206 starts elsewhere, or strips its Content-Range (`nocr`).
// ctest label `remote`.
#include "runtime/remote/http_request.h"

#include <gtest/gtest.h>

#include "runtime/sources/tar_shards_source.h"
#include "tests/runtime/remote/http_store_fixture.h"

namespace sluice::runtime::remote {
namespace {

using namespace remote_testing;

std::vector<uint8_t> Slice(const std::vector<uint8_t>& blob, uint64_t offset, uint64_t length) {
  return {blob.begin() + static_cast<std::ptrdiff_t>(offset),
          blob.begin() + static_cast<std::ptrdiff_t>(offset + length)};
}

class HttpRequestTest : public HttpStoreTest {};

TEST_F(HttpRequestTest, ARangeAnsweredFromAnEarlierByteIsTrimmedToTheBytesAskedFor) {
  ServerProcess* proxy = ProxyToHttp({"--fault", "early:1:0"});
  ASSERT_NE(proxy, nullptr);
  auto store = Open(proxy->url(), Fast());
  const std::string url = proxy->url() + "/data/blob.bin";
  for (auto [offset, length] : {std::pair<uint64_t, uint64_t>{5000, 3000}, {50, 10}, {0, 7}}) {
    std::vector<uint8_t> got(length);
    auto st = store->ReadRange(url, offset, length, got.data());
    ASSERT_TRUE(st) << st.error().ToString();
    EXPECT_EQ(got, Slice(*blob_, offset, length)) << "range " << offset << "+" << length;
  }
  EXPECT_EQ(store->stats().retries, 0u);
}

// A 206 that lacks the first bytes asked for (its Content-Range starts later)
// or does not say which bytes it holds (no Content-Range, which RFC 9110
// requires) is never used: retried, then kCorruptData saying why.
TEST_F(HttpRequestTest, ARangeNotStartingAtTheByteAskedForIsNeverUsed) {
  struct Case {
    const char* fault;
    int max_retries;
    const char* why;
  };
  for (const Case& c : {Case{"late:1:0", 2, "Content-Range starting at byte 5100"},
                        Case{"nocr:1:0", 1, "without a Content-Range"}}) {
    ServerProcess* proxy = ProxyToHttp({"--fault", c.fault});
    ASSERT_NE(proxy, nullptr);
    RemoteOptions o = Fast();
    o.max_retries = c.max_retries;
    auto store = Open(proxy->url(), o);
    std::vector<uint8_t> got(3000);
    auto st = store->ReadRange(proxy->url() + "/data/blob.bin", 5000, got.size(), got.data());
    ASSERT_FALSE(st) << c.fault << ": a range not starting at byte 5000 was used";
    EXPECT_EQ(st.error().code, ErrorCode::kCorruptData) << c.fault;
    EXPECT_NE(st.error().message.find(c.why), std::string::npos) << st.error().message;
    EXPECT_EQ(store->stats().retries, static_cast<uint64_t>(c.max_retries)) << c.fault;
    EXPECT_EQ(store->stats().failures, 1u) << c.fault;
  }
}

TEST_F(HttpRequestTest, ALateRangeIsRetriedAndTheRetryGivesTheRightBytes) {
  ServerProcess* proxy = ProxyToHttp({"--fault", "late:2:0"});
  ASSERT_NE(proxy, nullptr);
  auto store = Open(proxy->url(), Fast());
  std::vector<uint8_t> got(3000);
  auto st = store->ReadRange(proxy->url() + "/data/blob.bin", 5000, got.size(), got.data());
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_EQ(got, Slice(*blob_, 5000, got.size()));
  EXPECT_EQ(store->stats().retries, 1u);
}

// A stream cut off half-way is resumed with `Range: bytes=N-`; an answer to
// that from an earlier byte is trimmed, one from a later byte is retried: the
// streamed object is exact either way, never spliced with a gap or a repeat.
TEST_F(HttpRequestTest, AResumedStreamIsExactWhateverByteItsAnswerStartsAt) {
  for (const char* resume_fault : {"early:3:1", "late:3:1"}) {
    ServerProcess* proxy = ProxyToHttp({"--fault", "truncate:3:0", "--fault", resume_fault});
    ASSERT_NE(proxy, nullptr);
    auto store = Open(proxy->url(), Fast());
    std::vector<uint8_t> streamed;
    auto st = StreamInto(*store, proxy->url() + "/data/blob.bin", streamed);
    ASSERT_TRUE(st) << resume_fault << ": " << st.error().ToString();
    EXPECT_TRUE(streamed == *blob_) << resume_fault << ": " << streamed.size() << " bytes";
  }
}

// S3 without s3:ListBucket (and CloudFront) answer a missing key with 403:
// the optional manifest.json beside the shards is then read as absent (a
// warning names it), not a failed open. The proxy's hide404 fault answers
// every upstream 404 with 403.
TEST_F(HttpRequestTest, AnOptionalManifestAnswered403IsTakenAsMissing) {
  ServerProcess* proxy = ProxyToHttp({"--fault", "hide404:1:0"});
  ASSERT_NE(proxy, nullptr);
  const fs::path dir = *root_ / "no_manifest";
  fs::create_directories(dir);
  { std::ofstream(dir / "000.jpg") << "not really a jpeg"; }
  { std::ofstream(dir / "000.cls") << "3"; }
  const std::string tar =
      "tar -C '" + dir.string() + "' -cf '" + dir.string() + "/shard-000000.tar' 000.jpg 000.cls";
  ASSERT_EQ(std::system(tar.c_str()), 0);
  const fs::path cache = *root_ / "no_manifest_index_cache";
  TarShardOptions o;
  o.path = proxy->url() + "/no_manifest/shard-000000.tar";
  o.store = Open(proxy->url(), Fast());
  o.index.cache_dir = cache.string();
  o.read.read_ahead = 1;
  auto manifest = o.store->Stat(proxy->url() + "/no_manifest/manifest.json");
  ASSERT_FALSE(manifest);
  ASSERT_NE(manifest.error().message.find("HTTP 403"), std::string::npos)
      << manifest.error().message;
  auto src = TarShardSource::Open(o);
  ASSERT_TRUE(src) << src.error().ToString();
  EXPECT_EQ((*src)->size(), 1u);
  EXPECT_TRUE((*src)->class_names().empty());
}

}  // namespace
}  // namespace sluice::runtime::remote
