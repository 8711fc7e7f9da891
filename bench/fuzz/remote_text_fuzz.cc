// libFuzzer harness: the text that a remote store's server, a spec's shard
// path or an AWS file hands the remote layer (runtime/remote/,
// runtime/sources/tar/shard_paths.h).
//
// The input is used whole, five ways:
//  1. as a ListObjectsV2 response body (ParseListObjectsResponse): a page or
//     an error, and a truncated page always carries its continuation token;
//  2. as an S3 error document (S3ErrorCode);
//  3. as an AWS credentials/config file (ParseIni): keys and values come
//     back trimmed;
//  4. as a tar_shards path with brace groups (ExpandBraces, with lower
//     limits): names or an error, never more names or bytes than the limits;
//  5. as a URL (ResolveTarget, with and without an S3 endpoint): an s3://
//     target names its bucket and key, and its wire URL is on the endpoint.
// Any input must give a value or an error, never a crash.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/remote/aws_config.h"
#include "runtime/remote/http_request.h"
#include "runtime/remote/s3_listing.h"
#include "runtime/sources/tar/shard_paths.h"

namespace {

using namespace sluice;
using namespace sluice::runtime;

void CheckTarget(const Result<remote::Target>& t, const remote::AwsConfig& aws) {
  if (!t) {
    (void)t.error().ToString();
    return;
  }
  if (t->s3) {
    if (t->bucket.empty() || !t->http_url.starts_with(aws.endpoint + "/" + t->bucket + "/")) {
      std::abort();
    }
    for (char c : t->bucket) {
      const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (!alnum && c != '.' && c != '-' && c != '_' && c != ':') std::abort();
    }
    if (t->bucket == "." || t->bucket == "..") std::abort();
  }
  if (!t->s3 && t->http_url != t->url) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // 1. A listing page.
  auto page = remote::ParseListObjectsResponse(text);
  if (page) {
    if (page->truncated && page->next_token.empty()) std::abort();
    for (const auto& e : page->entries) {
      if (e.key.empty()) std::abort();
    }
  } else {
    (void)page.error().ToString();
  }

  // 2. An error document.
  (void)remote::S3ErrorCode(text);

  // 3. An AWS file.
  for (const auto& [section, keys] : remote::ParseIni(text)) {
    for (const auto& [key, value] : keys) {
      if (remote::Trim(key) != key || remote::Trim(value) != value) std::abort();
    }
  }

  // 4. A shard path, within limits 100 times lower than the defaults (the
  // same code; a million names would make the fuzzer spend its time and
  // memory making names).
  const tar::BraceLimits limits{.max_names = 10000, .max_bytes = 1 << 20};
  auto names = tar::ExpandBraces(text, limits);
  if (names) {
    if (names->empty() || names->size() > limits.max_names) std::abort();
    size_t bytes = 0;
    for (const std::string& name : *names) bytes += name.size();
    if (bytes > limits.max_bytes) std::abort();
    // Limits exactly at what it made still pass (the measure never overcounts).
    auto again = tar::ExpandBraces(text, {.max_names = names->size(), .max_bytes = bytes});
    if (!again || *again != *names) std::abort();
  }

  // 5. A URL, with the S3 configuration a custom endpoint gives and without one.
  const std::string url(text);
  remote::AwsConfig aws;
  aws.region = "us-east-1";
  aws.endpoint = "http://127.0.0.1:9000";
  CheckTarget(remote::ResolveTarget(url, &aws), aws);
  auto bare = remote::ResolveTarget(url, nullptr);
  if (bare && bare->s3) std::abort();
  return 0;
}
