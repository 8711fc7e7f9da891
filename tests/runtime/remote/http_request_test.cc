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

// A secret in a URL (a presigned query, user-info) never reaches a message.
TEST(HttpRequestMessages, DescribeAndClassifyHideTheUrlsSecrets) {
  auto t = ResolveTarget("https://alice:pa55word@h.example/d/index.sluice?X-Amz-Signature=5ecret",
                         nullptr);
  ASSERT_TRUE(t);
  const std::string described = Describe(*t, "HEAD");
  EXPECT_NE(described.find("h.example/d/index.sluice"), std::string::npos) << described;
  Attempt a;
  a.mode = Attempt::Mode::kHead;
  a.transfer.http_status = 403;
  const Outcome o = Classify(a, *t, nullptr, "HEAD", false);
  ASSERT_EQ(o.kind, Outcome::Kind::kFail);
  for (const std::string& text : {described, o.error.ToString()}) {
    EXPECT_EQ(text.find("5ecret"), std::string::npos) << text;
    EXPECT_EQ(text.find("pa55word"), std::string::npos) << text;
  }
}

// S3 refusals: the hint says what to check even without an error body (a
// HEAD), covers an expired session token and the region on a 400, and names
// the bucket's region when S3 sent it (x-amz-bucket-region).
TEST(HttpRequestMessages, S3RefusalsGetCredentialAndRegionHints) {
  AwsConfig aws;
  aws.region = "us-east-1";
  aws.credentials_source = "environment";
  aws.access_key = "AKIDEXAMPLE";
  auto t = ResolveTarget("s3://bkt/data/shard-000000.tar", &aws);
  ASSERT_TRUE(t);
  auto classify = [&](long status, Attempt::Mode mode, const std::string& body,
                      const std::string& region) {
    Attempt a;
    a.mode = mode;
    a.transfer.http_status = status;
    a.error_body = body;
    a.bucket_region = region;
    return Classify(a, *t, &aws, mode == Attempt::Mode::kHead ? "HEAD" : "GET", false);
  };
  const std::string wrong_secret = "<Error><Code>SignatureDoesNotMatch</Code></Error>";
  const Outcome get403 = classify(403, Attempt::Mode::kRange, wrong_secret, "");
  const Outcome head403 = classify(403, Attempt::Mode::kHead, "", "");
  EXPECT_NE(get403.error.message.find("HTTP 403 (SignatureDoesNotMatch)"), std::string::npos)
      << get403.error.message;
  EXPECT_NE(head403.error.message.find("HTTP 403 (a HEAD answer carries no S3 error code)"),
            std::string::npos)
      << head403.error.message;
  EXPECT_EQ(head403.error.hint, get403.error.hint);
  EXPECT_NE(head403.error.hint.find("credentials (from environment"), std::string::npos)
      << head403.error.hint;

  const Outcome expired =
      classify(400, Attempt::Mode::kRange, "<Error><Code>ExpiredToken</Code></Error>", "");
  EXPECT_EQ(expired.kind, Outcome::Kind::kFail);
  EXPECT_NE(expired.error.message.find("HTTP 400 (ExpiredToken)"), std::string::npos);
  EXPECT_NE(expired.error.hint.find("session token"), std::string::npos) << expired.error.hint;
  EXPECT_NE(expired.error.hint.find("region (us-east-1)"), std::string::npos) << expired.error.hint;
  const Outcome head400 = classify(400, Attempt::Mode::kHead, "", "");
  EXPECT_NE(head400.error.hint.find("session token"), std::string::npos) << head400.error.hint;

  for (long status : {400L, 403L, 301L}) {
    const Outcome elsewhere = classify(status, Attempt::Mode::kHead, "", "eu-west-1");
    EXPECT_NE(elsewhere.error.hint.find("in region eu-west-1, not us-east-1"), std::string::npos)
        << status << ": " << elsewhere.error.hint;
    EXPECT_NE(elsewhere.error.hint.find("AWS_REGION=eu-west-1"), std::string::npos);
  }
  // The header naming the region signed for is no region hint.
  const Outcome same = classify(403, Attempt::Mode::kHead, "", "us-east-1");
  EXPECT_EQ(same.error.hint, head403.error.hint);
}

// Against moto: a wrong secret on a HEAD (a Stat, as a source's open makes)
// gets the credentials hint although its answer has no body.
TEST_F(HttpRequestTest, AWrongSecretOnAHeadGetsTheCredentialsHint) {
  ServerProcess s3;
  START_SERVER(s3, "s3", "--root", (*root_ / "s3").string(), "--bucket", "sluice-test");
  ScopedEnv env;
  const std::string wrong = "wRoNgSeCrEt0123456789wRoNgSeCrEt01234567";
  auto store = OpenS3(env, s3.url(), s3.info["access_key"], wrong);
  auto info = store->Stat("s3://sluice-test/data/blob.bin");
  ASSERT_FALSE(info);
  const std::string text = info.error().ToString();
  EXPECT_NE(text.find("HTTP 403"), std::string::npos) << text;
  EXPECT_NE(text.find("credentials"), std::string::npos) << text;
  EXPECT_EQ(text.find(wrong), std::string::npos) << text;
}

}  // namespace
}  // namespace sluice::runtime::remote
