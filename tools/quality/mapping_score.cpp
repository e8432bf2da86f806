#include "mapping_score.h"

#include <algorithm>

namespace gpubind::quality {
namespace {

// Distinct domains of `level` holding any of `cores`.
int domains_touched(const std::vector<CpuSet>& level, const CpuSet& cpus) {
  return static_cast<int>(std::count_if(level.begin(), level.end(),
                                        [&](const CpuSet& d) { return d.intersects(cpus); }));
}

// The most cores any one domain of `level` has.
int roomiest(const Reference& ref, const std::vector<CpuSet>& level) {
  int most = 0;
  for (const CpuSet& domain : level) {
    const int cores =
        static_cast<int>(std::count_if(ref.cores.begin(), ref.cores.end(),
                                       [&](const CpuSet& c) { return c.is_subset_of(domain); }));
    most = std::max(most, cores);
  }
  return most;
}

}  // namespace

Result<MappingMetrics> score_mapping(const Node& node, const std::vector<BoundTask>& tasks,
                                     bool gpus_counted) {
  const Reference& ref = node.ref;
  MappingMetrics m;
  std::vector<int> holders(node.gpus.size(), 0), core_holders(ref.cores.size(), 0);
  const int l3_room = roomiest(ref, ref.l3s), numa_room = roomiest(ref, ref.numas);
  int fewest = 1 << 30, most = 0;
  for (const BoundTask& task : tasks) {
    CpuSet cores;
    task.cpus.for_each([&](int pu) {
      if (pu < static_cast<int>(node.core_by_pu.size()) && node.core_by_pu[pu] >= 0)
        cores.set(node.core_by_pu[pu]);
    });
    cores.for_each([&](int c) { ++core_holders[c]; });
    const int ncores = cores.count();
    fewest = std::min(fewest, ncores);
    most = std::max(most, ncores);
    if (ncores > 1 && ncores <= l3_room && domains_touched(ref.l3s, task.cpus) > 1)
      ++m.l3_straddles;
    if (ncores > 1 && ncores <= numa_room && domains_touched(ref.numas, task.cpus) > 1)
      ++m.numa_straddles;
    if (!gpus_counted) continue;
    std::vector<size_t> held;
    for (int index : task.gpu_indices) {
      if (index < 0 || index >= static_cast<int>(node.gpus.size()))
        return make_error("GPU number " + std::to_string(index) + " is not one of the node's");
      held.push_back(static_cast<size_t>(index));
    }
    for (size_t i = 0; task.gpu_indices.empty() && i < task.gpus.size(); ++i) {
      const std::string& bus_id = task.gpus[i];
      const auto found = std::find_if(node.topology.gpus.begin(), node.topology.gpus.end(),
                                      [&](const Gpu& gpu) { return gpu.pci_bus_id == bus_id; });
      if (found == node.topology.gpus.end())
        return make_error("GPU " + bus_id + " is not one of the node's");
      held.push_back(static_cast<size_t>(found - node.topology.gpus.begin()));
    }
    bool near = false;
    for (size_t g : held) {
      ++holders[g];
      near |= node.gpus[g].locality.intersects(task.cpus);
    }
    m.far += !held.empty() && !near;
    m.gpuless += held.empty() && !node.gpus.empty();
  }
  if (!tasks.empty()) m.core_spread = most - fewest;
  m.idle_cores = static_cast<int>(std::count(core_holders.begin(), core_holders.end(), 0));
  if (tasks.size() <= ref.cores.size())
    m.shared_cores = static_cast<int>(
        std::count_if(core_holders.begin(), core_holders.end(), [](int n) { return n > 1; }));
  if (gpus_counted && !holders.empty()) {
    m.most_per_gpu = *std::max_element(holders.begin(), holders.end());
    m.unused_gpus = static_cast<int>(std::count(holders.begin(), holders.end(), 0));
  }
  return m;
}

}  // namespace gpubind::quality
