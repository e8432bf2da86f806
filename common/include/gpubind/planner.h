// The binding planner: a pure function from (topology, policy, step shape) to one plan per local
// task. No I/O, no Slurm, no gRPC; deterministic for equal inputs.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpubind/cpuset.h"
#include "gpubind/env_list.h"
#include "gpubind/model_limits.h"
#include "gpubind/policy.h"
#include "gpubind/result.h"
#include "gpubind/small_vector.h"
#include "gpubind/topology.h"

namespace gpubind {

struct PlanExplanation;  // explain.h

// One GPU allocated to the step, in the step's order.
struct StepGpu {
  StepGpu() = default;
  // Not an aggregate: most steps name GPUs by index and token alone.
  StepGpu(int node_index_, std::string token_, std::string pci_ = {})
      : node_index(node_index_), token(std::move(token_)), pci(std::move(pci_)) {}

  int node_index = 0;  // index into Topology::gpus
  std::string token;   // how the step names it in its visibility env ("0", "3", "GPU-uuid"...)
  std::string pci;     // when set, its PCI bus id names the GPU instead of `node_index`
};

enum class ZeHierarchy { kFlat, kComposite };

// How Slurm chooses each task's GPUs by its CPUs (--gpu-bind=closest, single): binder.proto's.
enum class SlurmGpuRule { kNone, kClosest, kSingle };

// What Slurm, the launcher or the user fixed for one task before gpubind planned it: kept as
// given, and everything else (NICs, the other tasks, spare cores, every variable) placed and
// rendered around it.
struct FixedTask {
  // Positions in the step's GPU list: the GPUs its launcher gave it (Slurm's map_gpu, mask_gpu,
  // per_task). Empty: not fixed. Whoever chose them named them to the task in the variables Slurm
  // sets (under ConstrainDevices counting the task's devices from 0): the plan sets none of those
  // (gpus_named_by_slurm), an inherited HIP list it rewrites still.
  std::vector<int> gpus;
  // The CPUs it is bound to (an explicit --cpu-bind list); nullopt: not fixed.
  std::optional<CpuSet> cpus;
};

struct PlanRequest {
  int ntasks = 1;
  std::optional<CpuSet> allowed_cpus;  // the step's CPUs; nullopt = the whole node
  // The step's cores as indices in topology order (Slurm's abstract core ids, which count cores
  // socket by socket in the same order); nullopt = no restriction. Combined with allowed_cpus.
  std::optional<CpuSet> allowed_cores;
  std::optional<std::vector<StepGpu>> gpus;  // nullopt = every GPU of the node, tokens "0".."G-1"
  // GPUs the step names by tokens alone, with no node index (GPU UUIDs, NVIDIA MIG instances
  // "MIG-<uuid>"): each placed on its GPU where the node's UUIDs or MIG layout tell which, else
  // handed to tasks as they are, cores placed without them. Only with no `gpus`.
  std::vector<std::string> unplaced_gpus;
  // Slurm's index for each unplaced token, where it gave one (SLURM_STEP_GPUS): for MIG
  // instances it counts instances, GPU by GPU in PCI order. Empty when not known.
  std::vector<int> unplaced_slurm_indices;
  int cpus_per_task = 0;       // logical CPUs per task; 0 = an even share
  int gpus_per_task = 0;       // 0 = derived from tasks and GPUs
  int tasks_per_gpu = 0;       // 0 = derived
  std::optional<Order> order;  // nullopt = the policy's order
  std::optional<int> smt;      // nullopt = the policy's smt
  // Whether to render the policy's gpu_env and nic_env groups. binder.proto carries them negated
  // (no_gpu_env, no_nic_env) only because a proto3 bool defaults to false.
  bool gpu_env = true;
  bool nic_env = true;
  std::optional<bool> omp_places;  // nullopt = the policy's omp_places
  // How the task's Level Zero counts devices (its ZE_FLAT_DEVICE_HIERARCHY): FLAT (the default)
  // makes each PVC tile a device, COMPOSITE keeps cards with "card.tile" sub-devices.
  ZeHierarchy ze_hierarchy = ZeHierarchy::kFlat;
  // oneCCL in the tasks, from their environment: what {ccl_worker_affinity} must count.
  struct Ccl {
    int worker_count = 1;  // CCL_WORKER_COUNT, oneCCL's default 1
    std::string launcher;  // CCL_PROCESS_LAUNCHER, "" = unset
    int local_size = 0;    // CCL_LOCAL_SIZE (launcher "none"), 0 = unset
  } ccl;
  // Per task (index: local rank), what was fixed before planning: empty, or one per task, GPUs
  // fixed for every task or none, CPUs likewise.
  std::vector<FixedTask> fixed;
  // The HIP_VISIBLE_DEVICES the tasks inherit (a batch script's export), unset: nullopt. HIP
  // reads it as indices into the list ROCR_VISIBLE_DEVICES leaves, so the plan rewrites it for
  // each AMD task as positions in that task's narrowed list.
  std::optional<std::string> inherited_hip_visible_devices;
  // Each task's CPUs are bound as it starts, after the plan (a CPU binding without a list): no
  // variable derived from the planned CPUs, and no memory preference (binder.proto).
  bool cpus_bound_at_launch = false;
  // Slurm names each task's GPUs in its own variables (binder.proto): the plan sets no GPU
  // visibility variable. Fixed GPUs imply it.
  bool gpus_named_by_slurm = false;
  // With every task's CPUs fixed: the rule Slurm chooses their GPUs by, which the plan follows.
  SlurmGpuRule slurm_gpu_rule = SlurmGpuRule::kNone;
  // The program each task runs first, its base name ("apptainer"); "" = not known (binder.proto).
  std::string task_command;
};

// One variable of a task's environment, as EnvList hands it out (views into the list).
using EnvVar = EnvList::Var;

// Plans are self-contained: they name PCI ids and NICs, so they can be shown without a topology.
struct TaskGpu {
  int step_index = 0;   // position in the step's GPU list (or its unplaced tokens)
  int node_index = 0;   // index into Topology::gpus, -1 for an unplaced token (MIG)
  int tile_index = -1;  // sub-device, or -1 for the whole GPU
  // What goes into the visibility env: "3"; a tile "3.1" (composite) or "7" (flat); a whole
  // tiled card under FLAT lists its tiles, "6,7".
  std::string token;
  std::string pci;  // PCI bus id
  Vendor vendor = Vendor::kUnknown;
};

struct TaskPlan {
  int rank = 0;  // node-local rank
  CpuSet cpus;
  int ncores = 0;
  SmallVector<TaskGpu, 1> gpus;  // inline: a task nearly always has one GPU
  int nic_index = -1;            // index into Topology::nics of the first NIC, -1 = none
  // Every NIC of the task: the nearest of each of its GPUs, in GPU order.
  std::vector<int> nic_indices;
  std::string nic_names;  // their names, "mlx5_0,mlx5_3"
  // The Linux number of the NUMA node for the task's memory (numactl's and set_mempolicy's):
  // its GPU's, where it has cores there, else the one holding most of its CPUs.
  int numa_node = -1;
  int l3_index = -1;  // L3 holding most of the task's CPUs
  EnvList env;
};

// One GPU of the step and the CPUs of its domain (its locality), as data: what the launch side
// needs to tell which GPUs Slurm's closest/single gave a task by its CPUs.
struct GpuPlace {
  int node_index = 0;
  CpuSet cpus;
};

struct Plan {
  std::vector<TaskPlan> tasks;
  std::vector<std::string> warnings;
  std::vector<GpuPlace> gpu_places;  // the step's placed GPUs, in step order
  bool facts_kept = false;           // the request had facts (has_facts), and they were kept
};

// Whether the request carries what Slurm or the user fixed (fixed tasks, an inherited HIP list,
// CPUs bound at launch, GPUs Slurm names): what an older daemon would drop unread.
inline bool has_facts(const PlanRequest& request) {
  return !request.fixed.empty() || request.inherited_hip_visible_devices.has_value() ||
         request.cpus_bound_at_launch || request.gpus_named_by_slurm ||
         request.slurm_gpu_rule != SlurmGpuRule::kNone;
}

// Fails (with a message naming the fault) on bad requests: no tasks or more than kMaxTasks
// (model_limits.h), unknown or repeated GPUs, no usable CPUs. Everything else plans, with
// warnings for what it had to give up.
Result<Plan> make_plan(const Topology& topology, const SitePolicy& policy,
                       const PlanRequest& request);

// The same plan, and why each task got what it did (explain.h): for tools, at the cost of the
// recording; make_plan above records nothing.
Result<Plan> make_plan(const Topology& topology, const SitePolicy& policy,
                       const PlanRequest& request, PlanExplanation& explanation);

// The CPUs the policy keeps from tasks on this topology.
CpuSet reserved_cpus(const Topology& topology, const SitePolicy& policy);

}  // namespace gpubind
