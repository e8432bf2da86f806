// Environment rendering, the planner's last step: it reads finished task plans only, so it stands
// apart from the phases that make them (plan_state.h).
#pragma once

#include <vector>

#include "gpubind/explain.h"
#include "gpubind/planner.h"

namespace gpubind {

// Fills each task's `env` from `policy`'s templates (GPU group by the task's first GPU's vendor,
// NIC group by its first NIC's kind, then the OpenMP group) and gpubind's own variables.
// `tasks` is the whole step on the node, in rank order; the request says which groups apply.
// A variable the step cannot have (its value would be wrong) is left out, and `warnings` says
// why. With an `explanation`, each task's variables are recorded there with their rules.
// `step_gpus` (the plan's gpu_places) says which of the step's GPUs an inherited HIP list counts.
void render_env(const Topology& topology, const SitePolicy& policy, const PlanRequest& request,
                std::vector<TaskPlan>& tasks, std::vector<std::string>& warnings,
                PlanExplanation* explanation = nullptr,
                const std::vector<GpuPlace>& step_gpus = {});

}  // namespace gpubind
