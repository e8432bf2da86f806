// gpubindctl check-node: the node health check. Compares the node with what the site's policy
// says it should have and with what binding needs, one line per fault in the form NHC and
// Slurm's HealthCheckProgram scripts print ("ERROR: ..."), exit 1 on a fault.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ctl.h"
#include "gpubind/api/binder_client.h"
#include "gpubind/client/plugstack.h"
#include "gpubind/discovery/live_facts.h"
#include "gpubind/node_check.h"
#include "gpubind/output/json.h"

namespace gpubind::ctl {
namespace {

// This node's name to Slurm: slurmd's (SLURMD_NODENAME, set for its health check and prologs),
// else the short host name. "" when it is not a plain host name.
std::string slurm_node_name() {
  std::string name;
  if (const char* own = std::getenv("SLURMD_NODENAME"); own && *own) {
    name = own;
  } else {
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) == 0) name = host;
    name = name.substr(0, name.find('.'));
  }
  const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
  });
  return plain ? name : "";
}

// The node line Slurm runs with, from `scontrol show node -o NAME` (5 s at most); nullopt where
// Slurm is not here or does not answer: nothing to compare then.
std::optional<SlurmNodeLine> slurm_node_line() {
  const std::string name = slurm_node_name();
  if (name.empty()) return std::nullopt;
  const std::string command = "scontrol show node -o " + name;
  FILE* pipe = popen(("timeout 5 " + command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string text;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe))
    text.append(buffer, n);
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return parse_slurm_node_line(text, command);
}

// The plugstack.conf slurmd reads here and whether it loads the plugin. slurm.conf as Slurm finds
// it: SLURM_CONF (slurmd sets it to its conf-cache copy under configless Slurm, and its health
// check inherits it), else /etc/slurm/slurm.conf, else configless slurmd's /run/slurm/conf.
std::optional<LiveFacts::Plugstack> slurmd_plugstack() {
  std::vector<std::pair<std::string, std::string>> candidates;
  if (const char* conf = std::getenv("SLURM_CONF"); conf && *conf)
    candidates.emplace_back(conf, "SLURM_CONF");
  candidates.emplace_back(client::kSlurmConf, "the default");
  candidates.emplace_back("/run/slurm/conf/slurm.conf", "configless slurmd's");
  for (const auto& [path, how] : candidates) {
    std::ifstream in(path);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    const std::string plugstack = client::plugstack_path_of(path, text.str());
    return LiveFacts::Plugstack{plugstack + ", from " + how + " " + path,
                                client::why_gpubind_not_loaded(plugstack)};
  }
  return std::nullopt;  // no Slurm configuration here: nothing to check
}

}  // namespace

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
    facts.slurm_node = slurm_node_line();
    facts.plugstack = slurmd_plugstack();
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
