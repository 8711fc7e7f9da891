#include "runtime/remote/http_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "common/usable_cores.h"
#include "runtime/remote/curl_engine.h"
#include "runtime/remote/http_request.h"
#include "runtime/remote/s3_listing.h"

namespace sluice::runtime::remote {
namespace {

using Seconds = std::chrono::duration<double>;

Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(Seconds(seconds));
}

double Since(Clock::time_point start) { return Seconds(Clock::now() - start).count(); }

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
  // One streaming attempt from byte `*delivered`; advances it as the sink
  // takes bytes. A sink error lands in *sink_status. *etag: the ETag of the
  // first response that sent one; a resume (delivered > 0) sends it as
  // If-Match, and a resumed response with another ETag (a server that
  // ignores If-Match) fails too: a replaced object is an error, never two
  // versions spliced.
  Outcome RunStream(const Target& t, Clock::time_point deadline, const Sink& sink,
                    uint64_t* delivered, std::string* etag, Status* sink_status);
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

RequestSetup HttpStore::Setup(const Target& t, Clock::time_point deadline, bool range) const {
  RequestSetup s;
  s.target = &t;
  s.aws = aws();
  s.connect_timeout_s = options_.connect_timeout_s;
  s.deadline = deadline;
  s.range = range;
  return s;
}

CurlEngine* HttpStore::NextEngine(const CurlEngine* avoid) {
  size_t i = next_engine_.fetch_add(1) % engines_.size();
  if (engines_[i].get() == avoid) i = (i + 1) % engines_.size();
  return engines_[i].get();
}

Status HttpStore::Prepare(Attempt& a, Waiter& w, const RequestSetup& setup, CurlEngine* engine) {
  a.transfer.waiter = &w;
  a.transfer.engine = engine != nullptr ? engine : NextEngine();
  a.transfer.easy = a.transfer.engine->AcquireEasy();
  if (a.transfer.easy == nullptr) return MakeError(ErrorCode::kIo, "curl_easy_init failed");
  return ConfigureAttempt(a, setup);
}

void HttpStore::Launch(Attempt& a) {
  a.transfer.engine->Start(&a.transfer);
  if (cancelled_.load()) a.transfer.engine->Abort(&a.transfer);
}

void HttpStore::AbortAndWait(Attempt& a, Waiter& w) {
  a.transfer.engine->Abort(&a.transfer);
  std::unique_lock<std::mutex> lock(w.mu);
  w.cv.wait(lock, [&] { return a.transfer.done; });
}

void HttpStore::Finish(Attempt& a, Waiter& w, Clock::time_point deadline) {
  // curl's own CURLOPT_TIMEOUT_MS ends the transfer at the deadline; the slack
  // only guards against a transfer curl fails to end.
  const auto hard = deadline + std::chrono::milliseconds(250);
  {
    std::unique_lock<std::mutex> lock(w.mu);
    if (w.cv.wait_until(lock, hard, [&] { return a.transfer.done; })) return;
  }
  AbortAndWait(a, w);
}

Outcome HttpStore::RunOne(Attempt& a, const RequestSetup& setup, const char* verb) {
  Waiter w;
  EasyLease lease{&a};
  if (auto st = Prepare(a, w, setup); !st) return Outcome{Outcome::Kind::kFail, st.error()};
  Launch(a);
  Finish(a, w, setup.deadline);
  curl_easy_getinfo(a.transfer.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &a.content_length);
  Count(1, a);
  return Classify(a, *setup.target, aws(), verb, cancelled_.load());
}

Status HttpStore::CancelledError(const Target& t, const char* verb) {
  ++failures_;
  return MakeError(ErrorCode::kIo, Describe(t, verb) + ": cancelled",
                   "the store was cancelled (the loader is shutting down)");
}

bool HttpStore::Backoff(int n, Clock::time_point deadline) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  const double cap = std::min(options_.backoff_max_s,
                              options_.backoff_initial_s * std::ldexp(1.0, std::min(n, 30)));
  const double sleep = std::uniform_real_distribution<double>(0, std::max(0.0, cap))(rng);
  const auto until = std::min(deadline, After(sleep));
  std::unique_lock<std::mutex> lock(cancel_mu_);
  return !cancel_cv_.wait_until(lock, until, [&] { return cancelled_.load(); });
}

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

