// Offline autotuning of loader knobs (runtime/tune/autotuner.h).
#include "runtime/tune/autotuner.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plan/plan_document.h"
#include "runtime/plan/plan_internal.h"

namespace sluice::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The spec's explicit value of an output knob, or -1 when auto / absent.
int SpecKnob(const Plan& plan, const char* name) {
  const ParamValue* v = FindParam(plan.output(), name);
  if (v == nullptr || !std::holds_alternative<int64_t>(v->value)) return -1;
  return static_cast<int>(v->AsInt());
}

}  // namespace

std::string Knobs::ToString() const {
  return "threads=" + std::to_string(threads) + " in_flight=" + std::to_string(in_flight) +
         " prefetch=" + std::to_string(prefetch);
}

int64_t EstimateMemory(const Knobs& k, int64_t batch_bytes, int64_t scratch_bytes) {
  return static_cast<int64_t>(k.prefetch + 1) * batch_bytes +
         static_cast<int64_t>(std::min(k.threads, k.in_flight)) * scratch_bytes;
}

int64_t ScratchBytes(const HardwareProfile& p) {
  double file = 110000, w = 500, h = 375;
  if (p.storage && p.storage->mean_file_bytes > 0) file = p.storage->mean_file_bytes;
  if (p.storage && p.storage->mean_width > 0 && p.storage->mean_height > 0) {
    w = p.storage->mean_width;
    h = p.storage->mean_height;
  }
  return static_cast<int64_t>(file + w * h * 3);
}

Result<Trial> MeasureKnobs(const Plan& plan, const Knobs& knobs, const LoaderOptions& base,
                           double seconds) {
  LoaderOptions o = base;
  o.threads = knobs.threads;
  o.in_flight = knobs.in_flight;
  o.prefetch = knobs.prefetch;
  auto loader = Loader::Create(plan, o);
  if (!loader) return std::unexpected(loader.error());
  // Next() that skips the end-of-epoch marker; returns the samples delivered.
  auto next = [&]() -> Result<int64_t> {
    for (int tries = 0; tries < 2; ++tries) {
      auto b = loader->Next();
      if (!b) return std::unexpected(b.error());
      if (*b) return (*b)->size();
    }
    return MakeError(ErrorCode::kInvalidArgument, "the plan yields no batches on this data",
                     "the dataset needs at least one full batch per rank");
  };
  // Warm-up: the pipeline fills (pool, prefetch queue, caches); excluded.
  auto t0 = Clock::now();
  int warm = 0;
  do {
    auto n = next();
    if (!n) return std::unexpected(n.error());
    ++warm;
  } while (warm < 2 && Since(t0) < seconds * 0.2);
  const double warm_s = Since(t0);
  // Timed segments: at least 3 of at least one batch each, filling the rest.
  const double left = std::max(seconds - warm_s, 0.0);
  const double per_batch = warm_s / warm;
  const int segments = 5;
  const int batches_per_segment =
      std::max(1, static_cast<int>(left / segments / std::max(per_batch, 1e-6)));
  std::vector<double> rates;
  const double cpu0 = ProcessCpuSeconds();
  const auto w0 = Clock::now();
  auto end_by = w0 + std::chrono::duration<double>(left);
  for (int s = 0; s < segments; ++s) {
    auto ts = Clock::now();
    int64_t samples = 0;
    for (int b = 0; b < batches_per_segment; ++b) {
      auto n = next();
      if (!n) return std::unexpected(n.error());
      samples += *n;
    }
    rates.push_back(static_cast<double>(samples) / Since(ts));
    if (s >= 2 && Clock::now() > end_by) break;
  }
  const double wall = Since(w0);
  Trial t;
  t.knobs = knobs;
  t.images_per_second = Median(rates);
  auto [lo, hi] = std::minmax_element(rates.begin(), rates.end());
  t.spread = t.images_per_second > 0 ? (*hi - *lo) / t.images_per_second : 0;
  t.cpu_cores = wall > 0 ? (ProcessCpuSeconds() - cpu0) / wall : 0;
  t.memory_bytes = 0;
  return t;
}

