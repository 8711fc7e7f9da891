#include "runtime/remote/http_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>

#include "runtime/remote/object_store.h"
#include "runtime/remote/s3_listing.h"

namespace sluice::runtime::remote {
namespace {

constexpr size_t kMaxErrorBody = 4096;
constexpr size_t kMaxBuffer = size_t{256} << 20;  // a listing page is ~ 300 KB
constexpr long kReceiveBufferBytes = 256 << 10;

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

long Status2xx(CURL* easy) {
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

// The first 2xx body byte of a ranged attempt: a 200 means the server ignored
// Range and sends the object from byte 0; a 206 sends its Content-Range, which
// may start before the asked offset (the extra leading bytes are dropped) but
// never after it (range_mismatch: those bytes are not the ones asked for). A
// 206 without Content-Range (RFC 9110 requires one) cannot be placed: a
// mismatch too.
void OnFirstBody(Attempt& a, long status) {
  a.started = true;
  if (status == 200) a.skip = a.offset;
  if (status != 206) return;
  const auto start = static_cast<uint64_t>(a.content_range_start);
  if (a.content_range_start < 0 || start > a.offset) {
    a.range_mismatch = true;
  } else {
    a.skip = a.offset - start;
  }
}

size_t OnStreamBody(Attempt& a, const uint8_t* p, size_t n) {
  std::lock_guard<std::mutex> lock(a.transfer.waiter->mu);
  StreamQueue& q = *a.stream;
  if (q.queued >= StreamQueue::kMaxQueued) {
    q.paused = true;
    return CURL_WRITEFUNC_PAUSE;  // curl delivers the same bytes again after Unpause
  }
  const size_t drop = static_cast<size_t>(std::min<uint64_t>(a.skip, n));
  a.skip -= drop;
  a.body_bytes += n;
  if (drop == n) return n;
  std::vector<uint8_t> chunk;
  if (!q.spare.empty()) {
    chunk = std::move(q.spare.back());
    q.spare.pop_back();
  }
  chunk.assign(p + drop, p + n);
  q.queued += chunk.size();
  q.chunks.push_back(std::move(chunk));
  a.transfer.waiter->cv.notify_all();
  return n;
}

size_t OnBody(char* data, size_t size, size_t nmemb, void* user) {
  Attempt& a = *static_cast<Attempt*>(user);
  const size_t n = size * nmemb;
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  const long status = Status2xx(a.transfer.easy);
  if (status < 200 || status >= 300) {
    const size_t keep = std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, a.error_body.size()));
    a.error_body.append(data, keep);
    return n;
  }
  if (!a.started) OnFirstBody(a, status);
  if (a.range_mismatch) return 0;  // curl ends the transfer (CURLE_WRITE_ERROR)
  switch (a.mode) {
    case Attempt::Mode::kHead:
      return n;
    case Attempt::Mode::kBuffer:
      if (a.buffer->size() + n > kMaxBuffer) return 0;
      a.buffer->append(data, n);
      a.body_bytes += n;
      return n;
    case Attempt::Mode::kStream:
      return OnStreamBody(a, p, n);
    case Attempt::Mode::kRange: {
      a.body_bytes += n;
      size_t pos = static_cast<size_t>(std::min<uint64_t>(a.skip, n));
      a.skip -= pos;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n - pos, a.want - a.got));
      std::memcpy(a.dst + a.got, p + pos, take);
      a.got += take;
      pos += take;
      if (a.got == a.want && pos < n) {
        a.complete = true;  // more than asked for (a 200): stop here
        return 0;
      }
      return n;
    }
  }
  return 0;
}

size_t OnHeader(char* data, size_t size, size_t nmemb, void* user) {
  Attempt& a = *static_cast<Attempt*>(user);
  const std::string_view line(data, size * nmemb);
  if (StartsWithNoCase(line, "etag:")) {
    a.etag.assign(Trim(line.substr(5)));
  } else if (StartsWithNoCase(line, "last-modified:")) {
    a.last_modified.assign(Trim(line.substr(14)));
  } else if (StartsWithNoCase(line, "x-amz-bucket-region:")) {
    a.bucket_region.assign(Trim(line.substr(20)));
  } else if (StartsWithNoCase(line, "content-range:")) {
    const std::string_view value = Trim(line.substr(14));
    if (StartsWithNoCase(value, "bytes ")) {
      int64_t start = -1;
      std::from_chars(value.data() + 6, value.data() + value.size(), start);
      a.content_range_start = start;
    }
    if (const size_t slash = value.rfind('/'); slash != std::string_view::npos) {
      int64_t total = -1;
      std::from_chars(value.data() + slash + 1, value.data() + value.size(), total);
      a.content_range_total = total;
    }
  }
  return size * nmemb;
}

