// The ObjectStore for http://, https:// and s3:// URLs (object_store.h has
// the contracts; docs/remote.md the user-facing behaviour), over libcurl:
//  - RemoteOptions::io_threads curl multi handles, each driven by its own
//    thread (curl_engine.h) with its share of the keep-alive connections
//    (RemoteOptions::max_connections); each attempt goes to the next one,
//    round robin; easy handles are reused between requests;
//  - S3 requests signed by curl (CURLOPT_AWS_SIGV4) with the credentials,
//    region and endpoint of aws_config.h; listing with ListObjectsV2;
//  - every call bounded by its deadline; retries with exponential backoff and
//    full jitter; hedged range reads; counters and latency percentiles.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "runtime/remote/aws_config.h"
#include "runtime/remote/object_store.h"

namespace sluice::runtime::remote {

// Range reads up to this many bytes are hedged (RemoteOptions::hedge_delay_s);
// larger ones (coalesced ranges) are not: the hedge delay follows the
// latency of small reads, and a hedge downloads the range again.
inline constexpr uint64_t kMaxHedgedRangeBytes = uint64_t{2} << 20;

// Knobs that are not part of RemoteOptions (tests, tools).
struct HttpStoreTuning {
  int list_page_size = 1000;  // ListObjectsV2 max-keys (S3's maximum is 1000)
};

// The curl event loops a store runs: io_threads when > 0, else one per 4
// hardware threads the process may run on (its affinity), from 1 to 4 (one
// loop that signs, sends and parses every request capped a busy 16-core
// loader near 8,000 S3 range reads a second; bench/RESULTS.md, remote run 8).
// At most max_connections. Each loop keeps max_connections / loops idle
// connections, rounded up.
int IoThreadsFor(const RemoteOptions& options, unsigned hardware_threads);

// A store for `url`'s scheme (http, https or s3). For s3:// the AWS
// configuration is read now, from the environment and ~/.aws files. The store
// serves every http(s) URL, and s3:// URLs when opened for one. Errors:
// kInvalidArgument for another scheme or a bad AWS configuration, kIo when
// libcurl cannot start.
Result<std::shared_ptr<ObjectStore>> OpenHttpStore(std::string_view url,
                                                   const RemoteOptions& options,
                                                   const HttpStoreTuning& tuning = {});

// The same, with an explicit AWS configuration (s3:// URLs) instead of the
// environment's.
Result<std::shared_ptr<ObjectStore>> OpenHttpStoreWithConfig(const RemoteOptions& options,
                                                             std::optional<AwsConfig> aws,
                                                             const HttpStoreTuning& tuning = {});

}  // namespace sluice::runtime::remote
