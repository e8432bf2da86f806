// Scores any binding of a step's tasks (CPUs and GPUs by PCI bus id), gpubind's or another
// binder's, on the reference node alone, so that two binders' answers for one step can be set
// side by side metric by metric (bench/mpibind/compare.py --quality).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "checks.h"

namespace gpubind::quality {

struct BoundTask {
  CpuSet cpus;
  std::vector<std::string> gpus;  // PCI bus ids
  // The node's GPU numbers where the binder knows them (gpubind: partitions of one PCI device
  // are GPUs of their own); empty: each bus id names the node's first GPU with that id.
  std::vector<int> gpu_indices;
};

// Each metric: lower is better.
struct MappingMetrics {
  int far = 0;             // tasks with GPUs, none of whose localities holds any of their CPUs
  int gpuless = 0;         // tasks without a GPU on a node with GPUs
  int unused_gpus = 0;     // node GPUs no task holds
  int most_per_gpu = 0;    // the most tasks holding one GPU
  int l3_straddles = 0;    // tasks across L3s whose core count fits the roomiest L3
  int numa_straddles = 0;  // tasks across NUMA nodes whose core count fits the roomiest one
  int core_spread = 0;     // most cores of a task - fewest
  int idle_cores = 0;      // cores no task holds
  int shared_cores = 0;    // cores two tasks hold, when there are no more tasks than cores

  static constexpr std::array<const char*, 9> kNames = {
      "far",         "gpuless",    "unused_gpus", "most_per_gpu", "l3_straddles", "numa_straddles",
      "core_spread", "idle_cores", "shared_cores"};
  std::array<int, 9> values() const {
    return {far,         gpuless,    unused_gpus, most_per_gpu, l3_straddles, numa_straddles,
            core_spread, idle_cores, shared_cores};
  }
};

// An error names a GPU the node does not have.
Result<MappingMetrics> score_mapping(const Node& node, const std::vector<BoundTask>& tasks,
                                     bool gpus_counted);

}  // namespace gpubind::quality