// Rounded up, so that curl's timeout never ends a transfer before the
// deadline it stands for (a retry loop would then see time left and send a
// pointless last attempt of a millisecond).
long Millis(double seconds) {
  return std::max<long>(1, static_cast<long>(std::ceil(seconds * 1000)));
}

// A plain HTTP server's 401 / 403 (S3's: S3Hint).
std::string Hint403() {
  return "the server refused access: check the URL and the server's access rules";
}

std::string Hint404(const Target& t) {
  if (!t.s3) return "check the URL (host, directory and file name)";
  return "check the bucket '" + t.bucket + "' and the key '" + t.key +
         "' (keys are case-sensitive; list the prefix to see what exists)" +
         std::string(" and AWS_ENDPOINT_URL for a non-AWS store");
}

bool RetryableCurlCode(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

bool IsAsciiAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// The bucket goes into the request's host or path unencoded: only what a
// bucket name may hold (AWS: lower-case letters, digits, dots and hyphens;
// older AWS buckets and GCS also upper case and underscores; Ceph RGW
// "tenant:bucket" on its own endpoint), starting and ending with a letter or
// digit (so never "." or "..", which a URL path would resolve).
bool IsBucketName(std::string_view bucket, bool custom_endpoint) {
  if (bucket.empty() || bucket.size() > 255) return false;
  if (!IsAsciiAlnum(bucket.front()) || !IsAsciiAlnum(bucket.back())) return false;
  return std::all_of(bucket.begin(), bucket.end(), [&](char c) {
    return IsAsciiAlnum(c) || c == '.' || c == '-' || c == '_' || (custom_endpoint && c == ':');
  });
}

}  // namespace

Attempt::~Attempt() { curl_slist_free_all(headers); }

std::string Describe(const Target& target, const char* verb) {
  std::string s = std::string(verb) + " " + RedactUrl(target.url);
  if (target.s3) s += " (" + RedactUrl(target.http_url) + ")";
  return s;
}

std::string S3Hint(long status, const Target& t, const AwsConfig* aws, const std::string& s3code,
                   const std::string& bucket_region) {
  const std::string region = aws != nullptr ? aws->region : std::string("?");
  const std::string source = aws != nullptr ? aws->credentials_source : std::string("none");
  const bool other_region = !bucket_region.empty() && bucket_region != region;
  const std::string in_region = other_region
                                    ? "bucket '" + t.bucket + "' is in region " + bucket_region +
                                          ", not " + region + ": set AWS_REGION=" + bucket_region
                                    : "bucket '" + t.bucket + "' is in another region than " +
                                          region + ": set AWS_REGION to the bucket's region";
  const bool wrong_region = status == 301 || status == 307 ||
                            s3code == "AuthorizationHeaderMalformed" ||
                            s3code == "PermanentRedirect" || other_region;
  if (wrong_region) return in_region;
  const std::string credentials =
      "the credentials (from " + source +
      "; AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN or AWS_PROFILE)";
  if (status == 400) {
    return "check " + credentials +
           ": a temporary session token may have expired (ExpiredToken: get fresh "
           "credentials) or be incomplete; and the region (" +
           region + "): a bucket in another region answers 400 to requests signed for this one";
  }
  return "check " + credentials + ", the region (" + region + "), that bucket '" + t.bucket +
         "' exists and that they may read key '" + t.key + "'";
}