double HttpStore::HedgeDelay() const {
  if (options_.hedge_delay_s >= 0) return options_.hedge_delay_s;
  if (range_latency_.count() >= 20) return std::max(0.010, range_latency_.cached_p95());
  // Too few range reads to trust their p95: 4x the p95 of every call so far
  // (a source's open makes a HEAD per shard), within [10 ms, 2 s]; with
  // fewer than 8 calls, 2 s (AWS's guidance for small GETs).
  if (all_latency_.count() >= 8) return std::clamp(4 * all_latency_.cached_p95(), 0.010, 2.0);
  return 2.0;
}

Result<ObjectInfo> HttpStore::Stat(const std::string& url) {
  auto target = ResolveTarget(url, aws());
  if (!target) return std::unexpected(target.error());
  const auto start = Clock::now();
  const auto deadline = After(options_.deadline_s);
  ObjectInfo info{url, 0};
  auto st = WithRetries(*target, "HEAD", deadline, [&](Clock::time_point dl) {
    Attempt a;
    a.mode = Attempt::Mode::kHead;
    Outcome o = RunOne(a, Setup(*target, dl, false), "HEAD");
    if (o.kind != Outcome::Kind::kOk) return o;
    const curl_off_t length = a.content_length;
    if (length < 0) {
      o.kind = Outcome::Kind::kFail;
      o.error = Error{ErrorCode::kIo,
                      Describe(*target, "HEAD") + ": no Content-Length",
                      "the server must report object sizes",
                      {}};
    }
    info.size = static_cast<uint64_t>(std::max<curl_off_t>(0, length));
    return o;
  });
  if (!st) return std::unexpected(st.error());
  all_latency_.Add(Since(start));
  return info;
}

Outcome HttpStore::RunHedged(const Target& t, uint64_t offset, uint64_t length, uint8_t* out,
                             Clock::time_point deadline, double hedge_delay_s) {
  constexpr int kAttempts = 1 + kMaxHedges;
  Waiter w;
  std::array<Attempt, kAttempts> at;
  std::array<std::optional<EasyLease>, kAttempts> lease;
  std::array<std::vector<uint8_t>, kAttempts> side;  // hedges' bodies; [0] writes to out
  std::array<Outcome, kAttempts> outcome;
  std::array<bool, kAttempts> launched{}, seen{};  // seen: done and classified
  int started = 0;
  // Starts attempt `started` (a hedge into its own buffer). A hedge that
  // cannot be prepared is left out; the primary's failure is returned.
  auto start = [&]() -> Status {
    const int k = started++;
    Attempt& x = at[k];
    x.mode = Attempt::Mode::kRange;
    x.offset = offset;
    x.want = length;
    if (k > 0) side[k].resize(length);
    x.dst = k == 0 ? out : side[k].data();
    CurlEngine* engine = k == 0 ? nullptr : NextEngine(at[k - 1].transfer.engine);
    auto st = Prepare(x, w, Setup(t, deadline, true), engine);
    lease[k].emplace(&x);
    if (st) Launch(x);
    launched[k] = static_cast<bool>(st);
    seen[k] = !st;
    return st;
  };
  if (auto st = start(); !st) return {Outcome::Kind::kFail, st.error()};
  const auto delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(hedge_delay_s, 0.0)));
  auto next_hedge = hedge_delay_s > 0 ? Clock::now() + delay : Clock::time_point::max();
  const auto hard = deadline + std::chrono::milliseconds(250);
  auto unseen_done = [&] {
    for (int k = 0; k < started; ++k) {
      if (!seen[k] && at[k].transfer.done) return true;
    }
    return false;
  };
  int winner = -1;
  for (;;) {
    bool woke;
    {
      std::unique_lock<std::mutex> lock(w.mu);
      const auto wake = started < kAttempts ? std::min(hard, next_hedge) : hard;
      woke = w.cv.wait_until(lock, wake, unseen_done);
    }
    if (!woke) {
      const auto now = Clock::now();
      if (started < kAttempts && now < deadline && now >= next_hedge) {
        ++hedges_;
        (void)start();
        next_hedge = now + delay;
        continue;
      }
      break;  // past the deadline: abort below
    }
    bool final_failure = false, running = false;
    for (int k = 0; k < started; ++k) {
      if (seen[k] || !at[k].transfer.done) {
        running = running || !seen[k];
        continue;
      }
      seen[k] = true;
      outcome[k] = Classify(at[k], t, aws(), "GET", cancelled_.load());
      if (outcome[k].kind == Outcome::Kind::kOk && winner < 0) winner = k;
      if (outcome[k].kind == Outcome::Kind::kFail) final_failure = true;
    }
    if (winner >= 0 || final_failure || !running) break;
  }
  // AbortAndWait is a no-op wait for a finished transfer.
  for (int k = 0; k < started; ++k) {
    if (launched[k] && !seen[k]) AbortAndWait(at[k], w);
    if (launched[k]) Count(1, at[k]);
  }
  if (winner > 0) {
    std::memcpy(out, side[winner].data(), length);
    ++hedge_wins_;
  }
  if (winner >= 0) return Outcome{};
  for (int k = 0; k < started; ++k) {
    if (launched[k] && !seen[k]) outcome[k] = Classify(at[k], t, aws(), "GET", cancelled_.load());
  }
  // The primary's failure speaks for the attempt unless only a hedge's was final.
  for (int k = 0; k < started; ++k) {
    if (launched[k] && outcome[k].kind == Outcome::Kind::kFail) return outcome[k];
  }
  Outcome& primary = outcome[0];
  if (primary.timeout) {
    for (int k = 1; k < started; ++k) {
      if (launched[k]) primary.http_status = std::max(primary.http_status, outcome[k].http_status);
    }
  }
  return primary;
}

