// Large regular topologies built in memory (no hwloc), for scale tests and benchmarks.
#pragma once

#include "gpubind/topology.h"

namespace gpubind::bench {

struct SyntheticShape {
  int packages = 2;
  int numa_per_package = 4;
  int l3_per_numa = 4;
  int cores_per_l3 = 16;
  int threads_per_core = 2;
  int gpus_per_numa = 1;  // GPUs (and one NIC each) local to each NUMA node
};

Topology synthetic_topology(const SyntheticShape& shape);

}  // namespace gpubind::bench
