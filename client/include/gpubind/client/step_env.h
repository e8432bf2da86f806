// Reading a step's GPUs and shape from its environment, and what a task's binding looks like to
// the user. Pure functions over an environment lookup, so they are tested without Slurm.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpubind/client/types.h"
#include "gpubind/gpu_vendors.h"

namespace gpubind::client {

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// A variable of an environment, with its value.
struct EnvEntry {
  std::string name, value;
};

// The first GPU visibility variable Slurm sets for a step with GPUs (CUDA_VISIBLE_DEVICES,
// ROCR_VISIBLE_DEVICES, ZE_AFFINITY_MASK, GPU_DEVICE_ORDINAL, in that order) that `env` has.
std::optional<EnvEntry> slurm_visibility_var(const EnvLookup& env);

// "0,1,,3" -> {"0", "1", "3"}: Slurm's comma lists, empty items dropped.
std::vector<std::string> split_list(const std::string& text);

struct StepGpus {
  std::vector<std::pair<int, std::string>> gpus;  // node GPU index, the step's token
  // Tokens that name GPUs themselves, for the planner to place: NVIDIA MIG instances
  // ("MIG-<uuid>", whose Slurm indices count instances, not GPUs), and GPU UUIDs that come
  // without Slurm's indices.
  std::vector<std::string> unplaced;
  std::vector<int> unplaced_slurm_indices;  // Slurm's index for each, where it gave them
  std::string warning;                      // set when the env could not be read fully
};

// The step's GPUs: node indices from SLURM_STEP_GPUS (never the job's SLURM_JOB_GPUS), tokens
// from the visibility variable Slurm set (CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
// ZE_AFFINITY_MASK or GPU_DEVICE_ORDINAL), position by position. No GPU information means a step
// without GPUs.
// MIG tokens are never read as GPU numbers: they come back in `unplaced`, as do GPU UUIDs
// without SLURM_STEP_GPUS.
StepGpus step_gpus_from_env(const EnvLookup& env);

// Whether Slurm says nothing at all about GPUs for this step: no GPU list of the step or the job,
// no GPU count and no visibility variable (a site without gres/gpu). A step that Slurm says has
// no GPUs in a job with GPUs (--gres=none) still has SLURM_JOB_GPUS: it is not such a step.
bool slurm_says_nothing_about_gpus(const EnvLookup& env);

// Which component of a heterogeneous step this job is (Slurm's SLURM_JOB_ID_HET_GROUP_K, or
// SLURM_JOB_ID_PACK_GROUP_K before 20.11's renaming, equal to its own job id); nullopt for a
// step of one component or where the variables do not say.
std::optional<int> het_component(const EnvLookup& env, unsigned long job_id, int components);

// The count in SLURM_GPUS_PER_TASK ("2" or "a100:2"), SLURM_NTASKS_PER_GPU, SLURM_CPUS_PER_TASK;
// 0 when unset or unreadable.
int count_from_env(const EnvLookup& env, const std::string& name);

// The task's Level Zero hierarchy for naming PVC tiles: "composite" when ZE_FLAT_DEVICE_HIERARCHY
// says COMPOSITE, else "" (FLAT, Level Zero's default; COMBINED names devices as FLAT does).
std::string ze_hierarchy_from_env(const EnvLookup& env);
// What a ZE_FLAT_DEVICE_HIERARCHY Level Zero does not know ("composite" in lower case) does to the
// task, for a warning; "" where unset or one of Level Zero's own values.
std::string ze_hierarchy_warning(const EnvLookup& env);

// The GPU visibility variables Slurm may set for a step (never HIP_VISIBLE_DEVICES: one in the
// task is the user's), other than the primary one of the task's vendor and those the plan sets,
// and what each must become so that all of them select the task's own GPUs. `task_env` is the
// task's environment once the plan's variables are set. The runtime of the vendor applies some
// after the primary (HIP reads CUDA_VISIBLE_DEVICES and GPU_DEVICE_ORDINAL after
// ROCR_VISIBLE_DEVICES): those get the task's GPUs' places in the primary's list ("0,1" when the
// plan narrowed it to the task's GPUs); the others are read on their own and get the task's
// tokens.
struct VisibilityUpdate {
  std::string name;
  std::string value;
};
std::vector<VisibilityUpdate> other_visibility_vars(const EnvLookup& task_env,
                                                    const TaskBinding& task);

using gpubind::is_gpu_visibility_var;  // gpu_vendors.h

// Nested steps (srun inside a bound task, a launcher's workers under gpubind-run) inherit what
// gpubind set in the outer task. The task keeps in kSetRecordVar, as "NAME:hash,...", the
// variables gpubind set in it (not GPU visibility, which Slurm sets per step, nor the GPUBIND_*
// information).
inline constexpr const char* kSetRecordVar = "GPUBIND_SET";
std::string record_of_set_vars(const std::vector<std::pair<std::string, std::string>>& set);
// The recorded variables still holding the value gpubind gave them. An environment cannot tell
// such a value from the same value a user exported again.
std::vector<EnvEntry> inherited_values(const EnvLookup& env);
// The GPUBIND_* information and the record: what describes the outer binding, never the user's.
std::vector<std::string> binding_info_vars(const EnvLookup& env);
// binding_info_vars and the names of inherited_values: everything the outer binding left.
std::vector<std::string> stale_binding_vars(const EnvLookup& env);

// A task whose CPUs were bound as it started (a --cpu-bind without a list, a launcher's own
// binding), planned so (the request's cpus_bound_at_launch: nothing derived from CPUs): `cpus`,
// the ones it has, as its CPUs and in GPUBIND_CPUS, gpubind's record of the binding.
TaskBinding with_launch_cpus(const TaskBinding& task, const std::string& cpus);

// One line of the verbose table.
// "0 (0000:c1:00.0, L3 6) 1 (0000:c6:00.0, L3 7)": each GPU's token, bus id and locality.
std::string describe_gpus(const std::vector<TaskGpuInfo>& gpus);

std::string describe_binding(const std::string& host, unsigned global_rank, const TaskBinding& task,
                             const std::string& source);

}  // namespace gpubind::client