Status HttpStore::ReadRange(const std::string& url, uint64_t offset, uint64_t length,
                            uint8_t* out) {
  auto target = ResolveTarget(url, aws());
  if (!target) return std::unexpected(target.error());
  if (length == 0) return Ok();
  const auto start = Clock::now();
  const auto deadline = After(options_.deadline_s);
  const double hedge_delay = HedgeDelay();
  auto st = WithRetries(*target, "GET", deadline, [&](Clock::time_point dl) {
    return RunHedged(*target, offset, length, out, dl, hedge_delay);
  });
  if (!st) return st;
  const double latency = Since(start);
  all_latency_.Add(latency);
  range_latency_.Add(latency);
  return Ok();
}

Outcome HttpStore::RunStream(const Target& t, Clock::time_point deadline, const Sink& sink,
                             uint64_t* delivered, std::string* etag, Status* sink_status) {
  Waiter w;
  StreamQueue queue;
  Attempt a;
  a.mode = Attempt::Mode::kStream;
  a.stream = &queue;
  a.offset = *delivered;
  a.want = 0;  // open-ended: bytes=offset-
  if (*delivered > 0) a.if_match = *etag;
  EasyLease lease{&a};
  if (auto st = Prepare(a, w, Setup(t, deadline, *delivered > 0)); !st) {
    return Outcome{Outcome::Kind::kFail, st.error()};
  }
  Launch(a);
  const auto hard = deadline + std::chrono::milliseconds(250);
  // A stall: nothing arrives for stall_timeout_s while this side waits for
  // bytes (time spent in the sink, or paused on a full queue, is not one).
  const bool watch_stalls = options_.stall_timeout_s > 0;
  const auto stall_after = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.stall_timeout_s));
  auto waiting_since = Clock::now();
  bool stalled = false;
  std::vector<uint8_t> chunk;
  for (;;) {
    bool unpause = false;
    {
      std::unique_lock<std::mutex> lock(w.mu);
      if (!chunk.empty() || chunk.capacity() > 0) queue.spare.push_back(std::move(chunk));
      const auto until = watch_stalls ? std::min(hard, waiting_since + stall_after) : hard;
      if (!w.cv.wait_until(lock, until, [&] { return !queue.chunks.empty() || a.transfer.done; })) {
        stalled = Clock::now() < hard;
        break;
      }
      if (queue.chunks.empty()) break;  // done and drained
      chunk = std::move(queue.chunks.front());
      queue.chunks.pop_front();
      queue.queued -= chunk.size();
      if (queue.paused && queue.queued <= StreamQueue::kMaxQueued / 2) {
        queue.paused = false;
        unpause = true;
      }
    }
    if (unpause) a.transfer.engine->Unpause(&a.transfer);
    *sink_status = sink(chunk.data(), chunk.size());
    if (!*sink_status) break;
    *delivered += chunk.size();
    chunk.clear();
    waiting_since = Clock::now();
  }
  AbortAndWait(a, w);  // returns at once when the transfer has ended
  Count(1, a);
  if (etag->empty()) *etag = a.etag;  // the loop thread is done with `a`
  if (!*sink_status) return Outcome{Outcome::Kind::kFail, sink_status->error()};
  if (stalled && !cancelled_.load()) {
    Outcome o;
    o.kind = Outcome::Kind::kRetry;
    o.timeout = true;
    o.http_status = a.transfer.http_status;
    o.error = Error{ErrorCode::kIo,
                    Describe(t, "GET") + ": stalled: no byte for " +
                        SecondsText(options_.stall_timeout_s) + " after " +
                        std::to_string(*delivered) + " bytes",
                    "raise remote.stall_timeout_s for a slow link (0 turns stall detection off)",
                    {}};
    return o;
  }
  Outcome o = Classify(a, t, aws(), "GET", cancelled_.load());
  if (o.kind != Outcome::Kind::kOk) return o;
  if (!a.if_match.empty() && !a.etag.empty() && a.etag != a.if_match) {
    o.kind = Outcome::Kind::kFail;
    o.error = Error{ErrorCode::kCorruptData,
                    Describe(t, "GET") + ": the object changed while it was being read (ETag " +
                        a.if_match + ", now " + a.etag + ")",
                    kObjectChangedHint,
                    {}};
    return o;
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
  if (total >= 0 && *delivered < static_cast<uint64_t>(total)) {
    o.kind = Outcome::Kind::kRetry;
    o.short_body = true;
    o.error = Error{ErrorCode::kCorruptData,
                    Describe(t, "GET") + ": short body, " + std::to_string(*delivered) + " of " +
                        std::to_string(total) + " bytes",
                    {},
                    {}};
  }
  return o;
}

