// Latency samples for percentiles: keeps the most recent `capacity` values in a
// fixed ring (allocated once) plus the all-time maximum.
//
// Thread safety: none; callers serialize (the loader records under its lock).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace sluice::runtime {

class LatencyRecorder {
 public:
  explicit LatencyRecorder(size_t capacity = 4096) : ring_(capacity) {}

  void Add(double seconds) {
    ring_[next_ % ring_.size()] = seconds;
    ++next_;
    max_ = std::max(max_, seconds);
  }
  size_t count() const { return std::min(next_, ring_.size()); }
  double max() const { return max_; }
  // The recorded window (at most `capacity` values, in ring order).
  std::vector<double> Values() const {
    return std::vector<double>(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(count()));
  }
  // The q-quantile (0 <= q <= 1, nearest rank) of the recorded window; 0 when empty.
  double Quantile(double q) const {
    size_t n = count();
    if (n == 0) return 0;
    std::vector<double> v(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(n));
    size_t k = static_cast<size_t>(q * static_cast<double>(n - 1) + 0.5);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
  }

 private:
  std::vector<double> ring_;
  size_t next_ = 0;
  double max_ = 0;
};

}  // namespace sluice::runtime
