// Why a plan is what it is: the planner's own decisions, recorded as it makes them when a caller
// passes a PlanExplanation to make_plan (gpubindctl explain), and not at all otherwise. Plain data
// beside the Plan it explains; the words are tools/output's (explain_format.h).
#pragma once

#include <string>
#include <vector>

#include "gpubind/cpuset.h"
#include "gpubind/policy.h"

namespace gpubind {

// How near two places are: the smallest thing they share, as the planner's distance ranks them.
// kNoAnchor: the task has nothing to be near (no GPU, no core yet), so no nearness applies.
enum class Nearness { kPciSwitch, kL3, kNuma, kPackage, kMachine, kNoAnchor, kUnknown };
// "pci-switch", "l3", "numa", "package", "machine", "none"
const char* nearness_name(Nearness nearness);

// Why a task holds one of its GPUs.
enum class GpuReason {
  kRankOrder,    // order=gpu: consecutive ranks take the step's GPUs (or chunks of them) in turn
  kCoreShare,    // order=cpu: the GPU's domain holds some of the task's cores (share_permille)
  kNearest,      // order=cpu: none of its cores lie in a free GPU's domain; the nearest with room
  kLeastLoaded,  // order=cpu: no GPU it lacked had room left; the least loaded one
  kUnplaced,     // a token the node cannot place (MIG, UUID): handed out in step order
  kFixed,        // given to the task before planning (Slurm's map_gpu, mask_gpu, per_task)
};
const char* gpu_reason_name(GpuReason reason);  // "rank-order", "core-share", ...

struct GpuChoice {
  int step_index = 0;  // into the step's GPU list, as TaskGpu::step_index
  GpuReason reason = GpuReason::kRankOrder;
  int share_permille = 0;  // kCoreShare: the task's cores in the GPU's domain, per mille
  Nearness nearness = Nearness::kMachine;  // order=cpu: from the task's cores to the GPU
  int sharers = 1;                         // tasks holding this GPU (or its tiles) in the plan
  int chunk = 1;                           // kRankOrder: GPUs in the chunk the task took
};

// Where a task's cores came from, in the order the planner's phases gave them.
enum class CoreSource {
  kGpuDomain,   // its GPUs' own domain, split among that GPU's tasks
  kNodeShare,   // order=cpu (or no GPU): its share of the node, in core order
  kSpare,       // a spare core no task's domain gave out, nearest first over all tasks
  kSpill,       // cpus-per-task beyond its domain's share, from the nearest free L3
  kFromRicher,  // it had none: the task holding most cores gave up one
  kShared,      // more tasks than hardware threads: a core shared with other tasks
  kFixed,       // bound before planning (an explicit --cpu-bind list): kept as given
};
const char* core_source_name(CoreSource source);  // "gpu-domain", "node-share", ...

struct CoreGrant {
  CoreSource source = CoreSource::kGpuDomain;
  CpuSet cpus;
  // kGpuDomain: a node GPU (Topology::gpus) whose locality is the domain; -1 otherwise.
  int domain_gpu = -1;
  // kSpare, kSpill, kFromRicher, kShared: from the task's anchor (its GPU's domain, else its
  // first core) to these cores.
  Nearness nearness = Nearness::kMachine;
};

struct NicChoice {
  int nic_index = -1;
  int gpu_step_index = -1;  // the GPU it serves; -1: chosen for a task without GPUs, by its cores
  Nearness nearness = Nearness::kMachine;  // from that GPU (or the task's cores) to the NIC
  int equally_near = 1;  // NICs as near that GPU: the node's GPUs take them in turn
  bool leads = false;    // the task's first NIC (the one Cray MPICH and single-NIC users take)
};

// Which rule set a variable.
struct EnvRule {
  std::string name;
  std::string group;  // "gpu_env", "nic_env", "omp_env", "omp_places", "gpubind", "mixed-vendor"
  int index = -1;     // the template's position in the policy's group; -1 when not a template
  std::string when;   // the template's selector ("amd", "slingshot"), "" for every task
  std::string value_template;  // the template as the policy writes it ("{gpus}")
  bool emptied = false;        // set empty: another vendor's list must not name this task's GPUs
};

enum class MemoryReason { kGpuNuma, kMostCpus, kNone };

struct TaskExplanation {
  int rank = 0;
  std::vector<GpuChoice> gpus;
  std::vector<CoreGrant> cores;
  std::vector<NicChoice> nics;
  std::vector<EnvRule> env;
  MemoryReason memory = MemoryReason::kNone;
  // Rules it could not meet.
  bool far_from_gpu = false;  // none of its cores lie in any of its GPUs' domains
  bool shares_cores = false;  // it shares a core with another task
  bool shares_gpu = false;    // it shares a whole GPU with another task
};

// Where the order came from; kFixedGpus/kFixedCpus: what was fixed before planning decides it
// (cores follow fixed GPUs, GPUs follow fixed CPUs).
enum class OrderFrom { kRequest, kPolicy, kNoGpus, kFixedGpus, kFixedCpus };

struct PlanExplanation {
  Order order = Order::kGpu;
  OrderFrom order_from = OrderFrom::kPolicy;
  std::string policy_source;
  CpuSet step_cpus;                   // the step's CPUs that the node has
  CpuSet reserved_listed;             // of those, the policy's reserved_cpus
  CpuSet reserved_first_core_per_l3;  // of those, reserve_first_core_per_l3's (not listed too)
  CpuSet outside_cores;               // of those, on cores the step does not hold (allowed_cores)
  int smt = 0;                        // threads per core tasks get (0: all the step allows)
  CpuSet smt_trimmed;                 // usable but beyond `smt` threads of their core
  bool threads_as_units = false;      // more tasks than cores: tasks got threads of their own
  std::vector<TaskExplanation> tasks;
};

}  // namespace gpubind