namespace {

// One tuning run: hill climbing from a start that fits the budgets, over
// measured trials (Autotune's contract in autotuner.h). The spec's explicit
// knobs are held.
class Search {
 public:
  Search(const Plan& plan, const HardwareProfile& profile, const TuneOptions& options)
      : plan_(plan), options_(options) {
    // --cpu-budget, else the spec's output.cpu_budget, else the profile's
    // cores (the placement pass's order, docs/cost_model.md).
    const int spec_budget = SpecKnob(plan, "cpu_budget");
    result_.cpu_budget = options.cpu_budget > 0 ? options.cpu_budget
                         : spec_budget > 0      ? spec_budget
                                                : profile.cpu.cores;
    result_.memory_budget = options.memory_budget;
    budget_ = std::max(1, result_.cpu_budget);
    spec_threads_ = SpecKnob(plan, "threads");
    spec_in_flight_ = SpecKnob(plan, "in_flight");
    spec_prefetch_ = SpecKnob(plan, "prefetch");
    scratch_ = ScratchBytes(profile);
  }

  Result<TuneResult> Run() {
    SLUICE_RETURN_IF_ERROR(MeasureBatchBytes());
    auto start = StartKnobs();
    if (!start) return std::unexpected(start.error());
    t_start_ = Clock::now();
    total_s_ = std::max(2.0, options_.seconds);
    // About a dozen trials fit: a start, two or three rounds of neighbours and
    // the confirmation.
    trial_s_ = std::clamp(total_s_ / 12, 0.5, 10.0);
    SLUICE_RETURN_IF_ERROR(Climb(*start));
    SLUICE_RETURN_IF_ERROR(Confirm());
    return std::move(result_);
  }

 private:
  // Batch bytes: from a minimal loader's stats.
  Status MeasureBatchBytes() {
    LoaderOptions o = options_.base;
    o.threads = 1;
    o.in_flight = 1;
    o.prefetch = 1;
    auto probe = Loader::Create(plan_, o);
    if (!probe) return std::unexpected(probe.error());
    result_.batch_bytes = probe->Stats().batch_bytes;
    return Ok();
  }

  bool Fits(const Knobs& k) const {
    if (k.threads < 1 || k.threads > budget_) return false;
    if (k.in_flight < 1 || k.in_flight > k.threads) return false;
    if (k.prefetch < 1 || k.prefetch > options_.max_prefetch) return false;
    if (spec_threads_ > 0 && k.threads != spec_threads_) return false;
    if (spec_in_flight_ > 0 && k.in_flight != std::min(spec_in_flight_, k.threads)) return false;
    if (spec_prefetch_ > 0 && k.prefetch != spec_prefetch_) return false;
    if (options_.memory_budget > 0 &&
        EstimateMemory(k, result_.batch_bytes, scratch_) > options_.memory_budget) {
      return false;
    }
    return true;
  }

  // All cores (or the spec's threads), prefetch 2; shrunk (prefetch, then
  // threads) until it fits the memory budget.
  Result<Knobs> StartKnobs() const {
    Knobs start;
    start.threads = spec_threads_ > 0 ? std::min(spec_threads_, budget_) : budget_;
    start.in_flight =
        spec_in_flight_ > 0 ? std::min(spec_in_flight_, start.threads) : start.threads;
    start.prefetch = spec_prefetch_ > 0 ? spec_prefetch_ : 2;
    while (!Fits(start) && start.prefetch > 1 && spec_prefetch_ <= 0) start.prefetch /= 2;
    while (!Fits(start) && start.threads > 1 && spec_threads_ <= 0) {
      --start.threads;
      start.in_flight = std::min(start.in_flight, start.threads);
    }
    if (Fits(start)) return start;
    return MakeError(
        ErrorCode::kInvalidArgument,
        "no loader setting fits the budgets (cpu " + std::to_string(budget_) + ", memory " +
            std::to_string(options_.memory_budget) + " bytes; one batch buffer is " +
            std::to_string(result_.batch_bytes) + " bytes and the loader needs at least two)",
        "raise --memory-budget to at least " +
            std::to_string(EstimateMemory(Knobs{1, 1, 1}, result_.batch_bytes, scratch_)) +
            " bytes, or make the batch smaller");
  }

  // Measures `k` and records the trial.
  Result<const Trial*> Measure(const Knobs& k, const std::string& note) {
    auto t = MeasureKnobs(plan_, k, options_.base, trial_s_);
    if (!t) return std::unexpected(t.error());
    t->index = static_cast<int>(result_.trials.size()) + 1;
    t->note = note;
    t->memory_bytes = EstimateMemory(k, result_.batch_bytes, scratch_);
    result_.trials.push_back(*t);
    tried_[{k.threads, k.in_flight, k.prefetch}] = result_.trials.size() - 1;
    if (options_.on_trial) options_.on_trial(result_.trials.back());
    return &result_.trials.back();
  }

