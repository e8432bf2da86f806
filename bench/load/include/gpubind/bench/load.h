// The load generator `gpubindctl bench` drives gpubindd with: `clients` threads, each with its
// own connection, make `requests` calls in total. Latencies are per call, measured by the client.
#pragma once

#include <cstdint>
#include <string>

#include "gpubind/planner.h"
#include "gpubind/result.h"

namespace gpubind::bench {

struct LoadResult {
  double p50_us = 0, p99_us = 0, p999_us = 0;
  double plans_per_s = 0;
  uint64_t calls = 0, errors = 0;
  std::string first_error;
};

// Plan calls over gRPC.
LoadResult plan_over_grpc(const std::string& socket_path, const PlanRequest& request, int clients,
                          int requests, bool bypass_cache);

// The plugin's path: the same plans asked over the compact protocol, one connection per call as
// slurmstepd makes one per step and node.
LoadResult plan_over_compact(const std::string& socket_path, const PlanRequest& request,
                             int clients, int requests);

// The gRPC floor: the same load of GetStatus calls, which do no work in the daemon.
LoadResult empty_grpc_calls(const std::string& socket_path, int clients, int requests);

// The floor for the same exchange: the same request and response bytes echoed over a raw Unix
// socket by an in-process server, with the same client count.
Result<LoadResult> raw_socket_floor(const PlanRequest& request, size_t response_bytes, int clients,
                                    int requests);

}  // namespace gpubind::bench
