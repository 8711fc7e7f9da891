// AWS credentials, region and endpoint, resolved the way the AWS CLI and SDKs
// do (docs/remote.md, "URLs and credentials"):
//  - profile: AWS_PROFILE, else "default";
//  - credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
//    AWS_SESSION_TOKEN) from the environment, else the profile's
//    aws_access_key_id / aws_secret_access_key / aws_session_token in the
//    shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
//    ~/.aws/credentials), else in the config file (AWS_CONFIG_FILE, else
//    ~/.aws/config, section [profile NAME] or [default]); none = anonymous
//    (unsigned) requests, for public buckets;
//  - region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else
//    us-east-1;
//  - endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
//    `endpoint_url`, else AWS itself. A custom endpoint is addressed
//    path-style (ENDPOINT/BUCKET/KEY).
// The secret is held only here and in the curl handle; ToString-style output
// never includes it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "sluice/result.h"

namespace sluice::runtime::remote {

struct AwsConfig {
  std::string profile;
  std::string access_key;  // empty = anonymous
  std::string secret_key;
  std::string session_token;
  std::string region;
  std::string endpoint;            // "" = AWS (virtual-hosted); else scheme://host[:port][/path]
  std::string credentials_source;  // "environment", a file path, or "none" (for messages)
};

// Looks up an environment variable; nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// Resolves the configuration from `env` and the files it names. Errors:
// kInvalidArgument for an access key without a secret (or the reverse), or a
// profile named by AWS_PROFILE that no file has.
Result<AwsConfig> LoadAwsConfig(const EnvLookup& env);

// INI sections of an AWS-style file: section name -> key -> value (keys and
// values trimmed; `#` and `;` lines are comments). Missing file = empty.
using IniFile = std::map<std::string, std::map<std::string, std::string>>;
IniFile ParseIni(std::string_view text);

// `s` without leading and trailing spaces, tabs, CR and LF (INI values,
// HTTP header values).
std::string_view Trim(std::string_view s);

}  // namespace sluice::runtime::remote
