// S3 request pieces that are plain text: URI encoding (as SigV4 wants it),
// the ListObjectsV2 query and its XML response, and S3 error documents.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/result.h"

namespace sluice::runtime::remote {

// RFC 3986 percent-encoding: unreserved characters (A-Z a-z 0-9 - _ . ~) stay,
// '/' stays when keep_slash, everything else becomes %XX (upper-case hex).
std::string UriEncode(std::string_view s, bool keep_slash);

// The ListObjectsV2 query string (no '?'), its parameters sorted by name and
// encoded, as SigV4's canonical query string requires (curl before 8.x signs
// the query as given). Empty token = first page.
std::string ListObjectsQuery(std::string_view prefix, std::string_view continuation_token,
                             int max_keys);

struct ListPage {
  struct Entry {
    std::string key;
    uint64_t size = 0;
    std::string etag;  // as in a HEAD's ETag header (quotes kept); "" = none
  };
  std::vector<Entry> entries;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken when truncated
};

// Parses a ListBucketResult document. Errors: kCorruptData for malformed XML
// or a truncated page without a continuation token.
Result<ListPage> ParseListObjectsResponse(std::string_view xml);

// The <Code> of an S3 <Error> document ("NoSuchKey", "SignatureDoesNotMatch",
// ...), or "" when `body` is not one.
std::string S3ErrorCode(std::string_view body);

}  // namespace sluice::runtime::remote
