// A picture of a plan: the node as people think of it (packages, NUMA nodes, L3 boxes with their
// cores, GPUs and NICs where they sit), each task's cores, GPU and NIC in one colour, a legend.
#pragma once

#include <string>

#include "gpubind/cpuset.h"
#include "gpubind/planner.h"
#include "gpubind/topology.h"

namespace gpubind {

// A standalone SVG document. `reserved` are the CPUs the policy keeps from tasks (drawn hatched);
// `title` heads the picture. Every element carries data-* attributes (core, PUs, tasks) so tools
// and tests can read the picture back.
std::string plan_to_svg(const Topology& topology, const CpuSet& reserved, const Plan& plan,
                        const std::string& title);

// The fill colour of a task ("#1f77b4"): ten distinct colours, then golden-angle hues.
std::string task_colour(int rank);

}  // namespace gpubind
