#include "gpubind/bench/synthetic_topology.h"

#include <string>

namespace gpubind::bench {

Topology synthetic_topology(const SyntheticShape& s) {
  Topology t;
  t.source = "synthetic";
  t.hostname = "synthetic";
  t.package_count = s.packages;
  t.numa_count = s.packages * s.numa_per_package;
  t.l3_count = t.numa_count * s.l3_per_numa;
  const int cores = t.l3_count * s.cores_per_l3;
  for (int c = 0; c < cores; ++c) {
    Core core;
    core.index = c;
    for (int th = 0; th < s.threads_per_core; ++th)
      core.pus.push_back(c + th * cores);
    core.l3_index = c / s.cores_per_l3;
    core.numa_index = core.l3_index / s.l3_per_numa;
    core.package_index = core.numa_index / s.numa_per_package;
    t.cores.push_back(core);
  }
  for (int numa = 0; numa < t.numa_count; ++numa) {
    Locality loc;
    loc.kind = LocalityKind::kNuma;
    loc.cpus = t.numa_pus(numa);
    loc.numa_index = numa;
    loc.package_index = numa / s.numa_per_package;
    for (int g = 0; g < s.gpus_per_numa; ++g) {
      Gpu gpu;
      gpu.index = static_cast<int>(t.gpus.size());
      gpu.pci_bus_id = "0000:" + std::to_string(10 + gpu.index) + ":00.0";
      gpu.vendor = Vendor::kNvidia;
      gpu.locality = loc;
      t.gpus.push_back(gpu);
      Nic nic;
      nic.index = static_cast<int>(t.nics.size());
      nic.name = nic.rdma = "mlx5_" + std::to_string(nic.index);
      nic.kind = NicKind::kInfiniband;
      nic.locality = loc;
      t.nics.push_back(nic);
    }
  }
  return t;
}

}  // namespace gpubind::bench
