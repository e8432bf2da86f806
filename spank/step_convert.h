// Between the plugin's step texts and the planner's types (used by gpubindd and the in-process
// fallback library alike).
#pragma once

#include <string>

#include "gpubind/planner.h"
#include "step_text.h"

namespace gpubind::spank {

Result<PlanRequest> to_plan_request(const StepRequest& step);
// The other way, for tools that speak the compact protocol as the plugin does (gpubindctl bench).
StepRequest to_step_request(const PlanRequest& request);
// With the topology the plan was made on, each GPU of the verbose line names its locality
// ("0 (0000:c1:00.0, L3 6)"); without it, only its bus id.
StepPlan to_step_plan(const Plan& plan, const std::string& source,
                      const Topology* topology = nullptr);

}  // namespace gpubind::spank