Status HttpStore::Stream(const std::string& url, const Sink& sink) {
  auto target = ResolveTarget(url, aws());
  if (!target) return std::unexpected(target.error());
  const auto start = Clock::now();
  const auto deadline = After(options_.deadline_s);
  uint64_t delivered = 0;
  std::string etag;
  Status sink_status = Ok();
  auto st = WithRetries(*target, "GET", deadline, [&](Clock::time_point dl) {
    return RunStream(*target, dl, sink, &delivered, &etag, &sink_status);
  });
  if (!sink_status) return sink_status;
  if (!st) return st;
  all_latency_.Add(Since(start));
  return Ok();
}

Result<std::vector<ObjectInfo>> HttpStore::List(const std::string& prefix) {
  auto target = ResolveTarget(prefix, aws());
  if (!target) return std::unexpected(target.error());
  if (!target->s3) {
    return MakeError(ErrorCode::kUnsupported,
                     "cannot list '" + prefix + "': HTTP servers have no listing",
                     "name the objects with a brace pattern, e.g. "
                     "https://host/dir/shard-{000000..000127}.tar");
  }
  const auto start = Clock::now();
  const auto deadline = After(options_.deadline_s);
  auto bucket = ResolveTarget("s3://" + target->bucket + "/", aws());
  if (!bucket) return std::unexpected(bucket.error());
  std::vector<ObjectInfo> out;
  std::string token;
  for (;;) {
    std::string body;
    ListPage page;
    RequestSetup setup = Setup(*target, deadline, false);
    setup.url_override =
        bucket->http_url + "?" + ListObjectsQuery(target->key, token, tuning_.list_page_size);
    auto st = WithRetries(*target, "LIST", deadline, [&](Clock::time_point dl) {
      body.clear();
      Attempt a;
      a.mode = Attempt::Mode::kBuffer;
      a.buffer = &body;
      setup.deadline = dl;
      Outcome o = RunOne(a, setup, "LIST");
      if (o.kind != Outcome::Kind::kOk) return o;
      auto parsed = ParseListObjectsResponse(body);
      if (!parsed) {
        o.kind = Outcome::Kind::kRetry;
        o.error = parsed.error();
        o.error.message = Describe(*target, "LIST") + ": " + o.error.message;
        return o;
      }
      page = std::move(*parsed);
      return o;
    });
    if (!st) return std::unexpected(st.error());
    for (auto& e : page.entries) {
      out.push_back({"s3://" + target->bucket + "/" + e.key, e.size});
    }
    if (!page.truncated) break;
    token = page.next_token;
  }
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& x, const ObjectInfo& y) { return x.url < y.url; });
  all_latency_.Add(Since(start));
  return out;
}

