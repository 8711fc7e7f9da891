// `sluice tune`: offline autotuning of a plan's loader knobs on real data.
//
// The tuner runs short trials through the public Loader API (LoaderOptions
// threads / in_flight / prefetch overrides), each trial a fresh Loader: a
// warm-up (the first batches, excluded), then timed segments of whole
// batches; a trial's throughput is the median of its segments' images/s, so
// one slow segment (an epoch boundary, a noisy neighbour) does not decide.
// Over each measured window it also records CPU time
// (CLOCK_PROCESS_CPUTIME_ID) / wall time = cores used.
//
// Search (tf.data AUTOTUNE's spirit: hill-climbing within CPU and RAM
// budgets, here on measurements rather than a latency model): start at
// threads = cpu budget, in_flight = threads, prefetch = 2; repeatedly try the
// untried neighbours (threads +-1, in_flight +-1, prefetch x2 / /2) that fit
// the budgets and move to the best one if it beats the current point by more
// than the noise margin; stop when none does or the time is spent (the start's
// own neighbours are always measured, even past the budget). Finally the
// two best settings are measured again and the better median wins.
//
// Budgets: threads <= cpu_budget (else the spec's output.cpu_budget, else
// the profile's cores); in_flight <= threads (a worker holds one
// sample, so more changes nothing: see loader.h); memory = (prefetch + 1)
// batch buffers + per-worker scratch (read buffer + decoded image, sized from
// the profile's mean JPEG, ImageNet's 110 kB / 500x375 when absent) must be
// <= memory_budget.
//
// Knobs the spec set explicitly are not tuned (they take precedence over
// tuned values when the loader starts); they are held at the spec's value.
//
// Thread safety: Autotune runs loaders (which use their own threads) and
// blocks the calling thread; call it from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/hardware_profile.h"
#include "sluice/loader.h"
#include "sluice/plan.h"
#include "sluice/result.h"

namespace sluice::runtime {

struct Knobs {
  int threads = 1, in_flight = 1, prefetch = 2;
  bool operator==(const Knobs&) const = default;
  std::string ToString() const;  // "threads=2 in_flight=2 prefetch=2"
};

struct Trial {
  int index = 0;  // 1-based, in the order run
  Knobs knobs;
  double images_per_second = 0;  // median of the segments
  double spread = 0;             // (max - min) / median of the segments
  double cpu_cores = 0;          // process CPU time / wall time over the measured window
  int64_t memory_bytes = 0;      // EstimateMemory of the knobs
  std::string note;              // "start", "neighbour", "confirm", "grid"
};

struct TuneOptions {
  int cpu_budget = -1;         // cores; -1 = output.cpu_budget, else cpu.cores
  int64_t memory_budget = -1;  // bytes; -1 = no limit
  double seconds = 60;         // total time for all trials (roughly)
  double min_gain = 0.03;      // a move must beat the current point by this fraction
  int max_prefetch = 16;
  LoaderOptions base;                          // sharding, seed, ... (knob fields are overridden)
  std::function<void(const Trial&)> on_trial;  // called after each trial
};

struct TuneResult {
  Knobs best;
  double images_per_second = 0;
  int cpu_budget = 0;
  int64_t memory_budget = -1;
  int64_t batch_bytes = 0;
  std::vector<Trial> trials;
};

// Memory the loader holds with `knobs`: (prefetch + 1) x batch_bytes plus
// min(threads, in_flight) x scratch_bytes.
int64_t EstimateMemory(const Knobs& knobs, int64_t batch_bytes, int64_t scratch_bytes);
// Per-worker scratch from a profile: mean file bytes + mean decoded image
// (width x height x 3), ImageNet's 110 kB and 500x375 when the profile has none.
int64_t ScratchBytes(const HardwareProfile& profile);

// One trial of `knobs` lasting about `seconds` (at least one warm-up batch and
// three timed batches). Errors: Loader's.
Result<Trial> MeasureKnobs(const Plan& plan, const Knobs& knobs, const LoaderOptions& base,
                           double seconds);

// Hill-climbs as described above. Errors: kInvalidArgument (a budget that
// admits no setting, e.g. memory below two batch buffers), Loader's.
Result<TuneResult> Autotune(const Plan& plan, const HardwareProfile& profile,
                            const TuneOptions& options);

// Reads PLAN_DIR/plan.json as a PlanDocument (plan/plan_document.h), sets its
// "tuned" object (the knobs, cpu_budget, images_per_second and informative
// fields: memory_budget, batch_bytes, trials, profile_machine, tuned_at) and
// writes it back (to a temporary file, renamed); everything else in the file
// is preserved. Errors: kNotFound, kCorruptData (not a plan document), kIo.
Status WriteTunedKnobs(const std::string& plan_dir, const TuneResult& result,
                       const std::string& profile_machine);

}  // namespace sluice::runtime
