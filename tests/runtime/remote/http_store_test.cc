// The HTTP(S)/S3 store against real servers on loopback, started from
// tests/remote/fixtures/serve.py (http_store_fixture.h): Python's http.server
// with ranges, moto's S3 with IAM authentication on, and the fault-injecting
// proxy. ctest label `remote`.
#include "runtime/remote/http_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "tests/runtime/remote/http_store_fixture.h"

namespace sluice::runtime::remote {
namespace {

using namespace remote_testing;

// Reads `reads` ranges of `length` bytes of blob.bin at `url` from each of
// `threads` threads at once (offsets spread over the blob); the number of
// reads that failed or returned other bytes than `blob`.
int BadConcurrentReads(ObjectStore& store, const std::string& url, const std::vector<uint8_t>& blob,
                       int threads, int reads, uint64_t length) {
  std::vector<std::thread> pool;
  std::atomic<int> bad{0};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < reads; ++i) {
        const uint64_t offset =
            static_cast<uint64_t>(t * 100003 + i * 7919) % (blob.size() - length);
        std::vector<uint8_t> got(length);
        auto st = store.ReadRange(url, offset, length, got.data());
        if (!st || !std::equal(got.begin(), got.end(), blob.begin() + offset)) ++bad;
      }
    });
  }
  for (auto& t : pool) t.join();
  return bad.load();
}

TEST_F(HttpStoreTest, HttpRangeReadsAndStreamMatchTheFile) {
  ServerProcess& http = Http();
  ASSERT_FALSE(HasFailure());
  auto store = Open(http.url(), Fast());
  ExpectSameBytes(*store, http.url() + "/data/blob.bin");
  // Many threads at once over the shared connection pool.
  EXPECT_EQ(BadConcurrentReads(*store, http.url() + "/data/blob.bin", *blob_, 8, 20, 5000), 0);
  const RequestStats s = store->stats();
  EXPECT_EQ(s.retries, 0u);
  EXPECT_EQ(s.failures, 0u);
  EXPECT_GE(s.requests, 160u + 7u);
  EXPECT_GT(s.latency_p50_s, 0);
  EXPECT_GE(s.latency_p99_s, s.latency_p50_s);
}

TEST_F(HttpStoreTest, HttpHasNoListingAndRangesPastTheEndAreCorrupt) {
  ServerProcess& http = Http();
  ASSERT_FALSE(HasFailure());
  auto store = Open(http.url(), Fast());
  auto list = store->List(http.url() + "/many/");
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(list.error().hint.find("brace pattern"), std::string::npos);
  const std::string url = http.url() + "/data/blob.bin";
  std::vector<uint8_t> buf(100);
  auto st = store->ReadRange(url, kBlobSize - 10, 20, buf.data());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kCorruptData) << st.error().ToString();
  st = store->ReadRange(url, kBlobSize + 5, 20, buf.data());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kCorruptData) << st.error().ToString();
  EXPECT_EQ(store->stats().retries, 0u);
}

TEST_F(HttpStoreTest, HttpNotFoundFailsFastWithAHint) {
  ServerProcess& http = Http();
  ASSERT_FALSE(HasFailure());
  auto store = Open(http.url(), Fast());
  const std::string url = http.url() + "/data/missing.bin";
  auto info = store->Stat(url);
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().code, ErrorCode::kNotFound);
  EXPECT_NE(info.error().message.find(url), std::string::npos) << info.error().message;
  EXPECT_NE(info.error().message.find("404"), std::string::npos) << info.error().message;
  EXPECT_FALSE(info.error().hint.empty());
  std::vector<uint8_t> buf(10);
  EXPECT_EQ(store->ReadRange(url, 0, 10, buf.data()).error().code, ErrorCode::kNotFound);
  const RequestStats s = store->stats();
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.retries, 0u);
  // The GET failed; the HEAD only learned that the object is absent (as when
  // the optional index or manifest is probed).
  EXPECT_EQ(s.failures, 1u);
}

