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
StepPlan to_step_plan(const Plan& plan, const std::string& source);

}  // namespace gpubind::spank
