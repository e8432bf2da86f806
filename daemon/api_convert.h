// Conversions between the planner's model and the gpubind.v1 API messages, and the API's limits.
// Includes only the protobuf messages, not the gRPC stubs.
#pragma once

#include <cstddef>

#include "gpubind/planner.h"
#include "gpubind/result.h"
#include "gpubind/topology.h"
#include "gpubind/v1/binder.pb.h"

namespace gpubind::api {

// Hard limits on a Plan request (also in binder.proto).
inline constexpr size_t kMaxRequestBytes = 256 * 1024;
inline constexpr int kMaxGpus = 1024;
inline constexpr size_t kMaxTokenBytes = 128;
inline constexpr size_t kMaxCpuListBytes = 65536;

// Checks the limits and builds the planner's request; the error says which limit.
Result<PlanRequest> request_from_proto(const v1::PlanRequest& proto);
v1::PlanRequest request_to_proto(const PlanRequest& request);

void plan_to_proto(const Plan& plan, v1::PlanResponse& proto);
Plan plan_from_proto(const v1::PlanResponse& proto);

void topology_to_proto(const Topology& topology, v1::GetTopologyResponse& proto);
Topology topology_from_proto(const v1::GetTopologyResponse& proto);

}  // namespace gpubind::api