TEST_F(HttpStoreTest, FlakyProxyGivesTheSameBytesWithRetriesCounted) {
  ServerProcess* proxy = ProxyToHttp({"--fault", "503:3:0", "--fault", "reset:5:1", "--fault",
                                      "truncate:7:2", "--fault", "429:11:4"});
  ASSERT_NE(proxy, nullptr);
  auto store = Open(proxy->url(), Fast());
  ExpectSameBytes(*store, proxy->url() + "/data/blob.bin");
  const RequestStats s = store->stats();
  EXPECT_GT(s.retries, 0u);
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(s.requests, 7u + s.retries);  // Stat, 5 ranges, 1 stream, plus one per retry
}

TEST_F(HttpStoreTest, SlowSinkPausesTheStreamWithoutLosingBytes) {
  ServerProcess& http = Http();
  ASSERT_FALSE(HasFailure());
  auto store = Open(http.url(), Fast());
  std::vector<uint8_t> streamed;
  auto st = store->Stream(http.url() + "/data/big.bin", [&](const uint8_t* p, size_t n) {
    // Stall on the first chunk: the transfer fills its queue and pauses.
    if (streamed.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    streamed.insert(streamed.end(), p, p + n);
    return Ok();
  });
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_TRUE(streamed == *big_) << streamed.size();
  EXPECT_EQ(store->stats().requests, 1u);
  // A sink error stops the stream and is returned as it is.
  size_t seen = 0;
  st = store->Stream(http.url() + "/data/big.bin", [&](const uint8_t*, size_t n) {
    seen += n;
    return seen > 1000000 ? Status(MakeError(ErrorCode::kInvalidArgument, "enough")) : Ok();
  });
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "enough");
}

TEST_F(HttpStoreTest, BrokenStreamResumesFromTheFirstUndeliveredByte) {
  // Every even request is cut off half-way.
  ServerProcess* proxy = ProxyToHttp({"--fault", "truncate:2:0"});
  ASSERT_NE(proxy, nullptr);
  auto store = Open(proxy->url(), Fast());
  std::vector<uint8_t> streamed;
  auto st = StreamInto(*store, proxy->url() + "/data/blob.bin", streamed);
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_TRUE(streamed == *blob_) << streamed.size();
  const RequestStats s = store->stats();
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.retries, 1u);
  // Resumed, not restarted: about one object's bytes in all.
  EXPECT_LT(s.bytes_fetched, kBlobSize + kBlobSize / 4);
}

// Streams `url` into `out` and says how long the call took, in seconds.
Status TimedStream(ObjectStore& store, const std::string& url, std::vector<uint8_t>& out,
                   double& seconds) {
  const auto start = std::chrono::steady_clock::now();
  Status st = StreamInto(store, url, out);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return st;
}

TEST_F(HttpStoreTest, StalledStreamIsRetriedFromTheFirstUndeliveredByte) {
  // Every even request sends half its body, then nothing while it stays open.
  ServerProcess* proxy = ProxyToHttp({"--fault", "stall:2:0"});
  ASSERT_NE(proxy, nullptr);
  RemoteOptions o = Fast();
  o.deadline_s = 20;
  o.stall_timeout_s = 0.3;
  auto store = Open(proxy->url(), o);
  std::vector<uint8_t> streamed;
  double took = 0;
  auto st = TimedStream(*store, proxy->url() + "/data/blob.bin", streamed, took);
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_TRUE(streamed == *blob_) << streamed.size();
  EXPECT_LT(took, 10.0);  // the stall, not the 20 s deadline, ended the first attempt
  const RequestStats s = store->stats();
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.retries, 1u);
  EXPECT_EQ(s.timeouts, 1u);
  EXPECT_LT(s.bytes_fetched, kBlobSize + kBlobSize / 4);  // resumed, not restarted
}

