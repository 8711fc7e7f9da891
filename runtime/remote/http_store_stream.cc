// Whole-object streams of the HTTP(S)/S3 store (http_store_internal.h):
// chunks handed to the caller's sink as they arrive, stalls detected, and a
// broken stream resumed from its first undelivered byte only when the resumed
// response provably sends the same version of the object (docs/remote.md,
// "Failure behaviour").
#include <curl/curl.h>

#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "runtime/remote/http_store_internal.h"

namespace sluice::runtime::remote::http_internal {
namespace {

// An IMF-fixdate (RFC 9110 5.6.7), independent of the locale.
std::string HttpDate(int64_t seconds) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[64];
  std::snprintf(text, sizeof text, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday % 7],
                tm.tm_mday, kMonths[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return text;
}

Outcome Changed(const Target& t, const std::string& detail) {
  Outcome o;
  o.kind = Outcome::Kind::kFail;
  o.error = Error{ErrorCode::kCorruptData,
                  Describe(t, "GET") + ": the object changed while it was being read (" + detail +
                      "); no byte of the resumed response was used",
                  kObjectChangedHint,
                  {}};
  return o;
}

// Whether a resumed attempt sends the version the stream started with,
// decided at its first body byte (all its headers have arrived; the caller
// holds the waiter's lock, under which the loop queued that byte). nullopt
// when it does. With an ETag the resume asked If-Match, so the answer must
// carry the same ETag (a server that ignores If-Match may send another
// version); without one it asked If-Range with the Last-Modified date, so a
// 206 is the same version and a 200 (the whole object) means it changed.
std::optional<Outcome> ResumeVerdict(const Attempt& a, const Target& t, const StreamState& s) {
  if (!s.etag.empty()) {
    if (a.etag == s.etag) return std::nullopt;
    return Changed(t, "ETag " + s.etag + ", now " + (a.etag.empty() ? "none" : a.etag));
  }
  if (a.content_range_start >= 0) return std::nullopt;
  return Changed(t, "Last-Modified " + HttpDate(s.last_modified) +
                        "; the resume's If-Range was answered with the whole object");
}

}  // namespace

Status HttpStore::StartStream(Attempt& a, Waiter& w, const Target& t, Clock::time_point deadline,
                              const StreamState& s) {
  const bool resume = s.delivered > 0;
  a.mode = Attempt::Mode::kStream;
  a.offset = s.delivered;
  a.want = 0;  // open-ended: bytes=offset-
  if (resume) a.if_match = s.etag;
  SLUICE_RETURN_IF_ERROR(Prepare(a, w, Setup(t, deadline, resume)));
  CURL* easy = a.transfer.easy;
  curl_easy_setopt(easy, CURLOPT_FILETIME, 1L);  // Last-Modified, for a resume
  if (resume && s.etag.empty()) {
    curl_slist* list =
        curl_slist_append(a.headers, ("If-Range: " + HttpDate(s.last_modified)).c_str());
    if (list == nullptr) return MakeError(ErrorCode::kIo, "curl_slist_append failed");
    a.headers = list;
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, a.headers);
  }
  Launch(a);
  return Ok();
}

bool HttpStore::PumpStream(Attempt& a, Waiter& w, const Target& t, Clock::time_point deadline,
                           const Sink& sink, StreamState& s, std::optional<Outcome>* refused) {
  StreamQueue& queue = *a.stream;
  bool checked = a.offset == 0;  // a resume is checked before its first byte is used
  const auto hard = deadline + std::chrono::milliseconds(250);
  // A stall: nothing arrives for stall_timeout_s while this side waits for
  // bytes (time spent in the sink, or paused on a full queue, is not one).
  const bool watch_stalls = options_.stall_timeout_s > 0;
  const auto stall_after = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.stall_timeout_s));
  auto waiting_since = Clock::now();
  std::vector<uint8_t> chunk;
  for (;;) {
    bool unpause = false;
    {
      std::unique_lock<std::mutex> lock(w.mu);
      if (!chunk.empty() || chunk.capacity() > 0) queue.spare.push_back(std::move(chunk));
      const auto until = watch_stalls ? std::min(hard, waiting_since + stall_after) : hard;
      if (!w.cv.wait_until(lock, until, [&] { return !queue.chunks.empty() || a.transfer.done; })) {
        return Clock::now() < hard;
      }
      if (queue.chunks.empty()) return false;  // done and drained
      if (!checked) {
        checked = true;
        *refused = ResumeVerdict(a, t, s);
        if (refused->has_value()) return false;
      }
      chunk = std::move(queue.chunks.front());
      queue.chunks.pop_front();
      queue.queued -= chunk.size();
      if (queue.paused && queue.queued <= StreamQueue::kMaxQueued / 2) {
        queue.paused = false;
        unpause = true;
      }
    }
    if (unpause) a.transfer.engine->Unpause(&a.transfer);
    s.sink_status = sink(chunk.data(), chunk.size());
    if (!s.sink_status) return false;
    s.delivered += chunk.size();
    chunk.clear();
    waiting_since = Clock::now();
  }
}

