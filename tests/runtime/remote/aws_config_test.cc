// AWS configuration resolution, S3 URL mapping, the ListObjectsV2 query and
// response, and S3 error documents: no server needed (label `unit`).
#include "runtime/remote/aws_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "runtime/remote/http_request.h"
#include "runtime/remote/s3_listing.h"

namespace sluice::runtime::remote {
namespace {

namespace fs = std::filesystem;

// A fake environment for LoadAwsConfig.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

class AwsConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sluice_aws_config_test_" + std::to_string(getpid()));
    fs::create_directories(dir_ / ".aws");
    env_.vars["HOME"] = dir_.string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / ".aws" / name) << text;
  }
  fs::path dir_;
  FakeEnv env_;
};

TEST_F(AwsConfigTest, EnvironmentWinsOverFiles) {
  Write("credentials",
        "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n");
  env_.vars["AWS_ACCESS_KEY_ID"] = "ENVKEY";
  env_.vars["AWS_SECRET_ACCESS_KEY"] = "ENVSECRET";
  env_.vars["AWS_SESSION_TOKEN"] = "TOKEN";
  env_.vars["AWS_DEFAULT_REGION"] = "eu-west-1";
  auto c = LoadAwsConfig(env_.lookup());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->access_key, "ENVKEY");
  EXPECT_EQ(c->secret_key, "ENVSECRET");
  EXPECT_EQ(c->session_token, "TOKEN");
  EXPECT_EQ(c->region, "eu-west-1");
  EXPECT_EQ(c->endpoint, "");
  env_.vars["AWS_REGION"] = "ap-south-1";
  EXPECT_EQ(LoadAwsConfig(env_.lookup())->region, "ap-south-1");
}

TEST_F(AwsConfigTest, ProfileFromCredentialsAndConfigFiles) {
  Write("credentials",
        "# comment\n[default]\naws_access_key_id = DEF\naws_secret_access_key = DEFS\n\n"
        "[train]\n  aws_access_key_id=TRAINKEY \naws_secret_access_key = TRAINSECRET\r\n");
  Write("config",
        "[default]\nregion = us-west-2\n[profile train]\nregion = eu-central-1\n"
        "endpoint_url = https://storage.googleapis.com/\n");
  auto c = LoadAwsConfig(env_.lookup());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->profile, "default");
  EXPECT_EQ(c->access_key, "DEF");
  EXPECT_EQ(c->region, "us-west-2");
  env_.vars["AWS_PROFILE"] = "train";
  c = LoadAwsConfig(env_.lookup());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->access_key, "TRAINKEY");
  EXPECT_EQ(c->secret_key, "TRAINSECRET");
  EXPECT_EQ(c->region, "eu-central-1");
  EXPECT_EQ(c->endpoint, "https://storage.googleapis.com");
  EXPECT_EQ(c->credentials_source.find("TRAINSECRET"), std::string::npos);
  // AWS_ENDPOINT_URL_S3 beats AWS_ENDPOINT_URL beats the profile.
  env_.vars["AWS_ENDPOINT_URL"] = "http://generic:9000";
  EXPECT_EQ(LoadAwsConfig(env_.lookup())->endpoint, "http://generic:9000");
  env_.vars["AWS_ENDPOINT_URL_S3"] = "minio.local:9000";
  EXPECT_EQ(LoadAwsConfig(env_.lookup())->endpoint, "https://minio.local:9000");
}

TEST_F(AwsConfigTest, OverriddenFilePathsAndErrors) {
  std::ofstream(dir_ / "creds") << "[p]\naws_access_key_id = K\n";  // no secret
  env_.vars["AWS_SHARED_CREDENTIALS_FILE"] = (dir_ / "creds").string();
  env_.vars["AWS_PROFILE"] = "p";
  auto c = LoadAwsConfig(env_.lookup());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  env_.vars["AWS_PROFILE"] = "absent";
  c = LoadAwsConfig(env_.lookup());
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("absent"), std::string::npos);
  env_.vars.erase("AWS_PROFILE");
  c = LoadAwsConfig(env_.lookup());  // no [default] anywhere: anonymous
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->access_key, "");
  EXPECT_EQ(c->region, "us-east-1");
}

