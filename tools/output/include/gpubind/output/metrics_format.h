// gpubindd's monitoring counters in the Prometheus text exposition format (version 0.0.4), what
// node_exporter's textfile collector reads: every family with HELP and TYPE, counters ending in
// _total, base units (seconds, bytes), the plan time as a histogram with its +Inf bucket.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpubind::output {

struct DaemonMetrics {
  std::string version;
  double start_time_s = 0;  // seconds since the Unix epoch
  uint64_t plans_cache = 0, plans_worker = 0, plans_refused = 0, plans_node_mismatch = 0;
  std::vector<std::pair<double, uint64_t>> latency_buckets;  // (upper bound s, cumulative)
  uint64_t latency_count = 0;
  double latency_sum_s = 0;
  std::vector<std::pair<std::string, uint64_t>> refusals;   // (cause, requests)
  std::vector<std::pair<std::string, uint64_t>> fallbacks;  // (reason, launches)
  uint64_t policy_generation = 0, topology_generation = 0;
  uint64_t reloads = 0, reloads_refused = 0;
  uint64_t rss_bytes = 0;
  double cpu_s = 0;
};

// The exposition text; `metrics` null when the daemon did not answer: then gpubind_daemon_up 0
// alone, so that an alert on it fires.
std::string metrics_text(const DaemonMetrics* metrics);

// The audit of the node's running tasks (gpubindctl metrics --audit): how many run by each
// verdict, every verdict always present (0 where none) so a series never vanishes. No job id is
// a label: each job would start series of its own and leave them behind; `gpubindctl audit`
// names the jobs.
struct AuditMetrics {
  std::vector<std::pair<std::string, uint64_t>> tasks_by_verdict;
  uint64_t steps = 0, memory_remote = 0, partly_read = 0;
  bool read = false;  // false: the audit could not run (no node topology)
};
std::string audit_metrics_text(const AuditMetrics& audit);

// A label value as the format quotes it: backslash, double quote and newline escaped.
std::string escape_label_value(const std::string& value);

}  // namespace gpubind::output
