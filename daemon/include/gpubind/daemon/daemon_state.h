// What the daemon serves from: one loaded node (topology + policy) with generation numbers.
// Replaced whole on reload; requests keep the state they started with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpubind/node.h"

namespace gpubind::daemon {

struct DaemonState {
  Node node;
  uint64_t policy_generation = 0;
  uint64_t topology_generation = 0;
  std::string policy_source;  // the policy file, or "(built-in defaults)"
};

using StatePtr = std::shared_ptr<const DaemonState>;

// Variables the policy sets that the SPANK plugin applies only where plugstack.conf lists them
// in env_allow= (it refuses, whole, a plan carrying any other), one message each.
std::vector<std::string> variables_needing_env_allow(const SitePolicy& policy);

// Loads a node for the daemon. `previous` (may be null) provides the generation numbers to bump.
Result<StatePtr> load_state(const NodeSources& sources, const DaemonState* previous);

}  // namespace gpubind::daemon
