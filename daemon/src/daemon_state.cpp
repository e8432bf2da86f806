#include "gpubind/daemon/daemon_state.h"

#include "gpubind/env_names.h"

namespace gpubind::daemon {

std::vector<std::string> variables_needing_env_allow(const SitePolicy& policy) {
  std::vector<std::string> messages;
  for (const auto* list : {&policy.gpu_env, &policy.nic_env, &policy.omp_env}) {
    for (const EnvTemplate& variable : *list) {
      if (is_binding_variable(variable.name)) continue;
      messages.push_back("the policy sets " + variable.name +
                         ", which is not a binding variable: the SPANK plugin refuses every plan "
                         "setting it (and keeps Slurm's binding) unless plugstack.conf lists it "
                         "in env_allow=" +
                         variable.name);
    }
  }
  return messages;
}

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