Result<Target> ResolveTarget(const std::string& url, const AwsConfig* aws) {
  Target t;
  t.url = url;
  const size_t colon = url.find("://");
  std::string scheme = colon == std::string::npos ? "" : url.substr(0, colon);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme == "http" || scheme == "https") {
    if (url.size() <= colon + 3) {
      return MakeError(ErrorCode::kInvalidArgument, "URL '" + url + "' has no host");
    }
    t.http_url = url;
    return t;
  }
  if (scheme != "s3") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'" + url + "' is not an http://, https:// or s3:// URL");
  }
  if (aws == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'" + url + "' is an s3:// URL but this store was opened for HTTP");
  }
  const std::string rest = url.substr(colon + 3);
  const size_t slash = rest.find('/');
  t.s3 = true;
  t.bucket = rest.substr(0, slash);
  t.key = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (t.bucket.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "s3 URL '" + url + "' has no bucket",
                     "write s3://BUCKET/KEY");
  }
  if (!IsBucketName(t.bucket, !aws->endpoint.empty())) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "s3 URL '" + url + "' has an invalid bucket name '" + t.bucket + "'",
                     "a bucket name holds letters, digits, dots, hyphens and underscores (and "
                     "a Ceph tenant's ':' with a custom endpoint), starts and ends with a letter "
                     "or digit, at most 255; write s3://BUCKET/KEY");
  }
  const std::string key = UriEncode(t.key, true);
  const bool host_label = std::all_of(t.bucket.begin(), t.bucket.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
  if (!aws->endpoint.empty()) {
    t.http_url = aws->endpoint + "/" + t.bucket + "/" + key;  // path-style
  } else if (!host_label) {  // dots, upper case or underscores: path-style
    t.http_url = "https://s3." + aws->region + ".amazonaws.com/" + t.bucket + "/" + key;
  } else {
    t.http_url = "https://" + t.bucket + ".s3." + aws->region + ".amazonaws.com/" + key;
  }
  return t;
}

Status ConfigureAttempt(Attempt& a, const RequestSetup& s) {
  CURL* e = a.transfer.easy;
  const double remaining = std::chrono::duration<double>(s.deadline - Clock::now()).count();
  const std::string& url = s.url_override.empty() ? s.target->http_url : s.url_override;
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_PRIVATE, &a.transfer);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, a.curl_error);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_USERAGENT, "sluice/" SLUICE_VERSION);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, Millis(std::min(s.connect_timeout_s, remaining)));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, Millis(remaining));
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &a);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &a);
  if (a.mode == Attempt::Mode::kHead) curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  // Bodies arrive in receive-buffer-sized pieces, each a recv() and an OnBody
  // call: a sample range (~100 KB) takes one or two instead of curl's default
  // 16 KB pieces.
  if (a.mode == Attempt::Mode::kRange || a.mode == Attempt::Mode::kStream) {
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, kReceiveBufferBytes);
  }
  std::string range;
  if (s.range) {
    range = std::to_string(a.offset) + "-";
    if (a.want > 0) range += std::to_string(a.offset + a.want - 1);
    curl_easy_setopt(e, CURLOPT_RANGE, range.c_str());  // curl copies the string
  }
  if (!s.target->s3) {
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
  } else if (s.aws != nullptr && !s.aws->access_key.empty()) {
    const std::string sigv4 = "aws:amz:" + s.aws->region + ":s3";
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(e, CURLOPT_USERNAME, s.aws->access_key.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, s.aws->secret_key.c_str());
    // S3 wants the payload hash header; curl signs it as given (GET: no body).
    a.headers = curl_slist_append(a.headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!s.aws->session_token.empty()) {
      a.headers =
          curl_slist_append(a.headers, ("x-amz-security-token: " + s.aws->session_token).c_str());
    }
  }
  if (!a.if_match.empty()) {
    a.headers = curl_slist_append(a.headers, ("If-Match: " + a.if_match).c_str());
  }
  if (a.headers != nullptr) curl_easy_setopt(e, CURLOPT_HTTPHEADER, a.headers);
  return Ok();
}