// The object is replaced (same size, new bytes) while its stream is stalled:
// the resume sends the first response's ETag as If-Match and the server's 412
// fails the stream as changed, instead of splicing two versions.
TEST_F(HttpStoreTest, AnObjectReplacedDuringAStalledStreamFailsAsChanged) {
  const fs::path file = *root_ / "data" / "replaced.bin";
  const std::vector<uint8_t> before = RandomBytes(kBlobSize, 21);
  WriteFile(file, before);
  // Every even request sends half its body, then nothing while it stays open.
  ServerProcess* proxy = ProxyToHttp({"--fault", "stall:2:0"});
  ASSERT_NE(proxy, nullptr);
  RemoteOptions o = Fast();
  o.deadline_s = 20;
  o.stall_timeout_s = 1.0;
  auto store = Open(proxy->url(), o);
  std::atomic<bool> first_bytes{false};
  auto stream = std::async(std::launch::async, [&] {
    return store->Stream(proxy->url() + "/data/replaced.bin", [&](const uint8_t*, size_t) {
      first_bytes = true;
      return Ok();
    });
  });
  for (int i = 0; i < 1000 && !first_bytes; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(first_bytes);
  WriteFile(file, RandomBytes(kBlobSize, 22));  // replaced during the stall
  const auto later = fs::last_write_time(file) + std::chrono::seconds(2);
  fs::last_write_time(file, later);  // a new ETag even on a coarse clock
  Status st = stream.get();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kCorruptData) << st.error().ToString();
  EXPECT_NE(st.error().message.find("changed"), std::string::npos) << st.error().ToString();
  EXPECT_NE(st.error().message.find("412"), std::string::npos) << st.error().ToString();
}

TEST_F(HttpStoreTest, WithoutStallDetectionAStalledStreamRunsToTheDeadline) {
  ServerProcess* proxy = ProxyToHttp({"--fault", "stall:1:0"});
  ASSERT_NE(proxy, nullptr);
  RemoteOptions o = Fast();
  o.deadline_s = 1.5;
  o.stall_timeout_s = 0;
  auto store = Open(proxy->url(), o);
  std::vector<uint8_t> streamed;
  double took = 0;
  auto st = TimedStream(*store, proxy->url() + "/data/blob.bin", streamed, took);
  ASSERT_FALSE(st);
  EXPECT_GE(took, 1.4);
  EXPECT_LT(took, 6.0);
  EXPECT_EQ(store->stats().requests, 1u);
}

TEST_F(HttpStoreTest, StalledRequestIsHedged) {
  // Request 0 (the first attempt) stalls for 30 s; request 1 (the hedge) does not.
  ServerProcess* proxy = ProxyToHttp({"--fault", "delay:2:0", "--delay-s", "30"});
  ASSERT_NE(proxy, nullptr);
  RemoteOptions o = Fast();
  o.hedge_delay_s = 0.05;
  auto store = Open(proxy->url(), o);
  std::vector<uint8_t> got(65536);
  auto st = store->ReadRange(proxy->url() + "/data/blob.bin", 1000, got.size(), got.data());
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_TRUE(std::equal(got.begin(), got.end(), blob_->begin() + 1000));
  const RequestStats s = store->stats();
  EXPECT_EQ(s.hedges, 1u);
  EXPECT_EQ(s.hedge_wins, 1u);
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.retries, 0u);
}

TEST_F(HttpStoreTest, AHedgeThatStallsTooIsHedgedAgain) {
  // Requests 0 (the first attempt) and 1 (the first hedge) stall for 60 s,
  // beyond the 10 s deadline and with no retries: the read succeeds only if
  // a second hedge (request 2) answers for it.
  ServerProcess* proxy =
      ProxyToHttp({"--fault", "delay:1000:0", "--fault", "delay:1000:1", "--delay-s", "60"});
  ASSERT_NE(proxy, nullptr);
  RemoteOptions o = Fast();
  o.hedge_delay_s = 0.05;
  o.deadline_s = 10;
  o.max_retries = 0;
  auto store = Open(proxy->url(), o);
  std::vector<uint8_t> got(65536);
  auto st = store->ReadRange(proxy->url() + "/data/blob.bin", 1000, got.size(), got.data());
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_TRUE(std::equal(got.begin(), got.end(), blob_->begin() + 1000));
  const RequestStats s = store->stats();
  EXPECT_EQ(s.hedges, static_cast<uint64_t>(kMaxHedges));
  EXPECT_EQ(s.hedge_wins, 1u);
  EXPECT_EQ(s.requests, 3u);
}

