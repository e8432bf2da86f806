// How long make_plan takes for one request: warm-up runs, then timed runs until both a minimum
// count and a minimum total time are reached; the median of the timed runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "gpubind/planner.h"

namespace gpubind {

struct PlanTiming {
  double median_us = 0;
  int runs = 0;
};

inline constexpr int kTimingWarmupRuns = 3;
inline constexpr int kTimingMinRuns = 11;
inline constexpr std::chrono::milliseconds kTimingMinTotal{200};

inline double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// make_plan and freeing its plan are timed (a caller pays both), nothing else.
inline PlanTiming time_make_plan(const Topology& topology, const SitePolicy& policy,
                                 const PlanRequest& request) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < kTimingWarmupRuns; ++i)
    (void)make_plan(topology, policy, request);
  std::vector<double> samples_us;
  Clock::duration total{};
  while (static_cast<int>(samples_us.size()) < kTimingMinRuns || total < kTimingMinTotal) {
    const Clock::time_point start = Clock::now();
    (void)make_plan(topology, policy, request);
    const Clock::duration took = Clock::now() - start;
    total += took;
    samples_us.push_back(std::chrono::duration<double, std::micro>(took).count());
  }
  return {median_of(samples_us), static_cast<int>(samples_us.size())};
}

}  // namespace gpubind
