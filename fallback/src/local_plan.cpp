#include "local_plan.h"

#include "gpubind/api/convert.h"
#include "gpubind/node.h"
#include "gpubind/planner.h"
#include "gpubind/protocol/limits.h"

namespace gpubind::fallback {

Result<std::string> plan_here(const void* bytes, size_t size,
                              const std::optional<std::string>& policy,
                              const std::optional<std::string>& topology) {
  if (size > protocol::kMaxRequestBytes) return make_error("request too large");
  v1::PlanRequest proto;
  if (!proto.ParseFromArray(bytes, static_cast<int>(size)))
    return make_error("not a gpubind.v1.PlanRequest");
  auto request = api::request_from_proto(proto);
  if (!request) return request.error();
  NodeSources sources;
  sources.policy_path = policy_to_load(policy);
  sources.topology_path = topology;
  auto node = load_node(sources);
  if (!node) return node.error();
  auto plan = make_plan(node->topology, node->policy, *request);
  if (!plan) return plan.error();
  return api::serialize_plan(*plan, &node->topology, {.hostname = node->topology.hostname});
}

}  // namespace gpubind::fallback
