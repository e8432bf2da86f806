// Human and JSON renderings of topologies and plans, shared by gpubindctl and the daemon.
#pragma once

#include <string>

#include "gpubind/planner.h"
#include "gpubind/topology.h"

namespace gpubind {

std::string plan_to_json(const Plan& plan);
std::string plan_to_table(const Plan& plan);
std::string topology_to_json(const Topology& topology);
std::string topology_to_text(const Topology& topology);

}  // namespace gpubind
