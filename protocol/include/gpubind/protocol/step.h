// A step's plan request and its answer as the plugin (and every client that speaks the compact
// transport) holds them: plain C++ values, free of protobuf, encoded to and decoded from
// binder.proto's PlanRequest and PlanResponse by client.h.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpubind::protocol {

// What Slurm or the user fixed for one task before planning (binder.proto's FixedTask).
struct FixedTask {
  std::vector<int> gpus;  // positions in the request's GPU list; empty = not fixed
  std::string cpus;       // cpu list; empty = not fixed
  bool operator==(const FixedTask&) const = default;
};

struct StepRequest {
  uint64_t job_id = 0, step_id = 0;
  int ntasks = 1;
  std::string allowed_cpus;   // cpu list; empty = no restriction
  std::string allowed_cores;  // core indices (Slurm's S_STEP_ALLOC_CORES); empty = none given
  bool gpus_given = false;
  std::vector<std::pair<int, std::string>> gpus;  // node GPU index, the step's token
  // GPUs known by PCI bus id instead (bus id, token); a request lists GPUs one way only.
  std::vector<std::pair<std::string, std::string>> gpus_by_pci;
  std::vector<std::string> unplaced_gpus;   // tokens without node indices (UUIDs, MIG instances)
  std::vector<int> unplaced_slurm_indices;  // Slurm's index for each, where it gave them
  int cpus_per_task = 0, gpus_per_task = 0, tasks_per_gpu = 0;
  std::string order;  // "", "gpu" or "cpu"
  int smt = -1;       // -1 = the policy's
  bool no_gpu_env = false, no_nic_env = false, omp = false;
  std::string ze_hierarchy;  // "" or "flat" (Level Zero's default), "composite"
  // oneCCL in the tasks: CCL_WORKER_COUNT (0 = unset), CCL_PROCESS_LAUNCHER, CCL_LOCAL_SIZE.
  int ccl_worker_count = 0;
  std::string ccl_process_launcher;
  int ccl_local_size = 0;
  std::vector<FixedTask> fixed;  // empty, or one per task
  // The HIP_VISIBLE_DEVICES the tasks inherit, where set (even empty).
  bool hip_inherited = false;
  std::string inherited_hip;
  bool cpus_bound_at_launch = false;  // each task's CPUs are bound as it starts
  bool gpus_named_by_slurm = false;   // Slurm's variables name each task's GPUs
  std::string slurm_gpu_rule;         // "", "closest" or "single": with fixed CPUs
  std::string task_command;           // the program each task runs first, base name; "" = unknown
};

// Whether the request carries what Slurm or the user fixed, which a daemon older than them
// would drop unread (common's has_facts over the planner's request).
inline bool has_facts(const StepRequest& r) {
  return !r.fixed.empty() || r.hip_inherited || r.cpus_bound_at_launch || r.gpus_named_by_slurm ||
         !r.slurm_gpu_rule.empty();
}

struct TaskEnv {
  std::string name, value;
  bool only_if_unset = false;
};

// One GPU of a task: its visibility token, bus id and locality ("L3 6"), for people.
struct TaskGpuInfo {
  std::string token, pci, locality;
  int node_index = -1;  // the node's GPU number; -1 for a token with no node GPU (MIG)
};

struct TaskBinding {
  int rank = 0;  // local rank
  std::string cpus;
  int numa_node = -1;  // the Linux number of the NUMA node for its memory, -1 = none
  int l3_index = -1;   // the L3 holding most of its CPUs
  std::vector<TaskGpuInfo> gpus;
  std::string tokens;     // the task's GPU visibility tokens, "3" or "2,3"
  std::string vendor;     // vendor of the task's GPUs, "" without GPUs
  std::string nic_names;  // the names of the task's NICs, "mlx5_0,mlx5_3"
  std::vector<TaskEnv> env;
};

// One GPU of the step and its domain's CPUs (binder.proto's GpuPlace).
struct GpuPlace {
  int node_index = 0;
  std::string cpus;
};

struct StepPlan {
  std::string source;  // who planned: "daemon" or "fallback" (set by the caller)
  std::vector<std::string> warnings;
  std::vector<TaskBinding> tasks;
  std::vector<GpuPlace> gpu_places;  // empty from daemons before it
  bool facts_kept = false;  // the request's facts were kept (has_facts; false: an old daemon)
};

}  // namespace gpubind::protocol