Outcome HttpStore::FinishStream(Attempt& a, const Target& t, bool stalled, StreamState& s) {
  if (!s.sink_status) return Outcome{Outcome::Kind::kFail, s.sink_status.error()};
  if (stalled && !cancelled_.load()) {
    Outcome o;
    o.kind = Outcome::Kind::kRetry;
    o.timeout = true;
    o.http_status = a.transfer.http_status;
    o.error = Error{ErrorCode::kIo,
                    Describe(t, "GET") + ": stalled: no byte for " +
                        SecondsText(options_.stall_timeout_s) + " after " +
                        std::to_string(s.delivered) + " bytes",
                    "raise remote.stall_timeout_s for a slow link (0 turns stall detection off)",
                    {}};
    return o;
  }
  Outcome o = Classify(a, t, aws(), "GET", cancelled_.load());
  if (o.kind != Outcome::Kind::kOk) return o;
  // A resumed response that sent no body byte was never checked.
  if (a.offset > 0 && !s.etag.empty() && a.etag != s.etag) {
    return Changed(t, "ETag " + s.etag + ", now " + (a.etag.empty() ? "none" : a.etag));
  }
  // A clean end must have delivered the whole object.
  int64_t total = -1;
  curl_off_t length = -1;
  curl_easy_getinfo(a.transfer.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  if (o.http_status == 206) {
    total = a.content_range_total;
  } else if (length >= 0) {
    total = length;
  }
  if (total >= 0 && s.delivered < static_cast<uint64_t>(total)) {
    o.kind = Outcome::Kind::kRetry;
    o.short_body = true;
    o.error = Error{ErrorCode::kCorruptData,
                    Describe(t, "GET") + ": short body, " + std::to_string(s.delivered) + " of " +
                        std::to_string(total) + " bytes",
                    {},
                    {}};
  }
  return o;
}

Outcome HttpStore::RunStream(const Target& t, Clock::time_point deadline, const Sink& sink,
                             StreamState& s) {
  Waiter w;
  StreamQueue queue;
  Attempt a;
  a.stream = &queue;
  EasyLease lease{&a};
  if (auto st = StartStream(a, w, t, deadline, s); !st) {
    return Outcome{Outcome::Kind::kFail, st.error()};
  }
  std::optional<Outcome> refused;
  const bool stalled = PumpStream(a, w, t, deadline, sink, s, &refused);
  AbortAndWait(a, w);  // returns at once when the transfer has ended
  Count(1, a);
  if (refused) return std::move(*refused);
  // The validators of the response the stream started with (the loop
  // thread is done with `a`).
  if (a.offset == 0 && s.delivered > 0) {
    s.etag = a.etag;
    curl_off_t modified = -1;
    curl_easy_getinfo(a.transfer.easy, CURLINFO_FILETIME_T, &modified);
    s.last_modified = modified;
  }
  Outcome o = FinishStream(a, t, stalled, s);
  if (o.kind == Outcome::Kind::kRetry && s.delivered > 0 && s.etag.empty() && s.last_modified < 0) {
    // Nothing can show that a resumed response is the same version.
    o.kind = Outcome::Kind::kFail;
    o.error.message += "; not resumed after " + std::to_string(s.delivered) +
                       " bytes: the server sent neither an ETag nor a Last-Modified, so the "
                       "rest could come from another version of the object";
    o.error.hint =
        "serve the objects with an ETag or Last-Modified header (object stores and "
        "common web servers send them)";
  }
  return o;
}

Status HttpStore::Stream(const std::string& url, const Sink& sink) {
  auto target = ResolveTarget(url, aws());
  if (!target) return std::unexpected(Redacted(target.error(), url));
  const auto start = Clock::now();
  const auto deadline = After(options_.deadline_s);
  StreamState s;
  auto st = WithRetries(*target, "GET", deadline,
                        [&](Clock::time_point dl) { return RunStream(*target, dl, sink, s); });
  if (!s.sink_status) return std::unexpected(Redacted(s.sink_status.error(), url));
  if (!st) return std::unexpected(Redacted(st.error(), url));
  all_latency_.Add(Since(start));
  return Ok();
}

}  // namespace sluice::runtime::remote::http_internal
