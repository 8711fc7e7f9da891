// Reading byte objects by URL: local files (plain paths and file://), plain
// HTTP(S) servers, and S3-compatible object stores (s3://bucket/key). This is
// the seam between the tar_shards source (which knows shards, indexes and
// caches) and the transports (which know requests, retries and credentials).
//
// Implementations:
//  - runtime/remote/local_store.*: plain paths and file:// (pread).
//  - runtime/remote/http_store.*: http://, https:// and s3:// over libcurl,
//    with a pool of keep-alive connections, SigV4 signing through
//    CURLOPT_AWS_SIGV4, AWS credentials and endpoint from the usual
//    environment and ~/.aws files, per-request deadlines, bounded retries
//    with exponential backoff and jitter, and hedged range reads.
//
// Contracts shared by every implementation:
//  - Thread-safe: any number of threads may call any method at once.
//  - Every call returns within its deadline (RemoteOptions), retries
//    included; Cancel() makes calls in flight return promptly with kIo.
//  - Errors are values and name the URL (never a secret): kNotFound for a
//    missing object (HTTP 404), kIo for everything else that failed (403 with
//    a hint about credentials, bucket and key; 5xx / 429 / resets / timeouts
//    after the retries, with the last HTTP status), kCorruptData for a body
//    shorter than the requested range after the retries.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/result.h"

namespace sluice::runtime::remote {

// Hedges a range read may start: each when the latest request has run the
// hedge delay, so a hedge that itself meets a slow server is hedged again.
inline constexpr int kMaxHedges = 2;

// How requests behave (a tar_shards source's `remote:` params; docs/remote.md).
struct RemoteOptions {
  double connect_timeout_s = 10;  // TCP + TLS connect, per attempt
  // Deadline for one call (all its attempts, backoff and hedges together).
  double deadline_s = 60;
  int max_retries = 5;              // attempts after the first, for retryable failures
  double backoff_initial_s = 0.05;  // doubled per retry, capped, full jitter
  double backoff_max_s = 2;
  // Hedged range reads: 0 = off; > 0 = start a second request when the first
  // has run this long (and a further one, up to kMaxHedges, each time the
  // latest has run this long again); < 0 = auto: the observed p95 latency of
  // range reads, at least 10 ms; before 20 range reads, 4x the p95 of all
  // calls so far within [10 ms, 2 s] (2 s before 8 calls).
  double hedge_delay_s = -1;
  // Whole-object streams: an attempt that receives no byte for this long
  // (while this side is ready for more) is abandoned and retried from its
  // first undelivered byte, as a timeout; 0 = off (only the deadline).
  double stall_timeout_s = 10;
  int max_connections = 16;  // keep-alive connections kept in the pool
  // curl event loops (threads), each with its own multi handle and its share
  // of the max_connections pool; requests are spread over them round robin.
  // 0 = auto (IoThreadsFor in http_store.h); at most 64 from a spec.
  int io_threads = 0;
};

// Cumulative counters of one store (monotonic; safe to read at any time).
struct RequestStats {
  uint64_t requests = 0;       // HTTP requests sent (attempts, hedges included)
  uint64_t bytes_fetched = 0;  // body bytes received
  uint64_t retries = 0;        // attempts after a retryable failure
  uint64_t hedges = 0;         // hedge requests started
  uint64_t hedge_wins = 0;     // calls answered by the hedge
  uint64_t timeouts = 0;       // attempts that hit a timeout
  uint64_t failures = 0;     // calls that returned an error (a Stat of an absent object is not one)
  double latency_p50_s = 0;  // per successful call, over a recent window
  double latency_p99_s = 0;
};

struct ObjectInfo {
  std::string url;  // as the caller would name it (s3://bucket/key, https://...)
  uint64_t size = 0;
  // What tells this version of the object from another of the same size:
  // its ETag (quotes kept), else "Last-Modified: " and the header's date
  // (HTTP), "mtime NANOSECONDS" (local files); "" when the server gives
  // neither. Compared for equality only, from the same kind of call (an
  // S3 listing gives the ETag alone, as a HEAD does when there is one).
  std::string version;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // The object's size. Errors: see the file comment.
  virtual Result<ObjectInfo> Stat(const std::string& url) = 0;

  // The objects whose URL starts with `prefix`, sorted by URL. HTTP servers
  // have no listing: kUnsupported, with a hint to use a brace pattern.
  virtual Result<std::vector<ObjectInfo>> List(const std::string& prefix) = 0;

  // Reads exactly `length` bytes at `offset` into out[0, length). Hedged
  // (see RemoteOptions). Errors: see the file comment; a range past the end
  // of the object is kCorruptData.
  virtual Status ReadRange(const std::string& url, uint64_t offset, uint64_t length,
                           uint8_t* out) = 0;

  // Streams the whole object, in order, to `sink` (chunks of any size). A
  // failed attempt is resumed from the first byte not yet delivered, so the
  // sink sees each byte once. A sink error stops the stream and is returned.
  using Sink = std::function<Status(const uint8_t* data, size_t size)>;
  virtual Status Stream(const std::string& url, const Sink& sink) = 0;

  // Makes every call in flight return promptly with kIo ("cancelled"), and
  // every later call fail fast. Idempotent.
  virtual void Cancel() = 0;

  virtual RequestStats stats() const = 0;
};

// True for http://, https://, s3:// and file:// URLs (case-insensitive
// scheme); false for plain paths.
bool IsUrl(std::string_view path);

// "10 s", "0.25 s": a duration for messages.
std::string SecondsText(double seconds);

// `url` with what may be a secret replaced by "***": the user-info part
// (user:password@) and the query string (presigned signatures). For messages.
std::string RedactUrl(std::string_view url);

// The parts of `url` RedactUrl hides (its user-info and its query string,
// when not empty), and `e` with every occurrence of them replaced by "***"
// in its message and hint: for errors from code that may quote a URL as is.
std::vector<std::string> UrlSecrets(std::string_view url);
Error ScrubSecrets(Error e, const std::vector<std::string>& secrets);

// The store for `url`'s scheme (plain paths and file:// → local). Errors:
// kInvalidArgument for an unknown scheme or a malformed URL; kUnsupported
// when this build has no HTTP support.
Result<std::shared_ptr<ObjectStore>> OpenObjectStore(std::string_view url,
                                                     const RemoteOptions& options);

}  // namespace sluice::runtime::remote
