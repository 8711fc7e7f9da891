#include "runtime/remote/object_store.h"

#include <cstdio>

#include "runtime/remote/http_store.h"
#include "runtime/remote/local_store.h"

namespace sluice::runtime::remote {
namespace {

// The URL's scheme, lower case, or "" for a plain path.
std::string SchemeOf(std::string_view url) {
  const size_t colon = url.find(':');
  if (colon == std::string_view::npos || colon == 0) return "";
  std::string scheme;
  for (char c : url.substr(0, colon)) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
    if (!ok) return "";
    scheme += c;
  }
  return scheme;
}

}  // namespace

bool IsUrl(std::string_view path) {
  const std::string scheme = SchemeOf(path);
  return scheme == "http" || scheme == "https" || scheme == "s3" || scheme == "file";
}

std::string RedactUrl(std::string_view url) {
  std::string out(url);
  const size_t scheme_end = out.find("://");
  if (scheme_end != std::string::npos) {
    const size_t host_start = scheme_end + 3;
    const size_t path_start = out.find('/', host_start);
    const size_t at = out.rfind('@', path_start == std::string::npos ? out.size() : path_start);
    if (at != std::string::npos && at >= host_start)
      out.replace(host_start, at - host_start, "***");
  }
  const size_t query = out.find('?');
  if (query != std::string::npos) out.replace(query, std::string::npos, "?***");
  return out;
}

std::vector<std::string> UrlSecrets(std::string_view url) {
  std::vector<std::string> out;
  const size_t scheme_end = url.find("://");
  if (scheme_end != std::string_view::npos) {
    const size_t host_start = scheme_end + 3;
    const size_t path_start = url.find('/', host_start);
    const size_t at =
        url.rfind('@', path_start == std::string_view::npos ? url.size() : path_start);
    if (at != std::string_view::npos && at > host_start) {
      out.emplace_back(url.substr(host_start, at - host_start));
    }
  }
  const size_t query = url.find('?');
  if (query != std::string_view::npos && query + 1 < url.size()) {
    out.emplace_back(url.substr(query + 1));
  }
  return out;
}

Error ScrubSecrets(Error e, const std::vector<std::string>& secrets) {
  for (const std::string& secret : secrets) {
    for (std::string* text : {&e.message, &e.hint}) {
      for (size_t at = text->find(secret); at != std::string::npos;
           at = text->find(secret, at + 3)) {
        text->replace(at, secret.size(), "***");
      }
    }
  }
  return e;
}

Result<std::shared_ptr<ObjectStore>> OpenObjectStore(std::string_view url,
                                                     const RemoteOptions& options) {
  const std::string scheme = SchemeOf(url);
  if (scheme == "http" || scheme == "https" || scheme == "s3") return OpenHttpStore(url, options);
  if (scheme == "file") {
    auto path = LocalPathOf(url);
    if (!path) return std::unexpected(path.error());
  } else if (!scheme.empty() && url.find("://") != std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "unknown URL scheme '" + scheme + "' in '" + RedactUrl(url) + "'",
                     "use s3://, https://, http://, file:// or a local path");
  }
  return std::shared_ptr<ObjectStore>(std::make_shared<LocalStore>());
}

std::string SecondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

}  // namespace sluice::runtime::remote