TEST_F(HttpStoreTest, AutoHedgeDelayFollowsObservedLatency) {
  // Request 25 stalls for 60 s, beyond the 10 s deadline: the read that meets
  // it succeeds only if a hedge answers for it.
  ServerProcess* proxy = ProxyToHttp({"--fault", "delay:1000:25", "--delay-s", "60"});
  ASSERT_NE(proxy, nullptr);
  RemoteOptions o = Fast();
  o.hedge_delay_s = -1;  // auto: the p95 of the reads so far
  o.deadline_s = 10;
  o.max_retries = 0;
  auto store = Open(proxy->url(), o);
  std::vector<uint8_t> got(4096);
  for (int i = 0; i < 30; ++i) {
    auto st = store->ReadRange(proxy->url() + "/data/blob.bin", i * 4096, got.size(), got.data());
    ASSERT_TRUE(st) << "read " << i << ": " << st.error().ToString();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), blob_->begin() + i * 4096));
  }
  EXPECT_GE(store->stats().hedges, 1u);
}

TEST_F(HttpStoreTest, AutoHedgeBeforeTwentyRangeReadsFollowsTheCallsSoFar) {
  // Request 10 (the second range read, after 8 HEADs) stalls beyond the
  // 1.9 s deadline: it succeeds only if it is hedged before the 2 s a store
  // without any history would wait.
  ServerProcess* proxy = ProxyToHttp({"--fault", "delay:1000:9", "--delay-s", "60"});
  ASSERT_NE(proxy, nullptr);
  RemoteOptions o = Fast();
  o.hedge_delay_s = -1;
  o.deadline_s = 1.9;
  o.max_retries = 0;
  auto store = Open(proxy->url(), o);
  for (int i = 0; i < 8; ++i) {
    auto info = store->Stat(proxy->url() + "/data/blob.bin");
    ASSERT_TRUE(info) << info.error().ToString();
  }
  std::vector<uint8_t> got(4096);
  for (int i = 0; i < 2; ++i) {
    auto st = store->ReadRange(proxy->url() + "/data/blob.bin", i * 4096, got.size(), got.data());
    ASSERT_TRUE(st) << "read " << i << ": " << st.error().ToString();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), blob_->begin() + i * 4096));
  }
  // At least the stalled read's hedge; under load a delay of a few ms may
  // also hedge a healthy read, or hedge the hedge.
  EXPECT_GE(store->stats().hedges, 1u);
}

// A listening socket that never accepts: connects succeed, nothing answers.
class BlackHole {
 public:
  BlackHole() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 64);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~BlackHole() { close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/x.bin"; }

 private:
  int fd_;
  int port_;
};

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST_F(HttpStoreTest, BlackHoleServerHitsTheDeadline) {
  BlackHole hole;
  RemoteOptions o = Fast();
  o.deadline_s = 1.0;
  auto store = Open(hole.url(), o);
  std::vector<uint8_t> buf(100);
  const auto start = Clock::now();
  auto st = store->ReadRange(hole.url(), 0, 100, buf.data());
  const double elapsed = SecondsSince(start);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kIo);
  EXPECT_NE(st.error().message.find(hole.url()), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("deadline"), std::string::npos) << st.error().message;
  EXPECT_GE(elapsed, 0.9);
  EXPECT_LT(elapsed, 1.0 + 3.0);  // the deadline, plus generous scheduling slack
  EXPECT_GE(store->stats().timeouts, 1u);
  EXPECT_EQ(store->stats().failures, 1u);
}

TEST_F(HttpStoreTest, DeadServerIsRetriedUntilTheDeadline) {
  int port;
  {
    BlackHole closed;  // a port that was just free: connections are refused
    port = std::stoi(closed.url().substr(17, 5));
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/x.bin";
  RemoteOptions o = Fast();
  o.deadline_s = 1.0;
  o.max_retries = 1000;
  o.backoff_max_s = 0.1;
  auto store = Open(url, o);
  const auto start = Clock::now();
  auto info = store->Stat(url);
  const double elapsed = SecondsSince(start);
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().code, ErrorCode::kIo);
  EXPECT_NE(info.error().message.find("deadline"), std::string::npos) << info.error().message;
  EXPECT_LT(elapsed, 1.0 + 3.0);
  EXPECT_GT(store->stats().retries, 0u);
}

