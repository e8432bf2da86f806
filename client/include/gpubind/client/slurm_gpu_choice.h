// Slurm's own choice of each task's GPUs. With --gpu-bind (map_gpu, mask_gpu, single, closest,
// per_task) or --gpus-per-task (which implies per_task), slurmstepd gives each task its own GPUs
// before task_init: the task's SLURM_STEP_GPUS and visibility variables name them, and under
// ConstrainDevices its device cgroup allows only those. gpubind keeps that choice and binds the
// task near those GPUs; it never points a task at a GPU Slurm did not give it. Pure functions
// over the task's environment and the step's plan, tested without Slurm.
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
// domain in the plan holds one of the CPUs Slurm bound the task to.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpubind/client/step_env.h"
#include "gpubind/client/types.h"

namespace gpubind::client {

struct SlurmTaskGpus {
  // The task's node GPU indices where `identified` (see above); otherwise what its
  // SLURM_STEP_GPUS lists.
  std::vector<int> gpus;
  bool identified = false;
  std::string binding;  // Slurm's GPU binding, "map_gpu:1,0", "per_task:2" ("" if not said)
  // Local tasks before this one, and in all, that Slurm gave exactly these GPUs (or, not
  // identified, whose GPUs lie among the same `among`); -1 where not known.
  int same_before = -1;
  int same_total = -1;
  // Not identified, yet known to lie among these step GPUs: single:N with several of the step's
  // GPUs near the task's CPUs. They make the task's GPU domain, which its cores and NIC follow.
  std::vector<int> among;
};

// Whether Slurm chose this task's GPUs per task (the task's SLURM_STEP_GPUS differs from the
// step's `step_gpus`), and which; nullopt when every task has the step's GPUs. `task_cpus` is the
// CPU list Slurm bound the task to; SLURM_CPU_BIND_LIST gives the other local tasks' CPUs.
std::optional<SlurmTaskGpus> slurm_task_gpus(const EnvLookup& task_env,
                                             const std::vector<int>& step_gpus, int local_id,
                                             int local_tasks, const StepPlan& plan,
                                             const std::string& task_cpus);

// The step's GPUs whose domain holds one of `cpus`, as the plan places them: a GPU's domain is
// its locality in the plan ("L3 2", "NUMA 1", "machine"); an L3 holds the CPUs of the planned
// tasks the plan placed in it, another domain those of the planned tasks holding only its GPUs.
// nullopt where the plan cannot tell: a step GPU no planned task holds, or, with no GPU near, a
// CPU in no domain.
std::optional<std::vector<int>> gpus_near_cpus(const StepPlan& plan,
                                               const std::vector<int>& step_gpus,
                                               const std::string& cpus);

// The node GPU indices Slurm's binding gives each of `local_tasks` tasks, restricted to the
// step's GPUs (map_gpu, mask_gpu and per_task; "*N" repeats an entry); nullopt for bindings
// that depend on more than the text (closest, single) or that cannot be read.
std::optional<std::vector<std::vector<int>>> slurm_gpu_map(const std::string& binding,
                                                           const std::vector<int>& step_gpus,
                                                           int local_tasks);

struct KeptBinding {
  TaskBinding task;  // what to apply: the GPU visibility variables left as Slurm set them
  bool cores_may_be_shared = false;
  // Whose binding it takes: a planned task holding the same GPUs, the planned tasks holding one
  // of them (their cores joined; `planned_rank` the first), or, none holding any, its own.
  enum class Basis { kNone, kSameGpus, kSomeOfItsGpus, kOwnTask } basis = Basis::kNone;
  int planned_rank = -1;  // that planned task's rank; -1 with kNone
  // Slurm's choice can be placed neither by its GPUs nor by their domain: the task keeps Slurm's
  // whole binding and gpubind applies nothing.
  bool slurm_binding_only = false;
};

// The binding for local task `local_id` whose GPUs Slurm chose: the CPUs, NUMA node, NIC and
// variables of the plan's task holding the same GPUs (the k-th such task for the k-th of the
// tasks Slurm gave them), or the CPUs of every planned task holding one of them. `step_table`
// pairs the step's node GPU indices with the tokens the plan uses; `slurm_tokens` is the task's
// own visibility value. GPUBIND_GPUS and GPUBIND_GPU_PCI name Slurm's GPUs, and no GPU
// visibility variable is set. A choice known only by its domain (`among`) is placed by those
// GPUs, and GPUBIND_GPU_PCI, which would name a GPU, is not set.
KeptBinding keep_slurm_gpus(const StepPlan& plan,
                            const std::vector<std::pair<int, std::string>>& step_table,
                            const SlurmTaskGpus& choice, int local_id,
                            const std::string& slurm_tokens);

}  // namespace gpubind::client
