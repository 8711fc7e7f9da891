// Inside the HTTP(S)/S3 store (http_store.h): the store class, shared by
// http_store.cc (calls, retries, hedged ranges, listing) and
// http_store_stream.cc (whole-object streams and their resumes). Not an API.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/remote/curl_engine.h"
#include "runtime/remote/http_request.h"
#include "runtime/remote/http_store.h"

namespace sluice::runtime::remote::http_internal {

// `e` with `url`'s secrets (its user-info and query) replaced by "***": the
// store's messages quote URLs as the caller gave them.
inline Error Redacted(Error e, const std::string& url) {
  return ScrubSecrets(std::move(e), UrlSecrets(url));
}

// What a whole-object stream carries from one attempt to the next.
struct StreamState {
  uint64_t delivered = 0;  // bytes the sink has taken
  // The validators of the first response that sent bytes: a resume must
  // prove it sends the same version before any of its bytes reach the sink.
  std::string etag;            // as sent (quotes kept); "" = none
  int64_t last_modified = -1;  // seconds since the epoch; -1 = none
  Status sink_status = Ok();   // the sink's error, when it failed
};

using Seconds = std::chrono::duration<double>;

inline Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(Seconds(seconds));
}

inline double Since(Clock::time_point start) { return Seconds(Clock::now() - start).count(); }

// The latencies of the last kSize successful calls, for percentiles.
class LatencyWindow {
 public:
  void Add(double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    samples_[next_++ % kSize] = seconds;
    if (next_ % 16 == 0 || next_ < 64) cached_p95_ = QuantileLocked(0.95);
  }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return next_;
  }
  double Quantile(double q) const {
    std::lock_guard<std::mutex> lock(mu_);
    return QuantileLocked(q);
  }
  double cached_p95() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_p95_;
  }

 private:
  static constexpr size_t kSize = 1024;
  double QuantileLocked(double q) const {
    const size_t n = std::min(next_, kSize);
    if (n == 0) return 0;
    std::array<double, kSize> copy;
    std::copy(samples_.begin(), samples_.begin() + n, copy.begin());
    const size_t k = std::min(n - 1, static_cast<size_t>(q * static_cast<double>(n)));
    std::nth_element(copy.begin(), copy.begin() + k, copy.begin() + n);
    return copy[k];
  }
  mutable std::mutex mu_;
  std::array<double, kSize> samples_{};
  size_t next_ = 0;
  double cached_p95_ = 0;
};

// An attempt's easy handle, returned to its engine's pool when the attempt
// is done.
struct EasyLease {
  Attempt* attempt;
  ~EasyLease() {
    if (attempt->transfer.engine != nullptr) {
      attempt->transfer.engine->ReleaseEasy(attempt->transfer.easy);
    }
  }
};

class HttpStore final : public ObjectStore {
 public:
  HttpStore(const RemoteOptions& options, std::optional<AwsConfig> aws,
            const HttpStoreTuning& tuning, std::vector<std::unique_ptr<CurlEngine>> engines)
      : options_(options), aws_(std::move(aws)), tuning_(tuning), engines_(std::move(engines)) {}

  ~HttpStore() override { Cancel(); }

  Result<ObjectInfo> Stat(const std::string& url) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  Status ReadRange(const std::string& url, uint64_t offset, uint64_t length, uint8_t* out) override;
  Status Stream(const std::string& url, const Sink& sink) override;
  void Cancel() override;
  RequestStats stats() const override;

