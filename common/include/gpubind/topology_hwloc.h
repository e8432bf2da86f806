// Builds the planner's Topology from hwloc: live discovery or an XML dump, I/O devices kept.
#pragma once

#include <string>
#include <vector>

#include "gpubind/result.h"
#include "gpubind/topology.h"

namespace gpubind {

// `nic_patterns`: globs that select high-speed NICs among network and RDMA devices.
Result<Topology> load_topology_xml(const std::string& path,
                                   const std::vector<std::string>& nic_patterns);
// `gpu_runtimes`: let hwloc's GPU runtime plugins (OpenCL, CUDA, NVML, RSMI, Level Zero) run;
// off, GPUs are found by PCI vendor and class and no GPU driver is touched.
Result<Topology> load_topology_live(const std::vector<std::string>& nic_patterns,
                                    bool gpu_runtimes = false);

}  // namespace gpubind
