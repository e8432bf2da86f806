// A client of gpubindd, with plain C++ types (no gRPC in this header).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpubind/planner.h"
#include "gpubind/result.h"
#include "gpubind/topology.h"

namespace gpubind::api {

// Where clients look for the daemon: $GPUBIND_SOCKET, else /run/gpubind/gpubind.sock.
std::string default_socket();

struct PlanReply {
  Plan plan;
  uint64_t policy_generation = 0;
  uint64_t topology_generation = 0;
  bool cached = false;
  size_t response_bytes = 0;  // size of the answer on the wire (for the bench floor)
};

struct DaemonStatus {
  std::string version;
  double uptime_s = 0;
  std::string policy_source;
  uint64_t policy_generation = 0;
  std::string topology_source;
  uint64_t topology_generation = 0;
  uint64_t requests = 0, errors = 0, cache_hits = 0;
  double p50_us = 0, p99_us = 0;
  uint64_t rss_bytes = 0;
  std::string last_reload_error;
  bool socket_activated = false;
  double cpu_s = 0;
  int pid = 0;
  // Monitoring counters since the daemon started (gpubindctl metrics).
  uint64_t plans_cache = 0, plans_worker = 0, plans_refused = 0, plans_node_mismatch = 0;
  std::vector<std::pair<double, uint64_t>> latency_buckets;  // (upper bound s, cumulative count)
  uint64_t latency_count = 0;
  double latency_sum_s = 0;
  uint64_t reloads = 0, reloads_refused = 0;
  std::vector<std::pair<std::string, uint64_t>> refusals;   // (cause, requests)
  std::vector<std::pair<std::string, uint64_t>> fallbacks;  // (reason, launches)
  double start_time_s = 0;                                  // seconds since the Unix epoch
};

struct TopologyReply {
  Topology topology;
  CpuSet reserved;  // the CPUs the daemon's policy keeps from tasks
  uint64_t topology_generation = 0;
};

struct StepIds {
  uint64_t job_id = 0;
  uint64_t step_id = 0;
};

class BinderClient {
 public:
  explicit BinderClient(const std::string& socket_path);
  ~BinderClient();
  BinderClient(const BinderClient&) = delete;
  BinderClient& operator=(const BinderClient&) = delete;

  // Every call fails (never hangs) once `timeout` has passed; errors name the socket.
  Result<PlanReply> plan(const PlanRequest& request, const StepIds& ids,
                         std::chrono::milliseconds timeout);
  Result<TopologyReply> topology(std::chrono::milliseconds timeout);
  Result<DaemonStatus> status(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpubind::api
