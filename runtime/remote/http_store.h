// The ObjectStore for http://, https:// and s3:// URLs (object_store.h has
// the contracts; docs/remote.md the user-facing behaviour), over libcurl:
//  - one curl multi handle driven by one thread (curl_engine.h), with a pool
//    of keep-alive connections (RemoteOptions::max_connections) and easy
//    handles reused between requests;
//  - S3 requests signed by curl (CURLOPT_AWS_SIGV4) with the credentials,
//    region and endpoint of aws_config.h; listing with ListObjectsV2;
//  - every call bounded by its deadline; retries with exponential backoff and
//    full jitter; hedged range reads; counters and latency percentiles.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "runtime/remote/aws_config.h"
#include "runtime/remote/object_store.h"

namespace sluice::runtime::remote {

// Knobs that are not part of RemoteOptions (tests, tools).
struct HttpStoreTuning {
  int list_page_size = 1000;  // ListObjectsV2 max-keys (S3's maximum is 1000)
};

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
