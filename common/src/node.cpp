#include "gpubind/node.h"

#include <unistd.h>

#include "gpubind/policy_loader.h"
#include "gpubind/topology_hwloc.h"

namespace gpubind {

std::optional<std::string> policy_to_load(const std::optional<std::string>& named) {
  if (named && !named->empty()) return named;
  if (access(kDefaultPolicyPath, F_OK) == 0) return std::string(kDefaultPolicyPath);
  return std::nullopt;
}

Result<Node> load_node(const NodeSources& sources) {
  Node node;
  if (sources.policy_path) {
    auto policy = load_policy_file(*sources.policy_path);
    if (!policy) return policy.error();
    node.policy = std::move(*policy);
  }
  std::string topology_path = sources.topology_path.value_or(node.policy.topology_file);
  auto topology =
      topology_path.empty() || topology_path == "live"
          ? load_topology_live(node.policy.nic_patterns, node.policy.gpu_runtime_discovery)
          : load_topology_xml(topology_path, node.policy.nic_patterns);
  if (!topology) return topology.error();
  node.topology = std::move(*topology);
  if (auto status = apply_gpu_order(node.topology, node.policy.gpu_order); !status) {
    return make_error(node.policy.source + ": " + status.error().message);
  }
  return node;
}

}  // namespace gpubind
