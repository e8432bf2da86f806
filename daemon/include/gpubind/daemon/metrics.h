// The daemon's monitoring counters (GetStatus, gpubindctl metrics): plans by how they ended,
// refusals by cause, the plan handling time as a fixed-bucket histogram, reloads. Relaxed atomics
// only: counting takes no lock on the plan path, and a reader may see one counter a call ahead of
// another.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace gpubind::v1 {
class GetStatusResponse;
}

namespace gpubind::daemon {

class Metrics {
 public:
  enum class Source { kCache, kWorker, kRefused, kNodeMismatch };
  // Why a request was refused. Every one can be caused at will by any user who may connect, so
  // each is counted on its own and none is taken for a fault of the node.
  enum class Refusal { kMalformed, kVersion, kTooLarge, kBusy, kUnplannable, kNodeMismatch };
  static constexpr std::array<std::string_view, 6> kRefusalNames = {
      "malformed", "version", "too_large", "busy", "unplannable", "node_mismatch"};
  // Upper bounds in seconds: 10 us (a cache hit) to 1 s (the largest plans on a busy node).
  static constexpr std::array<double, 16> kBucketBounds = {
      10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3,
      5e-3,  10e-3, 25e-3, 50e-3,  100e-3, 250e-3, 500e-3, 1.0};

  void count(Source source) {
    plans_[static_cast<size_t>(source)].fetch_add(1, std::memory_order_relaxed);
  }
  // A refused request: counted by cause, and under plans as refused or node_mismatch.
  void count(Refusal cause) {
    refusals_[static_cast<size_t>(cause)].fetch_add(1, std::memory_order_relaxed);
    count(cause == Refusal::kNodeMismatch ? Source::kNodeMismatch : Source::kRefused);
  }
  // An answered call's handling time.
  void observe(std::chrono::nanoseconds took);
  void count_reload(bool succeeded) {
    (succeeded ? reloads_ : reloads_refused_).fetch_add(1, std::memory_order_relaxed);
  }

  // Plans, histogram and reloads into `response`.
  void to_proto(v1::GetStatusResponse& response) const;

 private:
  std::array<std::atomic<uint64_t>, 4> plans_{};
  std::array<std::atomic<uint64_t>, kRefusalNames.size()> refusals_{};
  // Per bucket, not cumulative (one increment per call); the last counts calls past every bound.
  std::array<std::atomic<uint64_t>, kBucketBounds.size() + 1> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
  std::atomic<uint64_t> reloads_{0};
  std::atomic<uint64_t> reloads_refused_{0};
};

}  // namespace gpubind::daemon
