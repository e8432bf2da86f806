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
};

struct NodeFault {
  enum class Severity { kFault, kWarning };
  // Stable, for scripts and drain reasons: gpu-count, gpu-model, nic-count, nic-missing,
  // nic-down, gpu-nic-pairing, gpu-no-cpus, numa-balancing, daemon; gpu-locality (warning).
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
