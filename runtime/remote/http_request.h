// One HTTP request attempt of the HTTP(S)/S3 store: how its easy handle is
// configured (URL, timeouts, Range, SigV4 through CURLOPT_AWS_SIGV4), where
// its body goes, and what its outcome means (success, retryable, or a final
// error naming the URL and the HTTP status, never a secret).
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "runtime/remote/aws_config.h"
#include "runtime/remote/curl_engine.h"
#include "sluice/result.h"

namespace sluice::runtime::remote {

using Clock = std::chrono::steady_clock;

// Where a caller's URL goes on the wire.
struct Target {
  std::string url;       // as the caller named it (errors, ObjectInfo)
  std::string http_url;  // what curl requests
  bool s3 = false;
  std::string bucket, key;  // s3 only
};

// Maps s3://bucket/key to its endpoint URL (path-style for a custom endpoint,
// virtual-hosted for AWS); http(s) URLs map to themselves. Errors:
// kInvalidArgument for a malformed URL or an s3:// URL without AWS config.
Result<Target> ResolveTarget(const std::string& url, const AwsConfig* aws);

// Hands body bytes of a streaming attempt to the caller's thread: a bounded
// queue of chunks (the loop pauses the transfer while it is full).
struct StreamQueue {
  static constexpr size_t kMaxQueued = 8 << 20;
  std::deque<std::vector<uint8_t>> chunks;  // guarded by the waiter's mutex
  std::vector<std::vector<uint8_t>> spare;  // recycled chunk buffers
  size_t queued = 0;
  bool paused = false;
};

struct Attempt {
  enum class Mode { kHead, kRange, kBuffer, kStream };

  Transfer transfer;
  Mode mode = Mode::kBuffer;
  curl_slist* headers = nullptr;
  // kRange: the body goes to dst[0, want) for bytes [offset, offset + want).
  uint8_t* dst = nullptr;
  uint64_t offset = 0;
  uint64_t want = 0;
  uint64_t got = 0;
  uint64_t skip = 0;                 // leading bytes to drop (a 200 to a Range request)
  bool started = false;              // the first 2xx body byte arrived
  bool complete = false;             // every wanted byte arrived (the rest was cut off)
  std::string* buffer = nullptr;     // kBuffer
  StreamQueue* stream = nullptr;     // kStream
  std::string error_body;            // a non-2xx body, capped
  int64_t content_range_start = -1;  // from Content-Range: bytes START-b/n
  int64_t content_range_total = -1;  // from Content-Range: bytes a-b/TOTAL
  // A 206 whose Content-Range starts after `offset` (it lacks the first bytes
  // asked for), or that has none: its body is never used, and the attempt
  // fails (Classify).
  bool range_mismatch = false;
  std::string etag;           // the response's ETag, as sent (quotes kept)
  std::string last_modified;  // the response's Last-Modified date, as sent
  std::string bucket_region;  // S3's x-amz-bucket-region header, when sent
  // Set before ConfigureAttempt: sent as If-Match, so that a resumed stream
  // gets 412 (a kCorruptData "changed" failure) instead of another version's
  // bytes when the object was replaced since its first response.
  std::string if_match;
  curl_off_t content_length = -1;  // Content-Length, read when the attempt ends
  uint64_t body_bytes = 0;         // 2xx body bytes received (stats)
  char curl_error[CURL_ERROR_SIZE] = {0};

  ~Attempt();
};

struct RequestSetup {
  const Target* target = nullptr;
  const AwsConfig* aws = nullptr;  // non-null with credentials: sign
  double connect_timeout_s = 10;
  Clock::time_point deadline;
  bool range = false;        // send Range: bytes=offset-(offset+want-1), or offset- if want == 0
  std::string url_override;  // a listing URL instead of target->http_url
};

// The hint of a read that found its object replaced since its first
// response (412 to If-Match, or a resumed response with another ETag).
inline constexpr char kObjectChangedHint[] =
    "the object was replaced during the read; rerun once it is stable";

// Fills `a`'s easy handle (acquired by the caller) for one attempt.
Status ConfigureAttempt(Attempt& a, const RequestSetup& setup);

// What one finished attempt means.
struct Outcome {
  enum class Kind { kOk, kRetry, kFail } kind = Kind::kOk;
  Error error;  // kRetry / kFail
  long http_status = 0;
  bool timeout = false;
  bool short_body = false;
};

// Classifies a completed attempt of `verb` (GET, HEAD) on `target`.
// `cancelled`: the store was cancelled (an aborted attempt then fails).
Outcome Classify(const Attempt& a, const Target& target, const AwsConfig* aws, const char* verb,
                 bool cancelled);

// "VERB URL" plus " (HTTP URL)" for S3, for messages; both URLs with their
// user-info and query string replaced by *** (RedactUrl): a presigned
// signature or a password never reaches an error.
std::string Describe(const Target& target, const char* verb);

// The hint of an S3 answer with HTTP `status` (400, 401, 403, or a redirect)
// whose body named S3 error `s3code` ("" when it had none: a HEAD has no
// body), and whose x-amz-bucket-region header named `bucket_region` ("" when
// absent): what to check (credentials and where they came from, an expired
// session token, the region, naming the bucket's own when S3 told it).
std::string S3Hint(long status, const Target& target, const AwsConfig* aws,
                   const std::string& s3code, const std::string& bucket_region);

}  // namespace sluice::runtime::remote
