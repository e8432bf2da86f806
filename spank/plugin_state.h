// State the plugin keeps within one process: srun/sbatch/salloc, or one slurmstepd, whose tasks
// inherit it when slurmstepd forks them after user_init.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "options.h"
#include "step_types.h"

extern "C" {
#include <slurm/spank.h>
}

namespace gpubind::spank {

inline constexpr const char* kOptionName = "gpu-bind-auto";
// How Slurm passes an option given to sbatch/salloc down to the steps of the job.
inline constexpr const char* kOptionEnv = "SLURM_SPANK__SLURM_SPANK_OPTION_gpubind_gpu_bind_auto";
inline constexpr const char* kUserEnv = "SLURM_GPU_BIND_AUTO";

struct PluginState {
  SiteArgs site;
  bool option_given = false;
  std::string option_value;
  // slurmstepd: set by user_init, used by every task_init.
  bool bind = false;  // this step asked for binding
  UserFlags flags;
  bool planned = false;  // plan holds the step's plan
  StepPlan plan;
  // The step's GPUs (node index, token) and tasks on this node, as asked: task_init compares a
  // task's own GPUs with them (Slurm's per-task choice).
  std::vector<std::pair<int, std::string>> step_gpus;
  int local_tasks = 0;
  std::string failure;  // why there is no plan
  std::string host;
};

PluginState& state();

// The spank_option the plugin registers (one object for the whole process).
struct spank_option* bind_option();

// Per-context entry points (local.cpp, remote.cpp).
int local_post_opt(spank_t sp);
int local_user_init(spank_t sp);
// srun: each component's flags for a heterogeneous step (from init_post_opt).
void local_components(spank_context_t context);
int remote_user_init(spank_t sp);
int remote_task_init(spank_t sp);

}  // namespace gpubind::spank