 private:
  const AwsConfig* aws() const { return aws_ ? &*aws_ : nullptr; }
  RequestSetup Setup(const Target& t, Clock::time_point deadline, bool range) const;
  // The next engine, round robin; with several, never `avoid` (a hedge runs
  // on another loop than the request it hedges).
  CurlEngine* NextEngine(const CurlEngine* avoid = nullptr);
  // Prepares `a` for one attempt on `engine` (NextEngine() when null): an
  // easy handle from its pool, options set.
  Status Prepare(Attempt& a, Waiter& w, const RequestSetup& setup, CurlEngine* engine = nullptr);
  // Starts a prepared attempt; aborts it at once when the store is cancelled.
  void Launch(Attempt& a);
  // Waits until `a` is done, aborting it at `deadline` (plus slack).
  void Finish(Attempt& a, Waiter& w, Clock::time_point deadline);
  void AbortAndWait(Attempt& a, Waiter& w);
  // One unhedged attempt, start to classification.
  Outcome RunOne(Attempt& a, const RequestSetup& setup, const char* verb);
  // One hedged range attempt: the primary request, and up to kMaxHedges
  // hedges, each started when the latest request has run hedge_delay_s (so a
  // hedge that meets a slow server in turn is hedged again). The first to
  // succeed wins; the others are aborted.
  Outcome RunHedged(const Target& t, uint64_t offset, uint64_t length, uint8_t* out,
                    Clock::time_point deadline, double hedge_delay_s);
  // One streaming attempt from byte s.delivered; advances it as the sink
  // takes bytes. A resume (delivered > 0) must show the first response's
  // version before any of its bytes reaches the sink (ResumeVerdict): a
  // replaced object is an error, never two versions spliced.
  Outcome RunStream(const Target& t, Clock::time_point deadline, const Sink& sink, StreamState& s);
  // Prepares and starts a stream attempt from s.delivered: If-Match with the
  // first response's ETag, else If-Range with its Last-Modified.
  Status StartStream(Attempt& a, Waiter& w, const Target& t, Clock::time_point deadline,
                     const StreamState& s);
  // Hands the attempt's chunks to the sink until it ends, stalls, the sink
  // fails or a resume is refused. True when it stalled.
  bool PumpStream(Attempt& a, Waiter& w, const Target& t, Clock::time_point deadline,
                  const Sink& sink, StreamState& s, std::optional<Outcome>* refused);
  // The outcome of a stream attempt that ran to its end.
  Outcome FinishStream(Attempt& a, const Target& t, bool stalled, StreamState& s);
  // Runs `attempt` until it succeeds, fails for good, the retries are spent,
  // the deadline passes or the store is cancelled.
  template <class F>
  Status WithRetries(const Target& t, const char* verb, Clock::time_point deadline, F&& attempt);
  // Sleeps the backoff before retry n (0-based); false when cancelled.
  bool Backoff(int n, Clock::time_point deadline);
  double HedgeDelay() const;
  Status CancelledError(const Target& t, const char* verb);
  void Count(uint64_t requests, const Attempt& a) {
    requests_ += requests;
    bytes_fetched_ += a.body_bytes;
  }

  const RemoteOptions options_;
  const std::optional<AwsConfig> aws_;
  const HttpStoreTuning tuning_;
  std::vector<std::unique_ptr<CurlEngine>> engines_;  // at least one
  std::atomic<size_t> next_engine_{0};
  std::atomic<bool> cancelled_{false};
  std::mutex cancel_mu_;  // for the backoff sleeps
  std::condition_variable cancel_cv_;
  std::atomic<uint64_t> requests_{0}, bytes_fetched_{0}, retries_{0}, hedges_{0}, hedge_wins_{0},
      timeouts_{0}, failures_{0};
  LatencyWindow all_latency_, range_latency_;
};

template <class F>
Status HttpStore::WithRetries(const Target& t, const char* verb, Clock::time_point deadline,
                              F&& attempt) {
  Outcome last;
  long last_status = 0;
  int attempts = 0;
  bool deadline_hit = false;
  for (int n = 0;; ++n) {
    if (cancelled_.load()) return CancelledError(t, verb);
    if (Clock::now() >= deadline) {
      deadline_hit = true;
      break;
    }
    last = attempt(deadline);
    ++attempts;
    if (last.http_status > 0) last_status = last.http_status;
    if (last.timeout) ++timeouts_;
    if (last.kind == Outcome::Kind::kOk) return Ok();
    if (last.kind == Outcome::Kind::kFail) {
      // A HEAD told "404" answered its question (is the object there?), as
      // for the optional index and manifest: not a failure of the store.
      const bool absent =
          last.error.code == ErrorCode::kNotFound && std::string_view(verb) == "HEAD";
      if (!absent) ++failures_;
      return std::unexpected(std::move(last.error));
    }
    if (cancelled_.load()) return CancelledError(t, verb);
    if (n >= options_.max_retries) break;
    if (!Backoff(n, deadline)) return CancelledError(t, verb);
    ++retries_;
  }
  ++failures_;
  Error e = attempts > 0 ? std::move(last.error)
                         : Error{ErrorCode::kIo, Describe(t, verb) + ": timed out", {}, {}};
  deadline_hit = deadline_hit || Clock::now() >= deadline;
  e.message += deadline_hit ? "; deadline of " + std::to_string(options_.deadline_s) +
                                  " s reached after " + std::to_string(attempts) + " attempt(s)"
                            : "; gave up after " + std::to_string(attempts) + " attempt(s)";
  if (last_status > 0 && e.message.find("HTTP ") == std::string::npos) {
    e.message += ", last HTTP status " + std::to_string(last_status);
  }
  if (e.hint.empty()) {
    e.hint =
        "the server kept failing; raise remote.deadline_s / remote.max_retries, or check "
        "the server";
  }
  return std::unexpected(std::move(e));
}

}  // namespace sluice::runtime::remote::http_internal
