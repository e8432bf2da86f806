// Slurm's own choice of each task's GPUs. With --gpu-bind (map_gpu, mask_gpu, single, closest,
// per_task) or --gpus-per-task (which implies per_task), slurmstepd gives each task its own GPUs
// before task_init: the task's SLURM_STEP_GPUS and visibility variables name them, and under
// ConstrainDevices its device cgroup allows only those. gpubind keeps that choice and binds the
// task near those GPUs; it never points a task at a GPU Slurm did not give it. Pure functions
// over the task's environment and the step's plan, tested without Slurm.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpubind/client/step_env.h"
#include "gpubind/client/types.h"

namespace gpubind::client {

struct SlurmTaskGpus {
  // The task's node GPU indices: from Slurm's binding where it can be computed (map_gpu,
  // mask_gpu, per_task), and then `identified`. Otherwise (closest, single) what the task's
  // SLURM_STEP_GPUS lists, which under ConstrainDevices numbers the task's own devices from 0
  // and so does not say which GPUs they are.
  std::vector<int> gpus;
  bool identified = false;
  std::string binding;  // Slurm's GPU binding, "map_gpu:1,0", "per_task:2" ("" if not said)
  // Local tasks before this one, and in all, that Slurm gave exactly these GPUs (identified only).
  int same_before = -1;
  int same_total = -1;
};

// Whether Slurm chose this task's GPUs per task (the task's SLURM_STEP_GPUS differs from the
// step's `step_gpus`), and which; nullopt when every task has the step's GPUs.
std::optional<SlurmTaskGpus> slurm_task_gpus(const EnvLookup& task_env,
                                             const std::vector<int>& step_gpus, int local_id,
                                             int local_tasks);

// The node GPU indices Slurm's binding gives each of `local_tasks` tasks, restricted to the
// step's GPUs (map_gpu, mask_gpu and per_task; "*N" repeats an entry); nullopt for bindings
// that depend on more than the text (closest, single) or that cannot be read.
std::optional<std::vector<std::vector<int>>> slurm_gpu_map(const std::string& binding,
                                                           const std::vector<int>& step_gpus,
                                                           int local_tasks);

struct KeptBinding {
  TaskBinding task;  // what to apply: the GPU visibility variables left as Slurm set them
  bool cores_may_be_shared = false;
  // Slurm's choice cannot be identified (--gpu-bind=closest or single under ConstrainDevices,
  // say): the task keeps Slurm's whole binding and gpubind applies nothing.
  bool slurm_binding_only = false;
};

// The binding for local task `local_id` whose GPUs Slurm chose: the CPUs, NUMA node, NIC and
// variables of the plan's task holding the same GPUs (the k-th such task for the k-th of the
// tasks Slurm gave them), or the CPUs of every planned task holding one of them. `step_table`
// pairs the step's node GPU indices with the tokens the plan uses; `slurm_tokens` is the task's
// own visibility value. GPUBIND_GPUS and GPUBIND_GPU_PCI name Slurm's GPUs, and no GPU
// visibility variable is set.
KeptBinding keep_slurm_gpus(const StepPlan& plan,
                            const std::vector<std::pair<int, std::string>>& step_table,
                            const SlurmTaskGpus& choice, int local_id,
                            const std::string& slurm_tokens);

}  // namespace gpubind::client
