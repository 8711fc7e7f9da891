// How one HTTP attempt's answer is read (runtime/remote/http_request.cc): a 206
// is used from the byte asked for, whatever its Content-Range says. The fault
// proxy (tests/remote/fixtures/serve.py) forwards ranged requests asking for
// 100 bytes earlier (`early`) or later (`late`) than the client did, so the
// server's honest 206 starts elsewhere. ctest label `remote`.
#include "runtime/remote/http_request.h"

#include <gtest/gtest.h>

#include "tests/runtime/remote/http_store_fixture.h"

namespace sluice::runtime::remote {
namespace {

using namespace remote_testing;

std::vector<uint8_t> Slice(const std::vector<uint8_t>& blob, uint64_t offset, uint64_t length) {
  return {blob.begin() + static_cast<std::ptrdiff_t>(offset),
          blob.begin() + static_cast<std::ptrdiff_t>(offset + length)};
}

Result<std::vector<uint8_t>> StreamAll(ObjectStore& store, const std::string& url) {
  std::vector<uint8_t> out;
  Status st = store.Stream(url, [&](const uint8_t* p, size_t n) {
    out.insert(out.end(), p, p + n);
    return Ok();
  });
  if (!st) return std::unexpected(st.error());
  return out;
}

class HttpRequestTest : public HttpStoreTest {};

TEST_F(HttpRequestTest, ARangeAnsweredFromAnEarlierByteIsTrimmedToTheBytesAskedFor) {
  ServerProcess& http = Http();
  ASSERT_FALSE(HasFailure());
  ServerProcess proxy;
  START_SERVER(proxy, "proxy", "--upstream", std::to_string(http.port()), "--fault", "early:1:0");
  auto store = Open(proxy.url(), Fast());
  const std::string url = proxy.url() + "/data/blob.bin";
  for (auto [offset, length] : {std::pair<uint64_t, uint64_t>{5000, 3000}, {50, 10}, {0, 7}}) {
    std::vector<uint8_t> got(length);
    auto st = store->ReadRange(url, offset, length, got.data());
    ASSERT_TRUE(st) << st.error().ToString();
    EXPECT_EQ(got, Slice(*blob_, offset, length)) << "range " << offset << "+" << length;
  }
  EXPECT_EQ(store->stats().retries, 0u);
}

TEST_F(HttpRequestTest, ARangeAnsweredFromALaterByteIsNeverUsed) {
  ServerProcess& http = Http();
  ASSERT_FALSE(HasFailure());
  ServerProcess proxy;
  START_SERVER(proxy, "proxy", "--upstream", std::to_string(http.port()), "--fault", "late:1:0");
  RemoteOptions o = Fast();
  o.max_retries = 2;
  auto store = Open(proxy.url(), o);
  std::vector<uint8_t> got(3000);
  auto st = store->ReadRange(proxy.url() + "/data/blob.bin", 5000, got.size(), got.data());
  ASSERT_FALSE(st) << "a range that starts 100 bytes late was used";
  EXPECT_EQ(st.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(st.error().message.find("Content-Range starting at byte 5100"), std::string::npos)
      << st.error().message;
  EXPECT_EQ(store->stats().retries, 2u);
  EXPECT_EQ(store->stats().failures, 1u);
}

// RFC 9110 requires a 206 to say which bytes it holds; one that does not is
// not trusted to hold the bytes asked for.
TEST_F(HttpRequestTest, ARangeAnsweredWithoutContentRangeIsNeverUsed) {
  ServerProcess& http = Http();
  ASSERT_FALSE(HasFailure());
  ServerProcess proxy;
  START_SERVER(proxy, "proxy", "--upstream", std::to_string(http.port()), "--fault", "nocr:1:0");
  RemoteOptions o = Fast();
  o.max_retries = 1;
  auto store = Open(proxy.url(), o);
  std::vector<uint8_t> got(3000);
  auto st = store->ReadRange(proxy.url() + "/data/blob.bin", 5000, got.size(), got.data());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(st.error().message.find("without a Content-Range"), std::string::npos)
      << st.error().message;
  EXPECT_EQ(store->stats().retries, 1u);
}

TEST_F(HttpRequestTest, ALateRangeIsRetriedAndTheRetryGivesTheRightBytes) {
  ServerProcess& http = Http();
  ASSERT_FALSE(HasFailure());
  ServerProcess proxy;
  START_SERVER(proxy, "proxy", "--upstream", std::to_string(http.port()), "--fault", "late:2:0");
  auto store = Open(proxy.url(), Fast());
  std::vector<uint8_t> got(3000);
  auto st = store->ReadRange(proxy.url() + "/data/blob.bin", 5000, got.size(), got.data());
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_EQ(got, Slice(*blob_, 5000, got.size()));
  EXPECT_EQ(store->stats().retries, 1u);
}

// A stream cut off half-way is resumed with `Range: bytes=N-`; an answer to
// that from an earlier byte is trimmed, one from a later byte is retried: the
// streamed object is exact either way, never spliced with a gap or a repeat.
TEST_F(HttpRequestTest, AResumedStreamIsExactWhateverByteItsAnswerStartsAt) {
  ServerProcess& http = Http();
  ASSERT_FALSE(HasFailure());
  for (const char* resume_fault : {"early:3:1", "late:3:1"}) {
    ServerProcess proxy;
    START_SERVER(proxy, "proxy", "--upstream", std::to_string(http.port()), "--fault",
                 "truncate:3:0", "--fault", resume_fault);
    auto store = Open(proxy.url(), Fast());
    auto streamed = StreamAll(*store, proxy.url() + "/data/blob.bin");
    ASSERT_TRUE(streamed) << resume_fault << ": " << streamed.error().ToString();
    EXPECT_TRUE(*streamed == *blob_) << resume_fault << ": " << streamed->size() << " bytes";
  }
}

}  // namespace
}  // namespace sluice::runtime::remote
