#include "daemon_state.h"

namespace gpubind::daemon {

Result<StatePtr> load_state(const NodeSources& sources, const DaemonState* previous) {
  auto node = load_node(sources);
  if (!node) return node.error();
  auto state = std::make_shared<DaemonState>();
  state->node = std::move(*node);
  state->policy_source = state->node.policy.source;
  state->policy_generation = previous ? previous->policy_generation + 1 : 1;
  state->topology_generation = previous ? previous->topology_generation + 1 : 1;
  return StatePtr(std::move(state));
}

}  // namespace gpubind::daemon
