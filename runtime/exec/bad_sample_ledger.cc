// BadSampleLedger: see bad_sample_ledger.h for the contract.
#include "runtime/exec/bad_sample_ledger.h"

#include <algorithm>

namespace sluice::runtime {

BadSampleLedger::BadSampleLedger(uint64_t num_samples, uint64_t first_epoch)
    : read_bits_((num_samples + 63) / 64, 0), bad_bits_((num_samples + 63) / 64, 0) {
  current_.epoch = first_epoch;
}

bool BadSampleLedger::TestAndSet(std::vector<uint64_t>& bits, uint64_t index) {
  const size_t word = static_cast<size_t>(index / 64);
  if (word >= bits.size()) return false;  // not a dataset index: never counted
  const uint64_t mask = uint64_t{1} << (index % 64);
  if (bits[word] & mask) return false;
  bits[word] |= mask;
  return true;
}

void BadSampleLedger::StartEpoch(uint64_t epoch) {
  if (epoch == current_.epoch) return;
  std::fill(read_bits_.begin(), read_bits_.end(), 0);
  std::fill(bad_bits_.begin(), bad_bits_.end(), 0);
  epoch_read_ = 0;
  if (previous_ && previous_->epoch == epoch) {
    // Back into the epoch before (a restore): its bad samples were counted.
    // They are marked again; its reads are not known any more, so the
    // distinct-read count starts from them.
    std::swap(current_, *previous_);
    for (const Record& r : current_.records) {
      TestAndSet(bad_bits_, r.index);
      if (TestAndSet(read_bits_, r.index)) ++epoch_read_;
    }
    return;
  }
  previous_ = std::move(current_);
  current_ = EpochRecords{};
  current_.epoch = epoch;
}

void BadSampleLedger::AddRead(uint64_t index) {
  if (TestAndSet(read_bits_, index)) ++epoch_read_;
}

bool BadSampleLedger::AddBad(uint64_t index, const std::string& reason) {
  AddRead(index);
  if (!TestAndSet(bad_bits_, index)) return false;
  current_.records.push_back(Record{index, reason});
  ++total_bad_;
  return true;
}

std::optional<std::vector<BadSampleLedger::Record>> BadSampleLedger::Records(uint64_t epoch) const {
  const EpochRecords* found = nullptr;
  if (epoch == current_.epoch) {
    found = &current_;
  } else if (previous_ && previous_->epoch == epoch) {
    found = &*previous_;
  }
  if (found == nullptr) return std::nullopt;
  std::vector<Record> sorted = found->records;
  std::sort(sorted.begin(), sorted.end(),
            [](const Record& a, const Record& b) { return a.index < b.index; });
  return sorted;
}

}  // namespace sluice::runtime
