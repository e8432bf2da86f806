// Slurm's own choice of each task's GPUs. With --gpu-bind (map_gpu, mask_gpu, single, closest,
// per_task) or --gpus-per-task (which implies per_task), slurmstepd gives each task its own GPUs
// before task_init: the task's SLURM_STEP_GPUS and visibility variables name them, and under
// ConstrainDevices its device cgroup allows only those. gpubind keeps that choice: map_gpu,
// mask_gpu and per_task follow from the binding's text, so the step's request carries each
// task's GPUs (slurm_gpu_map) and the planner places everything else around them; closest and
// single follow from the CPUs Slurm bound each task to, which the launch side reads and checks
// against the plan (launch.h). Pure functions over the task's environment and the step's plan,
// tested without Slurm.
//
// Which GPUs a narrowed task holds. Without ConstrainDevices its SLURM_STEP_GPUS names them by
// node index. Under ConstrainDevices Slurm picks the task's devices for its variables in the
// task's own numbering (0 for the first device it may open), so SLURM_STEP_GPUS names the step's
// first GPUs, as many as the task holds, whichever they are (Slurm 22.05 to 26.05: gres.c's
// _get_usable_gres, then gres_common.c's common_gres_set_env; tests/e2e/gres_cores_test.sh runs
// it). Hence: map_gpu, mask_gpu and per_task are computed from the binding's text; closest and
// single, which Slurm decides by the task's CPUs and each GPU's cores (gres.conf Cores=, what
// AutoDetect finds), are read from SLURM_STEP_GPUS where it names anything but the step's first
// GPUs (then it can only be node indices), else found as Slurm finds them: the step's GPUs whose
// domain (the plan's gpu_places) holds one of the task's CPUs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpubind/client/step_env.h"
#include "gpubind/client/types.h"
#include "gpubind/cpuset.h"

namespace gpubind::client {

// The GPU part of SLURMD_TRES_BIND ("gpu:verbose,map_gpu:1,0" -> "map_gpu:1,0"); "" if none.
std::string slurm_gpu_binding(const std::optional<std::string>& tres_bind);

// closest and single: Slurm chooses each task's GPUs by its CPUs.
bool gpus_chosen_by_cpus(const std::string& binding);

struct SlurmTaskGpus {
  // The task's node GPU indices where `identified` (see above); otherwise what its
  // SLURM_STEP_GPUS lists.
  std::vector<int> gpus;
  bool identified = false;
  std::string binding;  // Slurm's GPU binding, "map_gpu:1,0", "per_task:2" ("" if not said)
};

// Whether Slurm chose this task's GPUs per task (the task's SLURM_STEP_GPUS differs from the
// step's `step_gpus`), and which; nullopt when every task has the step's GPUs. `task_cpus` are
// the CPUs Slurm bound the task to.
std::optional<SlurmTaskGpus> slurm_task_gpus(const EnvLookup& task_env,
                                             const std::vector<int>& step_gpus, int local_id,
                                             int local_tasks, const StepPlan& plan,
                                             const CpuSet& task_cpus,
                                             const std::vector<int>& id_base = {});

// The step's GPUs whose domain (the plan's gpu_places) holds one of `cpus`, in node order;
// nullopt where the plan does not place a step GPU (a daemon from before gpu_places).
std::optional<std::vector<int>> gpus_near_cpus(const StepPlan& plan,
                                               const std::vector<int>& step_gpus,
                                               const CpuSet& cpus);

// The node GPU indices Slurm's binding gives each of `local_tasks` tasks, restricted to the
// step's GPUs (map_gpu, mask_gpu and per_task; "*N" repeats an entry); nullopt for bindings
// that depend on more than the text (closest, single) or that cannot be read. `id_base`: where
// map_gpu's and mask_gpu's ids count the job's GPUs (ConstrainDevices: relative_gpu_ids), those
// GPUs' node indices in order; empty where the ids are node indices.
std::optional<std::vector<std::vector<int>>> slurm_gpu_map(const std::string& binding,
                                                           const std::vector<int>& step_gpus,
                                                           int local_tasks,
                                                           const std::vector<int>& id_base = {});

// Under ConstrainDevices, Slurm's map_gpu and mask_gpu ids count the GPUs allocated to the job
// from 0 (srun(1)): the job's GPUs' node indices in order, told from the step's visibility list
// numbered from 0 while its SLURM_STEP_GPUS names others; empty where the ids are node indices
// (or both numberings agree).
std::vector<int> relative_gpu_ids(const EnvLookup& env);

// Whether Slurm's per-task GPU binding left each task a device cgroup of its own GPUs alone
// (ConstrainDevices without --gres-flags=allow-task-sharing): no task may open another's, so GPU
// peer-to-peer (CUDA IPC, NCCL's and RCCL's P2P, GPU-aware MPI) between them fails or falls back.
// Slurm then numbers a narrowed task's devices from 0 in its own visibility list, which only a
// task holding other GPUs than the step's first shows: `task_gpus` are its GPUs' node indices (as
// planned), `step_gpus` the step's. Without ConstrainDevices the list holds node indices; with
// allow-task-sharing indices within the job (Slurm 24.05.2 and later; node indices in 23.11).
bool gpus_isolated_per_task(const EnvLookup& task_env, std::vector<int> task_gpus,
                            std::vector<int> step_gpus);

// The planned task (its rank in the plan) that tells gpus_isolated_per_task: the first whose
// planned GPUs are not the step's first ones, so that the task bound as it says it; -1 where no
// task can tell.
int task_showing_gpu_isolation(const StepPlan& plan, std::vector<int> step_gpus);

}  // namespace gpubind::client