  // The untried settings one step from `current` that fit.
  std::vector<Knobs> Neighbours(const Knobs& current) const {
    std::vector<Knobs> out;
    auto add = [&](Knobs k) {
      if (Fits(k) && !tried_.count({k.threads, k.in_flight, k.prefetch})) out.push_back(k);
    };
    // A thread count change carries in_flight along when it equalled threads.
    for (int d : {+1, -1}) {
      Knobs k = current;
      k.threads += d;
      if (current.in_flight == current.threads || k.in_flight > k.threads) {
        k.in_flight = k.threads;
      }
      add(k);
      Knobs f = current;
      f.in_flight += d;
      add(f);
    }
    add(Knobs{current.threads, current.in_flight, current.prefetch * 2});
    add(Knobs{current.threads, current.in_flight, current.prefetch / 2});
    return out;
  }

  // Moves to the best neighbour while it beats the current point by
  // min_gain. The start's neighbours are always measured, however long the
  // trials took (a loaded machine must not turn the search into a single
  // trial); later rounds only while the time budget lasts.
  Status Climb(const Knobs& start) {
    auto first = Measure(start, "start");
    if (!first) return std::unexpected(first.error());
    Knobs current = start;
    double current_rate = (*first)->images_per_second;
    bool first_round = true;
    while (first_round || Since(t_start_) < total_s_ * 0.8) {
      std::vector<Knobs> neighbours = Neighbours(current);
      if (neighbours.empty()) break;
      Knobs best_n;
      double best_rate = -1;
      for (const Knobs& k : neighbours) {
        if (!first_round && Since(t_start_) >= total_s_ * 0.8) break;
        auto t = Measure(k, "neighbour");
        if (!t) return std::unexpected(t.error());
        if ((*t)->images_per_second > best_rate) {
          best_rate = (*t)->images_per_second;
          best_n = k;
        }
      }
      first_round = false;
      if (best_rate <= current_rate * (1 + options_.min_gain)) break;
      current = best_n;
      current_rate = best_rate;
    }
    return Ok();
  }

  // Confirmation: the two best settings measured again; the higher median of
  // both measurements wins (a single lucky trial does not).
  Status Confirm() {
    std::vector<size_t> order(result_.trials.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return result_.trials[a].images_per_second > result_.trials[b].images_per_second;
    });
    std::vector<std::pair<Knobs, double>> finals;
    for (size_t r = 0; r < std::min<size_t>(2, order.size()); ++r) {
      Trial first_trial = result_.trials[order[r]];
      double rate = first_trial.images_per_second;
      if (order.size() > 1 && Since(t_start_) < total_s_) {
        auto again = Measure(first_trial.knobs, "confirm");
        if (!again) return std::unexpected(again.error());
        rate = 0.5 * (rate + (*again)->images_per_second);
      }
      finals.emplace_back(first_trial.knobs, rate);
    }
    auto win = std::max_element(finals.begin(), finals.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
    result_.best = win->first;
    result_.images_per_second = win->second;
    return Ok();
  }

  const Plan& plan_;
  const TuneOptions& options_;
  TuneResult result_;
  int budget_ = 1;
  int spec_threads_ = 0, spec_in_flight_ = 0, spec_prefetch_ = 0;
  int64_t scratch_ = 0;
  Clock::time_point t_start_;
  double total_s_ = 2, trial_s_ = 0.5;
  std::map<std::tuple<int, int, int>, size_t> tried_;  // knobs -> index in trials
};

}  // namespace

Result<TuneResult> Autotune(const Plan& plan, const HardwareProfile& profile,
                            const TuneOptions& options) {
  return Search(plan, profile, options).Run();
}

Status WriteTunedKnobs(const std::string& plan_dir, const TuneResult& r,
                       const std::string& profile_machine) {
  auto doc = PlanDocument::Read(plan_dir, "plan `" + plan_dir + "`");
  if (!doc) return std::unexpected(doc.error());
  PlanTunedDoc t;
  t.threads = r.best.threads;
  t.in_flight = r.best.in_flight;
  t.prefetch = r.best.prefetch;
  t.cpu_budget = r.cpu_budget;
  t.images_per_second = r.images_per_second;
  // Informative (not read by the loader).
  if (r.memory_budget > 0) t.info["memory_budget"] = r.memory_budget;
  t.info["batch_bytes"] = r.batch_bytes;
  t.info["trials"] = r.trials.size();
  t.info["profile_machine"] = profile_machine;
  {
    char buf[32];
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    t.info["tuned_at"] = buf;
  }
  doc->tuned = std::move(t);
  return doc->Write(plan_dir);
}

}  // namespace sluice::runtime
