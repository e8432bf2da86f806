// The node health check behind `gpubindctl check-node`: does the node match what the site's
// policy says it should have (`expect`), and does it have what binding needs (every GPU's
// locality with CPUs, NIC links up, the daemon answering)? Pure: what was read from the live
// system comes in as LiveFacts, and what was not read (offline, on an hwloc dump) is not checked.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpubind/policy.h"
#include "gpubind/result.h"
#include "gpubind/topology.h"

namespace gpubind {

// A NIC's link as sysfs shows it.
struct NicLink {
  std::string device;  // "hsn0" (its network interface) or "mlx5_0:1" (an RDMA port)
  std::string state;   // operstate ("up", "down", ...) or the port's state name ("ACTIVE", ...)
  bool up = false;
};

// The node line Slurm runs with for this node (`scontrol show node -o NAME`): what Slurm numbers
// the node's CPUs and cores by.
struct SlurmNodeLine {
  std::string source;  // the command that gave it
  int cpus = 0, sockets = 0, cores_per_socket = 0, threads_per_core = 0;
};
// Its fields from the command's one line ("CPUTot=128 ... Sockets=1 CoresPerSocket=64
// ThreadsPerCore=2"); nullopt without them.
std::optional<SlurmNodeLine> parse_slurm_node_line(const std::string& text,
                                                   const std::string& source);

struct LiveFacts {
  // Per NIC, by its index in Topology::nics: the links read (a netdev and each RDMA port).
  // Empty or shorter: those NICs' links are not checked.
  std::vector<std::vector<NicLink>> nic_links;
  // /proc/sys/kernel/numa_balancing; nullopt: not read (offline) or missing (kernel without it).
  std::optional<int> numa_balancing;
  bool numa_balancing_read = false;
  // The daemon's answer: nullopt when not asked (offline, --no-daemon); "" when it answered,
  // else why it did not.
  std::optional<std::string> daemon_error;
  // Slurm's node line; nullopt: not read (offline, no Slurm here, the controller unreachable).
  std::optional<SlurmNodeLine> slurm_node;
  // The plugstack.conf slurmd reads on this node (includes followed as SPANK follows them) and
  // why it loads no spank_gpubind.so ("" where it does); nullopt: not read (offline, no
  // slurm.conf here).
  struct Plugstack {
    std::string path;     // the file and how it was found ("SLURM_CONF's PlugStackConfig")
    std::string missing;  // "" where a line loads the plugin, else why not
  };
  std::optional<Plugstack> plugstack;
};

struct NodeFault {
  enum class Severity { kFault, kWarning };
  // Stable, for scripts and drain reasons: gpu-count, gpu-model, nic-count, nic-missing,
  // nic-down, gpu-nic-pairing, gpu-no-cpus, io-locality-unknown, numa-balancing, slurm-node,
  // plugin-not-loaded, daemon; gpu-locality (warning).
  std::string code;
  std::string message;  // names the GPU (PCI bus id), NIC, expected and found values
  Severity severity = Severity::kFault;
};

std::vector<NodeFault> check_node(const Topology& topology, const SitePolicy& policy,
                                  const LiveFacts& facts);

// The NIC names an `expect.nics` entry requires: numeric ranges in brackets, as Slurm writes host
// lists, give one name each ("hsn[0-3]": hsn0 to hsn3; "mlx5_[0-3,6]"; "[00-07]" keeps the
// width). A name left with '*' or '?' is a glob at least one NIC must match. At most 1024 names.
Result<std::vector<std::string>> expand_nic_names(const std::string& entry);

// Whether any entry is a fault (not only warnings).
bool has_faults(const std::vector<NodeFault>& faults);

}  // namespace gpubind
