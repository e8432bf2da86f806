// Conversions between the planner's model and the gpubind.v1 API messages, and the API's limits.
// Includes only the protobuf messages, not the gRPC stubs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpubind/planner.h"
#include "gpubind/protocol/limits.h"
#include "gpubind/result.h"
#include "gpubind/topology.h"
#include "gpubind/v1/binder.pb.h"

namespace gpubind::api {

// Hard limits on a Plan request: the protocol's (gpubind/protocol/limits.h).
using protocol::kMaxCpuListBytes;
using protocol::kMaxGpus;
using protocol::kMaxRequestBytes;
using protocol::kMaxTokenBytes;

// Checks the limits and builds the planner's request; the error says which limit.
Result<PlanRequest> request_from_proto(const v1::PlanRequest& proto);
v1::PlanRequest request_to_proto(const PlanRequest& request);

Plan plan_from_proto(const v1::PlanResponse& proto);

// PlanResponse's fields beside the plan.
struct ResponseFields {
  uint64_t policy_generation = 0;
  uint64_t topology_generation = 0;
  std::string_view hostname;
};
// The plan as a serialized PlanResponse with `fields`: the bytes libprotobuf makes of that message,
// but written straight from the plan (a 4096-task answer built as messages first cost more than
// planning it). With the topology the plan was made on, each GPU names its locality ("L3 6").
std::string serialize_plan(const Plan& plan, const Topology* topology,
                           const ResponseFields& fields);

void topology_to_proto(const Topology& topology, v1::GetTopologyResponse& proto);
Topology topology_from_proto(const v1::GetTopologyResponse& proto);

}  // namespace gpubind::api