TEST(S3UrlTest, PathStyleForCustomEndpointsVirtualHostedForAws) {
  AwsConfig aws;
  aws.region = "eu-west-1";
  auto t = ResolveTarget("s3://bucket/dir/shard 0+1.tar", &aws);
  ASSERT_TRUE(t) << t.error().ToString();
  EXPECT_TRUE(t->s3);
  EXPECT_EQ(t->bucket, "bucket");
  EXPECT_EQ(t->key, "dir/shard 0+1.tar");
  EXPECT_EQ(t->http_url, "https://bucket.s3.eu-west-1.amazonaws.com/dir/shard%200%2B1.tar");
  t = ResolveTarget("s3://my.bucket/k", &aws);
  EXPECT_EQ(t->http_url, "https://s3.eu-west-1.amazonaws.com/my.bucket/k");
  aws.endpoint = "http://127.0.0.1:9000";
  t = ResolveTarget("s3://bucket/a/b", &aws);
  EXPECT_EQ(t->http_url, "http://127.0.0.1:9000/bucket/a/b");
  EXPECT_FALSE(ResolveTarget("s3:///key", &aws));
  EXPECT_FALSE(ResolveTarget("s3://bucket/key", nullptr));  // a store opened for HTTP
  EXPECT_FALSE(ResolveTarget("ftp://host/x", &aws));
  // A bucket goes into the host or path unencoded: only bucket-name characters.
  EXPECT_TRUE(ResolveTarget("s3://Old_Bucket-1.x/k", &aws));
  t = ResolveTarget("s3://tenant:bucket/k", &aws);  // Ceph RGW, on its own endpoint
  ASSERT_TRUE(t) << t.error().ToString();
  EXPECT_EQ(t->http_url, "http://127.0.0.1:9000/tenant:bucket/k");
  for (const char* bad :
       {"s3://a#b/k", "s3://a?b/k", "s3://a b/k", "s3://user@host/k", "s3://a%2Fb/k",
        "s3://../other/k", "s3://./k", "s3://-a/k", "s3://a./k", "s3://\xc3\xa9t\xc3\xa9/k"}) {
    auto r = ResolveTarget(bad, &aws);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(r.error().message.find("invalid bucket name"), std::string::npos) << bad;
    EXPECT_NE(r.error().hint.find("s3://BUCKET/KEY"), std::string::npos) << bad;
  }
  EXPECT_FALSE(ResolveTarget("s3://" + std::string(256, 'b') + "/k", &aws));
  // On AWS: a bucket that is not one DNS label (upper case, underscores) is
  // addressed path-style, as dots are; ':' is no AWS bucket name.
  aws.endpoint.clear();
  t = ResolveTarget("s3://Old_Bucket/k", &aws);
  ASSERT_TRUE(t) << t.error().ToString();
  EXPECT_EQ(t->http_url, "https://s3.eu-west-1.amazonaws.com/Old_Bucket/k");
  EXPECT_FALSE(ResolveTarget("s3://tenant:bucket/k", &aws));
  t = ResolveTarget("HTTPS://host/x?y=1", nullptr);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->http_url, "HTTPS://host/x?y=1");
  EXPECT_FALSE(t->s3);
}

TEST(S3ListingTest, QueryIsSortedAndEncoded) {
  EXPECT_EQ(ListObjectsQuery("dir/a b", "", 1000), "list-type=2&max-keys=1000&prefix=dir%2Fa%20b");
  EXPECT_EQ(ListObjectsQuery("", "1/x+y=", 7),
            "continuation-token=1%2Fx%2By%3D&list-type=2&max-keys=7&prefix=");
  EXPECT_EQ(UriEncode("a-_.~/é", true), "a-_.~/%C3%A9");
}

TEST(S3ListingTest, ParsesPagesAndErrors) {
  auto page = ParseListObjectsResponse(
      R"(<?xml version="1.0"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">)"
      R"(<IsTruncated>true</IsTruncated><Contents><Key>a/1</Key><Size>10</Size>)"
      R"(<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag></Contents>)"
      R"(<Contents><Key>a/2</Key><Size>12345678901</Size></Contents>)"
      R"(<NextContinuationToken>tok==</NextContinuationToken></ListBucketResult>)");
  ASSERT_TRUE(page) << page.error().ToString();
  ASSERT_EQ(page->entries.size(), 2u);
  EXPECT_EQ(page->entries[1].key, "a/2");
  EXPECT_EQ(page->entries[1].size, 12345678901u);
  EXPECT_EQ(page->entries[0].etag, "\"9b2cf535f27731c974343645a3985328\"");  // as a HEAD sends it
  EXPECT_EQ(page->entries[1].etag, "");
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "tok==");
  EXPECT_FALSE(
      ParseListObjectsResponse("<ListBucketResult><IsTruncated>true</IsTruncated>"
                               "</ListBucketResult>"));
  EXPECT_FALSE(ParseListObjectsResponse("not xml"));
  EXPECT_FALSE(
      ParseListObjectsResponse("<ListBucketResult><Contents><Key>k</Key>"
                               "<Size>-1</Size></Contents></ListBucketResult>"));
  EXPECT_EQ(S3ErrorCode("<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code></Error>"),
            "NoSuchKey");
  EXPECT_EQ(S3ErrorCode("plain text"), "");
}

TEST(IniTest, SectionsKeysAndComments) {
  const IniFile ini = ParseIni("top = ignored\n[a]\nk = v = w\n; c\n#c\n[ b ]\nx=1\n");
  EXPECT_EQ(ini.size(), 2u);
  EXPECT_EQ(ini.at("a").at("k"), "v = w");
  EXPECT_EQ(ini.at("b").at("x"), "1");
}

}  // namespace
}  // namespace sluice::runtime::remote
