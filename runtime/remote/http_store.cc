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
#include "runtime/remote/http_store_internal.h"
#include "runtime/remote/s3_listing.h"

namespace sluice::runtime::remote {
namespace http_internal {

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
  if (!target) return std::unexpected(Redacted(target.error(), url));
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
    info.version = !a.etag.empty()            ? a.etag
                   : !a.last_modified.empty() ? "Last-Modified: " + a.last_modified
                                              : "";
    return o;
  });
  if (!st) return std::unexpected(Redacted(st.error(), url));
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
  if (!target) return std::unexpected(Redacted(target.error(), url));
  if (length == 0) return Ok();
  const auto start = Clock::now();
  const auto deadline = After(options_.deadline_s);
  // The hedge delay stands for small reads: a larger range is not hedged (a
  // hedge would download it again), nor counted in the latencies the delay
  // follows.
  const bool hedged = length <= kMaxHedgedRangeBytes;
  const double hedge_delay = hedged ? HedgeDelay() : 0;
  auto st = WithRetries(*target, "GET", deadline, [&](Clock::time_point dl) {
    return RunHedged(*target, offset, length, out, dl, hedge_delay);
  });
  if (!st) return std::unexpected(Redacted(st.error(), url));
  const double latency = Since(start);
  all_latency_.Add(latency);
  if (hedged) range_latency_.Add(latency);
  return Ok();
}

Result<std::vector<ObjectInfo>> HttpStore::List(const std::string& prefix) {
  auto target = ResolveTarget(prefix, aws());
  if (!target) return std::unexpected(Redacted(target.error(), prefix));
  if (!target->s3) {
    return MakeError(ErrorCode::kUnsupported,
                     "cannot list '" + RedactUrl(prefix) + "': HTTP servers have no listing",
                     "name the objects with a brace pattern, e.g. "
                     "https://host/dir/shard-{000000..000127}.tar");
  }
  const auto start = Clock::now();
  const auto deadline = After(options_.deadline_s);
  auto bucket = ResolveTarget("s3://" + target->bucket + "/", aws());
  if (!bucket) return std::unexpected(Redacted(bucket.error(), prefix));
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
    if (!st) return std::unexpected(Redacted(st.error(), prefix));
    for (auto& e : page.entries) {
      out.push_back({"s3://" + target->bucket + "/" + e.key, e.size, e.etag});
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

}  // namespace http_internal

using http_internal::HttpStore;

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
