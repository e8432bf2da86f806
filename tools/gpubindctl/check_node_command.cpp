// gpubindctl check-node: the node health check. Compares the node with what the site's policy
// says it should have and with what binding needs, one line per fault in the form NHC and
// Slurm's HealthCheckProgram scripts print ("ERROR: ..."), exit 1 on a fault.
#include <cstdio>
#include <iostream>
#include <string>

#include "ctl.h"
#include "gpubind/api/binder_client.h"
#include "gpubind/discovery/live_facts.h"
#include "gpubind/node_check.h"
#include "gpubind/output/json.h"

namespace gpubind::ctl {

int run_check_node(const Args& args) {
  const std::optional<std::string> topology = args.get("topology");
  if (topology && topology->empty()) return fail("--topology: empty path");
  if (auto policy = args.get("policy"); policy && policy->empty())
    return fail("--policy: empty path");
  // Offline on a dump: what only the running node can tell (links, sysctls, the daemon) is
  // left out. Without --topology, the node as gpubindd sees it: the policy's topology_file, else
  // live discovery.
  const bool live = !topology || *topology == "live";
  NodeSources sources;
  sources.policy_path = policy_to_load(args.get("policy"));
  sources.topology_path = topology;
  auto node = load_node(sources);
  if (!node) return fail("check-node: " + node.error().message);

  LiveFacts facts;
  std::string socket;
  if (live) {
    facts = discovery::read_live_facts(node->topology);
    if (!args.has("no-daemon")) {
      auto access = daemon_access(args);
      if (!access) return fail(access.error().message);
      socket = access->socket;
      auto status = api::BinderClient(access->socket).status(access->timeout);
      facts.daemon_error = status ? "" : access->socket + ": " + status.error().message;
    }
  }

  const std::vector<NodeFault> faults = check_node(node->topology, node->policy, facts);
  const bool healthy = !has_faults(faults);
  if (args.has("json")) {
    output::Json list = output::Json::array();
    for (const NodeFault& f : faults) {
      list.push_back({{"code", f.code},
                      {"severity", f.severity == NodeFault::Severity::kFault ? "error" : "warning"},
                      {"message", f.message}});
    }
    const output::Json json{{"healthy", healthy},
                            {"topology", node->topology.source},
                            {"policy", node->policy.source},
                            {"live", live},
                            {"daemon", socket.empty() ? output::Json() : output::Json(socket)},
                            {"gpus", node->topology.gpus.size()},
                            {"nics", node->topology.nics.size()},
                            {"faults", list}};
    std::cout << output::to_text(json) << "\n";
    return healthy ? kExitOk : kExitFailed;
  }
  // Faults first: a health check wrapper takes the first line as the node's drain reason.
  for (const NodeFault& f : faults) {
    if (f.severity == NodeFault::Severity::kFault)
      std::printf("ERROR: gpubind: %s: %s\n", f.code.c_str(), f.message.c_str());
  }
  for (const NodeFault& f : faults) {
    if (f.severity == NodeFault::Severity::kWarning)
      std::printf("WARNING: gpubind: %s: %s\n", f.code.c_str(), f.message.c_str());
  }
  if (healthy) {
    std::printf("gpubind: node healthy (%zu GPUs, %zu NICs checked%s)\n",
                node->topology.gpus.size(), node->topology.nics.size(), live ? "" : ", offline");
  }
  return healthy ? kExitOk : kExitFailed;
}

}  // namespace gpubind::ctl