TEST_F(HttpStoreTest, CancelReturnsPromptlyWithRequestsInFlight) {
  BlackHole hole;
  RemoteOptions o = Fast();
  o.deadline_s = 60;
  auto store = Open(hole.url(), o);
  std::vector<std::thread> threads;
  std::atomic<int> cancelled{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      std::vector<uint8_t> buf(10);
      Status st = i % 2 == 0
                      ? store->ReadRange(hole.url(), 0, 10, buf.data())
                      : store->Stream(hole.url(), [](const uint8_t*, size_t) { return Ok(); });
      if (!st && st.error().message.find("cancelled") != std::string::npos) ++cancelled;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  store->Cancel();
  for (auto& t : threads) t.join();
  EXPECT_LT(SecondsSince(start), 10.0);  // far below the 60 s deadline
  EXPECT_EQ(cancelled.load(), 4);
  auto later = store->Stat(hole.url());
  ASSERT_FALSE(later);
  EXPECT_NE(later.error().message.find("cancelled"), std::string::npos);
}

TEST(IoThreadsForTest, ExplicitAutoAndCapped) {
  RemoteOptions o;
  o.io_threads = 3;
  EXPECT_EQ(IoThreadsFor(o, 2), 3);
  o.io_threads = 0;  // auto: one per 4 hardware threads, 1 to 4
  EXPECT_EQ(IoThreadsFor(o, 0), 1);
  EXPECT_EQ(IoThreadsFor(o, 2), 1);
  EXPECT_EQ(IoThreadsFor(o, 8), 2);
  EXPECT_EQ(IoThreadsFor(o, 16), 4);
  EXPECT_EQ(IoThreadsFor(o, 128), 4);
  o.max_connections = 2;  // never more loops than connections
  EXPECT_EQ(IoThreadsFor(o, 16), 2);
  o.io_threads = 8;
  EXPECT_EQ(IoThreadsFor(o, 16), 2);
}

TEST_F(HttpStoreTest, SeveralIoThreadsGiveTheSameBytesAndHedgeAcrossLoops) {
  ServerProcess& http = Http();
  ASSERT_FALSE(HasFailure());
  RemoteOptions o = Fast();
  o.io_threads = 3;
  auto store = Open(http.url(), o);
  ExpectSameBytes(*store, http.url() + "/data/blob.bin");
  EXPECT_EQ(BadConcurrentReads(*store, http.url() + "/data/blob.bin", *blob_, 6, 20, 3000), 0);
  EXPECT_EQ(store->stats().failures, 0u);

  // A stalled first request is hedged on the next loop, and the loser is
  // aborted on its own loop.
  ServerProcess* proxy = ProxyToHttp({"--fault", "delay:2:0", "--delay-s", "30"});
  ASSERT_NE(proxy, nullptr);
  o.io_threads = 2;
  o.hedge_delay_s = 0.05;
  auto hedged = Open(proxy->url(), o);
  std::vector<uint8_t> got(65536);
  const auto start = Clock::now();
  auto st = hedged->ReadRange(proxy->url() + "/data/blob.bin", 1000, got.size(), got.data());
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_LT(SecondsSince(start), 10.0);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), blob_->begin() + 1000));
  EXPECT_EQ(hedged->stats().hedge_wins, 1u);
}

