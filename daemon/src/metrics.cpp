#include "gpubind/daemon/metrics.h"

#include <algorithm>

#include "gpubind/v1/binder.pb.h"

namespace gpubind::daemon {

void Metrics::observe(std::chrono::nanoseconds took) {
  const double seconds = std::chrono::duration<double>(took).count();
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(kBucketBounds.begin(), kBucketBounds.end(), seconds) -
                          kBucketBounds.begin());
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, took.count())),
                    std::memory_order_relaxed);
}

void Metrics::to_proto(v1::GetStatusResponse& response) const {
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  v1::PlanCounts& plans = *response.mutable_plans();
  plans.set_cache(load(plans_[static_cast<size_t>(Source::kCache)]));
  plans.set_worker(load(plans_[static_cast<size_t>(Source::kWorker)]));
  plans.set_refused(load(plans_[static_cast<size_t>(Source::kRefused)]));
  plans.set_node_mismatch(load(plans_[static_cast<size_t>(Source::kNodeMismatch)]));
  for (size_t i = 0; i < kRefusalNames.size(); ++i) {
    v1::RefusalCount& refusal = *response.add_refusals();
    refusal.set_cause(std::string(kRefusalNames[i]));
    refusal.set_count(load(refusals_[i]));
  }
  // Each bucket read once, so the cumulative counts never decrease and the count matches them.
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBucketBounds.size(); ++i) {
    cumulative += load(buckets_[i]);
    v1::LatencyBucket& bucket = *response.add_latency_buckets();
    bucket.set_le_s(kBucketBounds[i]);
    bucket.set_count(cumulative);
  }
  response.set_latency_count(cumulative + load(buckets_.back()));
  response.set_latency_sum_s(static_cast<double>(load(sum_ns_)) / 1e9);
  response.set_reloads(load(reloads_));
  response.set_reloads_refused(load(reloads_refused_));
}

}  // namespace gpubind::daemon
