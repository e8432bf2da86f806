// The node as the quality checks see it, read from the hwloc XML on its own (not through
// gpubind's loader): cores, L3 caches, NUMA nodes, packages, and where each PCI device sits.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gpubind/cpuset.h"
#include "gpubind/result.h"

namespace gpubind::quality {

// Where a PCI device sits.
struct DevicePlace {
  CpuSet anchor;  // cpuset of its non-I/O ancestor
  // The smallest (fewest PUs) L3, NUMA node or package whose cpuset holds the anchor, else the
  // machine.
  CpuSet locality;
  std::vector<unsigned long long> bridges;  // PCI bridges below the host bridge, nearest first
};

struct Reference {
  CpuSet machine;
  std::vector<CpuSet> cores;  // in hwloc's logical order; PUs when the dump has no cores
  std::vector<CpuSet> l3s;
  std::vector<CpuSet> numas;
  std::vector<CpuSet> packages;
  std::map<std::string, DevicePlace> pci;  // by bus id, "0000:c1:00.0"

  // An empty xml_path: this machine, discovered live (HWLOC_FSROOT honoured).
  static Result<Reference> load(const std::string& xml_path);

  // The smallest L3, NUMA node or package holding `cpus`, else the machine.
  CpuSet smallest_domain(const CpuSet& cpus) const;
  // The first core of each L3 (what reserve_first_core_per_l3 keeps from tasks).
  CpuSet first_core_per_l3() const;
  // Index into `cores` per PU (-1: not a PU of any core).
  std::vector<int> core_by_pu() const;
  // Index into `l3s` per core (-1: in no L3).
  std::vector<int> l3_by_core() const;
};

}  // namespace gpubind::quality
