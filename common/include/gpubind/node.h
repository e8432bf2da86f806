// A node ready to plan on: its topology and the site policy that applies to it.
#pragma once

#include <optional>
#include <string>

#include "gpubind/policy.h"
#include "gpubind/result.h"
#include "gpubind/topology.h"

namespace gpubind {

struct Node {
  Topology topology;
  SitePolicy policy;
};

// Where gpubindd and the in-process fallback look for the site policy when none is named.
inline constexpr const char* kDefaultPolicyPath = "/etc/gpubind/policy.conf";

// The policy gpubindd and the fallback plan with: the named file, else the site's file where it
// exists, else none (the built-in defaults).
std::optional<std::string> policy_to_load(const std::optional<std::string>& named);

struct NodeSources {
  // Policy file; nullopt = the built-in defaults.
  std::optional<std::string> policy_path;
  // hwloc XML, or "live"; nullopt = the policy's topology_file, else live discovery.
  std::optional<std::string> topology_path;
};

// Loads the policy, then the topology it points at (NIC patterns come from the policy), then
// applies the policy's GPU order. Nothing is returned unless all three succeed.
Result<Node> load_node(const NodeSources& sources);

}  // namespace gpubind
