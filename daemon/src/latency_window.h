// Latencies of the most recent calls, for p50/p99 in GetStatus.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <mutex>
#include <vector>

namespace gpubind::daemon {

class LatencyWindow {
 public:
  static constexpr size_t kSize = 4096;

  void add(double micros) {
    std::lock_guard<std::mutex> lock(mutex_);
    samples_[next_ % kSize] = micros;
    ++next_;
  }

  // Percentile (0-100) over the window; 0 when empty.
  double percentile(double p) const {
    std::vector<double> copy;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      copy.assign(samples_.begin(), samples_.begin() + std::min(next_, kSize));
    }
    if (copy.empty()) return 0;
    const size_t rank = std::min(copy.size() - 1, static_cast<size_t>(p / 100.0 * copy.size()));
    std::nth_element(copy.begin(), copy.begin() + rank, copy.end());
    return copy[rank];
  }

 private:
  mutable std::mutex mutex_;
  std::array<double, kSize> samples_{};
  size_t next_ = 0;
};

}  // namespace gpubind::daemon
