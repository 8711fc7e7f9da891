#include "runtime/remote/s3_listing.h"

#include <tinyxml2.h>

#include <charconv>

namespace sluice::runtime::remote {
namespace {

const tinyxml2::XMLElement* Child(const tinyxml2::XMLElement* e, const char* name) {
  return e == nullptr ? nullptr : e->FirstChildElement(name);
}

std::string Text(const tinyxml2::XMLElement* e) {
  const char* t = e == nullptr ? nullptr : e->GetText();
  return t == nullptr ? std::string() : std::string(t);
}

}  // namespace

std::string UriEncode(std::string_view s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string ListObjectsQuery(std::string_view prefix, std::string_view continuation_token,
                             int max_keys) {
  // Sorted by parameter name: continuation-token < list-type < max-keys < prefix.
  std::string q;
  if (!continuation_token.empty()) {
    q += "continuation-token=" + UriEncode(continuation_token, false) + "&";
  }
  q += "list-type=2&max-keys=" + std::to_string(max_keys);
  q += "&prefix=" + UriEncode(prefix, false);
  return q;
}

Result<ListPage> ParseListObjectsResponse(std::string_view xml) {
  tinyxml2::XMLDocument doc;
  if (doc.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS) {
    return MakeError(ErrorCode::kCorruptData,
                     std::string("ListObjectsV2 response is not XML: ") + doc.ErrorStr());
  }
  const tinyxml2::XMLElement* root = doc.FirstChildElement("ListBucketResult");
  if (root == nullptr) {
    return MakeError(ErrorCode::kCorruptData, "ListObjectsV2 response has no ListBucketResult");
  }
  ListPage page;
  for (const auto* c = root->FirstChildElement("Contents"); c != nullptr;
       c = c->NextSiblingElement("Contents")) {
    ListPage::Entry entry;
    entry.key = Text(Child(c, "Key"));
    const std::string size = Text(Child(c, "Size"));
    auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), entry.size);
    if (entry.key.empty() || ec != std::errc() || end != size.data() + size.size()) {
      return MakeError(ErrorCode::kCorruptData,
                       "ListObjectsV2 response has an entry without a key or a size");
    }
    entry.etag = Text(Child(c, "ETag"));
    page.entries.push_back(std::move(entry));
  }
  page.truncated = Text(Child(root, "IsTruncated")) == "true";
  page.next_token = Text(Child(root, "NextContinuationToken"));
  if (page.truncated && page.next_token.empty()) {
    return MakeError(ErrorCode::kCorruptData,
                     "ListObjectsV2 response is truncated but has no NextContinuationToken");
  }
  return page;
}

std::string S3ErrorCode(std::string_view body) {
  if (body.find("<Error") == std::string_view::npos) return {};
  tinyxml2::XMLDocument doc;
  if (doc.Parse(body.data(), body.size()) != tinyxml2::XML_SUCCESS) return {};
  return Text(Child(doc.FirstChildElement("Error"), "Code"));
}

}  // namespace sluice::runtime::remote
