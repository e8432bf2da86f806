// What the node health check reads from the live system (node_check.h's LiveFacts): each NIC's
// links and kernel.numa_balancing, under HWLOC_FSROOT like the rest of live discovery, so a
// captured or test tree stands in for the node.
#pragma once

#include "gpubind/node_check.h"
#include "gpubind/topology.h"

namespace gpubind::discovery {

// The links of every NIC of `topology` (its network interface's operstate, each port of its RDMA
// device) and /proc/sys/kernel/numa_balancing. The daemon's answer is left to the caller.
LiveFacts read_live_facts(const Topology& topology);

}  // namespace gpubind::discovery
