// Exact bad-sample accounting for one loader's epochs (LoaderCore keeps one).
//
// The loader feeds it what each batch it hands out (or fails on) met, in
// delivery order, so every count is deterministic: work done ahead (prefetch,
// the next epoch's first batches) is counted only when its batch is handed
// out. Per epoch it keeps
//  - the distinct samples read (good or bad) and the distinct bad samples, as
//    two bitmaps over the dataset allocated once at construction (2 bits per
//    sample; a new epoch clears them, O(dataset / 64));
//  - one record per distinct bad sample (dataset index + the first reason),
//    appended on the bad path only. Bad samples are rare and
//    on_error.max_fraction bounds them; this allocation is the one the
//    accounting does, and only for bad samples.
// Records are kept for the current epoch and the one before it, so the list
// of an epoch that just ended can still be read after the loader started the
// next one.
//
// Not thread-safe: the loader calls it under its lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sluice::runtime {

class BadSampleLedger {
 public:
  struct Record {
    uint64_t index = 0;
    std::string reason;
  };

  // `num_samples`: the dataset size (indices are [0, num_samples)).
  BadSampleLedger(uint64_t num_samples, uint64_t first_epoch);

  // Starts counting `epoch`. A different epoch than the current one moves
  // the current records to "previous" and clears the bitmaps; the current
  // epoch again (a restore into it) keeps what it has, so a sample is still
  // counted once in the epoch; so does the previous epoch (a restore back
  // into it: the two swap). An older epoch starts afresh, and its bad
  // samples count again.
  void StartEpoch(uint64_t epoch);
  // Sample `index` was read in the current epoch (good or bad).
  void AddRead(uint64_t index);
  // A bad read of `index`; `reason` is kept when it is the epoch's first of
  // that index. Returns true then (a newly found distinct bad sample).
  bool AddBad(uint64_t index, const std::string& reason);

  uint64_t epoch() const { return current_.epoch; }
  // Distinct bad samples / distinct samples read in the current epoch.
  uint64_t epoch_bad() const { return current_.records.size(); }
  uint64_t epoch_read() const { return epoch_read_; }
  // Distinct bad samples summed over every epoch counted (each sample once
  // per epoch).
  uint64_t total_bad() const { return total_bad_; }
  // The records of `epoch` sorted by index when it is the current or the
  // previous epoch; nullopt otherwise.
  std::optional<std::vector<Record>> Records(uint64_t epoch) const;

 private:
  struct EpochRecords {
    uint64_t epoch = 0;
    std::vector<Record> records;  // in the order found
  };
  static bool TestAndSet(std::vector<uint64_t>& bits, uint64_t index);

  std::vector<uint64_t> read_bits_, bad_bits_;  // current epoch, sized once
  EpochRecords current_;
  std::optional<EpochRecords> previous_;
  uint64_t epoch_read_ = 0;
  uint64_t total_bad_ = 0;
};

}  // namespace sluice::runtime
