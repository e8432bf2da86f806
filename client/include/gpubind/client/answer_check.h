// The daemon's answer checked against the step before any task applies it. Every user of the
// node can reach the daemon's socket and the answer sets the environment of every user's tasks,
// root's included: it is applied only where it stays inside what Slurm gave the step.
#pragma once

#include <string>
#include <vector>

#include "gpubind/client/types.h"
#include "gpubind/result.h"

namespace gpubind::client {

// One entry per local task in rank order; each task's CPUs inside the step's, its GPUs among the
// step's (by node index and token) and its visibility variables naming exactly them; every
// variable one binding is about or one the site allows (`site_env`), never one that changes what
// runs. The error names the first check that failed and the task.
Status check_answer(const StepRequest& request, const StepPlan& plan,
                    const std::vector<std::string>& site_env);

}  // namespace gpubind::client
