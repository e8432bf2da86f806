// Decide once: what Slurm and the user already fixed for a step is read before its tasks start
// and carried in the request (step_facts, add_facts), the planner makes each task's final
// binding, and at launch one pure function (decide_launch) checks the task's own facts against
// the plan and says what to apply. The plugin and gpubind-run read facts, call these, and apply.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpubind/client/apply.h"
#include "gpubind/client/srun_options.h"
#include "gpubind/client/step_env.h"
#include "gpubind/client/types.h"
#include "gpubind/cpuset.h"

namespace gpubind::client {

// The user's explicit binding for the step: what srun passed down (`passed`, kExplicitEnv's
// value), else a CPU or memory binding only a user gives (cpu_bind_type_is_explicit).
ExplicitBinding step_explicit_binding(const EnvLookup& env,
                                      const std::optional<std::string>& passed);

// What Slurm and the user fixed for the step's tasks, read once from the step's environment.
struct StepFacts {
  ExplicitBinding user;
  // Slurm's per-task GPU binding: "map_gpu:1,0", "mask_gpu:0x3", "per_task:2", "closest",
  // "single:1"; "" where Slurm gives every task the step's GPUs.
  std::string gpu_binding;
  // Where the binding's GPU ids count the job's GPUs (ConstrainDevices): their node indices in
  // order (slurm_gpu_choice.h's relative_gpu_ids); empty where the ids are node indices.
  std::vector<int> gpu_id_base;
  bool slurm_cpus = false;      // the user's --cpu-bind stays (the site does not override it)
  bool cpus_listed = false;     // and lists each task's CPUs (cpu_bind_lists): they are planned
  bool slurm_memory = false;    // the user's --mem-bind stays
  bool slurm_gpu_vars = false;  // --gpu-bind=none: the GPU visibility variables stay Slurm's
};
StepFacts step_facts(const EnvLookup& env, const ExplicitBinding& user, bool override_explicit);

// Whether Slurm names the tasks' GPUs in its own variables: a per-task GPU binding of its own, or
// --gpu-bind=none (the request's gpus_named_by_slurm).
bool slurm_names_gpus(const StepFacts& facts);

// Each task's CPUs under an explicit CPU binding whose list says them (mask_cpu, map_cpu, their
// entries reused in turn as Slurm does); nullopt for any other (none, cores, rank...: no task's
// own CPUs are known before it starts).
std::optional<std::vector<CpuSet>> cpu_bind_lists(const std::string& cpu_bind, int tasks);

// Puts the facts in the request: each task's GPUs where Slurm's binding text decides them
// (map_gpu, mask_gpu, per_task), each task's CPUs where the user's --cpu-bind lists them (else,
// with a --cpu-bind, that Slurm binds them as each task starts), and --gpu-bind=none or a choice
// Slurm makes per task by CPUs (closest, single) as GPU variables left to Slurm. Returns what
// could not be carried, for --verbose ("" when all was).
std::string add_facts(const StepFacts& facts, StepRequest& request);

// The task, as it is just before exec.
struct TaskLaunch {
  int local_id = -1;
  int local_tasks = 0;
  CpuSet affinity;  // the CPUs Slurm bound it to
};

struct LaunchDecision {
  // False: the task keeps Slurm's binding and `why` says why (a line for the task's stderr).
  bool apply = false;
  std::string why;
  int planned = -1;  // the plan's task to apply
  ApplyOptions options;
  bool slurm_chose_gpus = false;  // Slurm gave this task GPUs of its own, as planned
  // The user's --cpu-bind names no list (cores, sockets, rank...): Slurm chose the CPUs at
  // launch, after the plan (which set nothing derived from CPUs): the task's record names them
  // (with_launch_cpus).
  bool cpus_bound_at_launch = false;
};

// What to do with one task: apply its planned binding, or, where the task's own facts disagree
// with what the step was planned from, keep Slurm's binding and say why. `step_gpus` are the
// step's node GPU indices; `task_env` the task's environment (its SLURM_STEP_GPUS).
LaunchDecision decide_launch(const StepPlan& plan, const StepFacts& facts,
                             const std::vector<int>& step_gpus, const EnvLookup& task_env,
                             const TaskLaunch& task, bool no_gpu_env);

}  // namespace gpubind::client