TEST_F(HttpStoreTest, CancelEndsRequestsOnEveryIoThread) {
  BlackHole hole;
  RemoteOptions o = Fast();
  o.deadline_s = 60;
  o.io_threads = 3;
  auto store = Open(hole.url(), o);
  std::vector<std::thread> threads;
  std::atomic<int> cancelled{0};
  for (int i = 0; i < 6; ++i) {  // two requests on each loop
    threads.emplace_back([&] {
      std::vector<uint8_t> buf(10);
      Status st = store->ReadRange(hole.url(), 0, 10, buf.data());
      if (!st && st.error().message.find("cancelled") != std::string::npos) ++cancelled;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  store->Cancel();
  for (auto& t : threads) t.join();
  EXPECT_LT(SecondsSince(start), 10.0);
  EXPECT_EQ(cancelled.load(), 6);
}

TEST_F(HttpStoreTest, S3WithIamAuthentication) {
  ServerProcess s3;
  START_SERVER(s3, "s3", "--root", (*root_ / "s3").string(), "--bucket", "sluice-test");
  const std::string key = s3.info["access_key"], secret = s3.info["secret_key"];
  {
    ScopedEnv env;
    auto store = OpenS3(env, s3.url(), key, secret);
    ExpectSameBytes(*store, "s3://sluice-test/data/blob.bin");
    EXPECT_EQ(store->stats().failures, 0u);
    // Missing key: 404, at once, naming the key.
    auto info = store->Stat("s3://sluice-test/data/nope.bin");
    ASSERT_FALSE(info);
    EXPECT_EQ(info.error().code, ErrorCode::kNotFound);
    EXPECT_NE(info.error().hint.find("data/nope.bin"), std::string::npos) << info.error().hint;
  }
  {  // A wrong secret is rejected (403), at once, and no secret is named.
    ScopedEnv env;
    const std::string wrong = "wRoNgSeCrEt0123456789wRoNgSeCrEt01234567";
    auto store = OpenS3(env, s3.url(), key, wrong);
    std::vector<uint8_t> buf(10);
    auto st = store->ReadRange("s3://sluice-test/data/blob.bin", 0, 10, buf.data());
    ASSERT_FALSE(st);
    const std::string text = st.error().ToString();
    EXPECT_EQ(st.error().code, ErrorCode::kIo);
    EXPECT_NE(text.find("403"), std::string::npos) << text;
    EXPECT_NE(text.find("SignatureDoesNotMatch"), std::string::npos) << text;
    EXPECT_NE(text.find("credentials"), std::string::npos) << text;
    EXPECT_EQ(text.find(wrong), std::string::npos) << text;
    EXPECT_EQ(text.find(secret), std::string::npos) << text;
    EXPECT_EQ(store->stats().requests, 1u);
  }
  {  // Credentials from a profile in the shared credentials file.
    ScopedEnv env;
    const fs::path creds = *root_ / "credentials";
    std::ofstream(creds) << "[default]\naws_access_key_id = nobody\naws_secret_access_key = x\n"
                         << "[loader]\naws_access_key_id = " << key
                         << "\naws_secret_access_key = " << secret << "\n";
    env.Set("AWS_ACCESS_KEY_ID", nullptr);
    env.Set("AWS_SECRET_ACCESS_KEY", nullptr);
    env.Set("AWS_SESSION_TOKEN", nullptr);
    env.Set("AWS_CONFIG_FILE", "/nonexistent");
    env.Set("AWS_SHARED_CREDENTIALS_FILE", creds.c_str());
    env.Set("AWS_PROFILE", "loader");
    env.Set("AWS_REGION", nullptr);
    env.Set("AWS_DEFAULT_REGION", "us-east-1");
    env.Set("AWS_ENDPOINT_URL_S3", nullptr);
    env.Set("AWS_ENDPOINT_URL", s3.url().c_str());
    auto store = Open("s3://sluice-test/", Fast());
    auto info = store->Stat("s3://sluice-test/data/blob.bin");
    ASSERT_TRUE(info) << info.error().ToString();
    EXPECT_EQ(info->size, kBlobSize);
  }
  {  // Listing, paginated (7 keys a page), sorted, with sizes.
    ScopedEnv env;
    HttpStoreTuning tuning;
    tuning.list_page_size = 7;
    auto store = OpenS3(env, s3.url(), key, secret, Fast(), tuning);
    auto list = store->List("s3://sluice-test/many/k-");
    ASSERT_TRUE(list) << list.error().ToString();
    ASSERT_EQ(list->size(), static_cast<size_t>(kListed));
    for (int i = 0; i < kListed; ++i) {
      char name[64];
      std::snprintf(name, sizeof(name), "s3://sluice-test/many/k-%03d", i);
      EXPECT_EQ((*list)[i].url, name);
      EXPECT_EQ((*list)[i].size, static_cast<uint64_t>(10 + i));
    }
    EXPECT_EQ(store->stats().requests, 4u);  // ceil(23 / 7) pages
  }
  {  // Through the flaky proxy: the signature survives, retries are counted.
    ServerProcess proxy;
    START_SERVER(proxy, "proxy", "--upstream", std::to_string(s3.port()), "--fault", "503:4:1",
                 "--fault", "truncate:5:3", "--fault", "reset:9:0");
    ScopedEnv env;
    auto store = OpenS3(env, proxy.url(), key, secret);
    ExpectSameBytes(*store, "s3://sluice-test/data/blob.bin");
    EXPECT_GT(store->stats().retries, 0u);
  }
}

}  // namespace
}  // namespace sluice::runtime::remote