Outcome Classify(const Attempt& a, const Target& t, const AwsConfig* aws, const char* verb,
                 bool cancelled) {
  Outcome o;
  const Transfer& tr = a.transfer;
  o.http_status = tr.http_status;
  const std::string what = Describe(t, verb);
  auto fail = [&](Outcome::Kind kind, ErrorCode code, std::string msg, std::string hint = {}) {
    o.kind = kind;
    o.error = Error{code, what + ": " + msg, std::move(hint), {}};
    return o;
  };
  if (tr.aborted) {
    if (cancelled) return fail(Outcome::Kind::kFail, ErrorCode::kIo, "cancelled");
    o.timeout = true;
    return fail(Outcome::Kind::kRetry, ErrorCode::kIo, "timed out");
  }
  if (a.range_mismatch) {
    const std::string answer =
        a.content_range_start < 0
            ? "without a Content-Range"
            : "with Content-Range starting at byte " + std::to_string(a.content_range_start);
    return fail(Outcome::Kind::kRetry, ErrorCode::kCorruptData,
                "HTTP " + std::to_string(tr.http_status) + " " + answer +
                    ", for a range from byte " + std::to_string(a.offset) +
                    "; its bytes were not used",
                "the server or a proxy in between answers ranges wrongly");
  }
  const bool transport_ok = tr.code == CURLE_OK || (tr.code == CURLE_WRITE_ERROR && a.complete);
  const long st = tr.http_status;
  if (transport_ok || (st >= 300 && tr.code != CURLE_OPERATION_TIMEDOUT)) {
    const std::string s3code = S3ErrorCode(a.error_body);
    // A HEAD answer has no body, so no S3 error code to show: say so.
    const bool s3_refusal = t.s3 && (st == 400 || st == 401 || st == 403);
    const std::string status = "HTTP " + std::to_string(st) +
                               (!s3code.empty() ? " (" + s3code + ")"
                                : s3_refusal && a.mode == Attempt::Mode::kHead
                                    ? " (a HEAD answer carries no S3 error code)"
                                    : "");
    if (st == 404) return fail(Outcome::Kind::kFail, ErrorCode::kNotFound, status, Hint404(t));
    if (st == 401 || st == 403) {
      return fail(Outcome::Kind::kFail, ErrorCode::kIo, status,
                  t.s3 ? S3Hint(st, t, aws, s3code, a.bucket_region) : Hint403());
    }
    if (st == 412) {
      return fail(Outcome::Kind::kFail, ErrorCode::kCorruptData,
                  status + ": the object changed while it was being read (its ETag " + a.if_match +
                      " no longer matches)",
                  kObjectChangedHint);
    }
    if (st == 416) {
      return fail(Outcome::Kind::kFail, ErrorCode::kCorruptData,
                  status + ": range starting at byte " + std::to_string(a.offset) +
                      " is past the end of the object");
    }
    if (st == 408 || st == 429 || st >= 500) {
      return fail(Outcome::Kind::kRetry, ErrorCode::kIo, status);
    }
    if (t.s3 && (st == 301 || st == 307 || st == 400)) {
      return fail(Outcome::Kind::kFail, ErrorCode::kIo, status,
                  S3Hint(st, t, aws, s3code, a.bucket_region));
    }
    if (st < 200 || st >= 300) return fail(Outcome::Kind::kFail, ErrorCode::kIo, status);
    if (a.mode == Attempt::Mode::kRange) {
      const int64_t total = st == 206 ? a.content_range_total : -1;
      if (a.got < a.want && total >= 0 && a.offset + a.want > static_cast<uint64_t>(total)) {
        return fail(Outcome::Kind::kFail, ErrorCode::kCorruptData,
                    "range [" + std::to_string(a.offset) + ", " +
                        std::to_string(a.offset + a.want) + ") is past the end of the object (" +
                        std::to_string(total) + " bytes)");
      }
      if (a.got < a.want) {
        o.short_body = true;
        return fail(Outcome::Kind::kRetry, ErrorCode::kCorruptData,
                    status + ": short body, " + std::to_string(a.got) + " of " +
                        std::to_string(a.want) + " bytes");
      }
    }
    return o;
  }
  const std::string status_note =
      st > 0 ? " (HTTP " + std::to_string(st) + ")" : std::string(" (no HTTP status)");
  const std::string detail = a.curl_error[0] != '\0' ? a.curl_error : curl_easy_strerror(tr.code);
  if (tr.code == CURLE_OPERATION_TIMEDOUT) o.timeout = true;
  if (tr.code == CURLE_PARTIAL_FILE) o.short_body = true;
  if (RetryableCurlCode(tr.code)) {
    return fail(Outcome::Kind::kRetry, o.short_body ? ErrorCode::kCorruptData : ErrorCode::kIo,
                detail + status_note);
  }
  return fail(Outcome::Kind::kFail, ErrorCode::kIo, detail + status_note);
}

}  // namespace sluice::runtime::remote
