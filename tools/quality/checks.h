// Scores one plan against the reference node (reference.h), without using the planner's own
// view of the node beyond the device list and bus ids. The rules are stated in main.cpp.
#pragma once

#include <string>
#include <vector>

#include "gpubind/planner.h"
#include "gpubind/policy.h"
#include "gpubind/topology.h"
#include "reference.h"

namespace gpubind::quality {

// One dump ready for scoring: gpubind's topology beside the reference read from the same file.
struct Node {
  std::string name;
  Topology topology;
  Reference ref;
  std::vector<int> core_by_pu;
  std::vector<int> l3_by_core;
  std::vector<DevicePlace> gpus;               // per Topology::gpus
  std::vector<DevicePlace> nics;               // per Topology::nics
  std::vector<std::vector<int>> nearest_nics;  // per GPU: the NICs at the smallest distance
};

// Loads both views of the dump; the error names the file.
// An empty path: this machine, discovered live (HWLOC_FSROOT honoured).
Result<Node> load_node(const std::string& path);

// PCI bridges crossed when they share one below the host bridge, else 1000 + PUs of the smallest
// CPU-side domain holding both, else 1000000.
long long nic_distance(const Node& node, const DevicePlace& gpu, const DevicePlace& nic);

struct Case {
  int ntasks = 1;
  Order order = Order::kGpu;
  bool reserve = false;  // reserve_first_core_per_l3

  std::string label() const;  // "n=8 order=gpu reserve=yes"
  SitePolicy policy() const;
  PlanRequest request() const;
};

// The reserved PUs and the usable cores (indices into Reference::cores) under a case's policy.
CpuSet reserved_pus(const Node& node, bool reserve);
CpuSet usable_cores(const Node& node, bool reserve);

// ntasks in {1, G/2, G, 2G, 3G, one per usable core} (no GPU: {1, cores/2, one per usable core})
// x order {gpu, cpu} x reserve {no, yes}.
std::vector<Case> cases_for(const Node& node);

struct Violation {
  std::string kind;  // "l3-straddle", "shared-cpu", "reserved-cpu", "no-cpu", "imbalance", ...
  std::string what;
};

struct CaseScore {
  Case spec;
  int tasks = 0;
  int straddles = 0;         // tasks across L3s whose share fits one
  double worst_ratio = 0;    // max/min cores among tasks with as many GPUs; 0: not measured
  int on_gpu_locality = 0;   // tasks inside their first GPU's locality ...
  int locality_counted = 0;  // ... of the tasks with GPUs counted
  double cores_used = 0;     // usable cores holding a task / usable cores
  int nic_not_nearest = 0;   // tasks whose NIC is not among their first GPU's nearest
  std::vector<Violation> violations;
};

CaseScore score_case(const Node& node, const Case& spec, const Result<Plan>& plan);

}  // namespace gpubind::quality