void HttpStore::Cancel() {
  {
    std::lock_guard<std::mutex> lock(cancel_mu_);
    cancelled_.store(true);
  }
  cancel_cv_.notify_all();
  for (auto& engine : engines_) engine->AbortAll();
}

RequestStats HttpStore::stats() const {
  RequestStats s;
  s.requests = requests_.load();
  s.bytes_fetched = bytes_fetched_.load();
  s.retries = retries_.load();
  s.hedges = hedges_.load();
  s.hedge_wins = hedge_wins_.load();
  s.timeouts = timeouts_.load();
  s.failures = failures_.load();
  s.latency_p50_s = all_latency_.Quantile(0.50);
  s.latency_p99_s = all_latency_.Quantile(0.99);
  return s;
}

}  // namespace

int IoThreadsFor(const RemoteOptions& options, unsigned hardware_threads) {
  const int wanted = options.io_threads > 0
                         ? options.io_threads
                         : std::clamp(static_cast<int>(hardware_threads / 4), 1, 4);
  return std::clamp(wanted, 1, std::max(1, options.max_connections));
}

Result<std::shared_ptr<ObjectStore>> OpenHttpStoreWithConfig(const RemoteOptions& options,
                                                             std::optional<AwsConfig> aws,
                                                             const HttpStoreTuning& tuning) {
  if (options.max_connections < 1 || options.deadline_s <= 0 || options.max_retries < 0 ||
      options.io_threads < 0 || tuning.list_page_size < 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "remote options need max_connections >= 1, deadline_s > 0, "
                     "max_retries >= 0, io_threads >= 0");
  }
  // Each loop keeps its share of the idle connections, rounded up.
  const int loops = IoThreadsFor(options, static_cast<unsigned>(UsableCores()));
  const int share = options.max_connections / loops + (options.max_connections % loops != 0);
  std::vector<std::unique_ptr<CurlEngine>> engines;
  for (int i = 0; i < loops; ++i) {
    auto engine = CurlEngine::Create(share);
    if (!engine) return std::unexpected(engine.error());
    engines.push_back(std::move(*engine));
  }
  return std::make_shared<HttpStore>(options, std::move(aws), tuning, std::move(engines));
}

Result<std::shared_ptr<ObjectStore>> OpenHttpStore(std::string_view url,
                                                   const RemoteOptions& options,
                                                   const HttpStoreTuning& tuning) {
  std::string scheme(url.substr(0, std::min(url.size(), url.find("://"))));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme != "http" && scheme != "https" && scheme != "s3") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'" + std::string(url) + "' is not an http://, https:// or s3:// URL");
  }
  std::optional<AwsConfig> aws;
  if (scheme == "s3") {
    auto config = LoadAwsConfig([](const char* name) { return std::getenv(name); });
    if (!config) return std::unexpected(config.error());
    aws = std::move(*config);
  }
  return OpenHttpStoreWithConfig(options, std::move(aws), tuning);
}

}  // namespace sluice::runtime::remote
