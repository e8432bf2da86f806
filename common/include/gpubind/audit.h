// The audit of running tasks: what each task of a job step on this node runs with now (every
// thread's CPUs, its GPUs, where its memory is) judged against what gpubind planned for it, or,
// for a task gpubind did not bind, against the planner's own rules (near its GPUs, inside one
// domain, alone on its cores). Pure: facts in (read from /proc by discovery/running_tasks.h),
// verdicts out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpubind/cpuset.h"
#include "gpubind/topology.h"

namespace gpubind::audit {

struct ThreadFacts {
  int pid = 0;       // the process
  int tid = 0;       // the thread
  std::string name;  // its comm ("python3", "pt_data_worker")
  CpuSet cpus;       // Cpus_allowed_list
};

// A device node's number (/dev/nvidia3 is 195:3, /dev/dri/renderD129 226:129).
struct DeviceNumber {
  int major = 0, minor = 0;
  bool operator==(const DeviceNumber&) const = default;
};

// One line of a cgroup v1 device controller's devices.list ("c 195:3 rwm", "a *:* rwm"): what
// the cgroup's processes may open.
struct DeviceRule {
  char type = 'a';  // 'a' (all), 'c' (character), 'b' (block)
  int major = -1;   // -1: any ("*")
  int minor = -1;
};

// One task of a Slurm step as it runs: its first process (the one slurmstepd started) and every
// process it started since.
struct TaskFacts {
  std::string job_id;   // "123" (the batch step's is its job's)
  std::string step;     // "0", "batch", "interactive"
  int rank = -1;        // SLURM_PROCID; -1 where not known
  int local_rank = -1;  // SLURM_LOCALID
  int uid = -1;
  int pid = 0;                       // the task's first process
  std::vector<ThreadFacts> threads;  // of all its processes
  // What its first process was started with: GPUBIND_* (gpubind's record), the visibility
  // variables, SLURM_STEP_GPUS, SLURM_PROCID, SLURM_LOCALID and SLURMD_NODENAME.
  std::map<std::string, std::string> env;
  // Resident pages on each NUMA node (by its Linux number), summed over its processes.
  std::map<int, int64_t> pages_per_numa;
  // Its first process's device cgroup (Slurm's ConstrainDevices, cgroup v1); nullopt where it has
  // none that can be read (no constraint, cgroup v2's eBPF rules).
  std::optional<std::vector<DeviceRule>> device_rules;
};

// Each GPU's device nodes by its index in the topology (the driver's, read from sysfs and
// procfs): what a device cgroup must let a task open for it to use the GPU.
using GpuDevices = std::map<int, std::vector<DeviceNumber>>;

// The GPUs `rules` let a task open: those with a device node the rules allow.
std::vector<int> gpus_allowed_by(const std::vector<DeviceRule>& rules, const GpuDevices& devices);

enum class Verdict {
  kAsPlanned,           // bound by gpubind and every thread still inside its CPUs
  kRepinned,            // bound by gpubind, and threads moved out of its CPUs since
  kUnboundNear,         // not bound by gpubind, on cores next to its GPUs and alone on them
  kUnboundFar,          // not bound by gpubind, on no core next to its GPUs
  kUnboundStraddling,   // not bound by gpubind, across domains (L3s or NUMA nodes)
  kUnboundOverlapping,  // not bound by gpubind, on cores another task runs on
  kUnknown,             // nothing to judge by (no GPUs known, no record)
};
const char* verdict_name(Verdict verdict);  // "as-planned", "re-pinned", "unbound-far", ...
inline constexpr Verdict kVerdicts[] = {
    Verdict::kAsPlanned,  Verdict::kRepinned,          Verdict::kUnboundNear,
    Verdict::kUnboundFar, Verdict::kUnboundStraddling, Verdict::kUnboundOverlapping,
    Verdict::kUnknown};

struct TaskAudit {
  const TaskFacts* task = nullptr;
  Verdict verdict = Verdict::kUnknown;
  std::string reason;     // in the planner's words: which threads, which CPUs, what it costs
  CpuSet cpus;            // the union of its threads' CPUs
  std::vector<int> gpus;  // its node GPUs, where known
  // The share of its resident pages on NUMA nodes other than those of its CPUs (0..1); -1 when
  // it has too few pages to say.
  double remote_memory = -1;
  bool memory_remote = false;  // more than half, of a task with enough pages to matter
  // The GPUs its device cgroup lets it open; nullopt where that is not known.
  std::optional<std::vector<int>> gpus_allowed;
};

struct StepAudit {
  std::string job_id, step;
  std::string node;  // its tasks' SLURMD_NODENAME; "" where not known
  int uid = -1;
  std::vector<TaskAudit> tasks;
  std::map<Verdict, int> counts;
  int memory_remote = 0;
};

// Judges every task; `tasks` must outlive the result. Steps in job and step order, tasks by rank.
// `gpu_devices` tells which GPUs a task's device cgroup lets it use: its GPUs are then those
// (where its variables name none), and a GPU of its record it may not open is said.
std::vector<StepAudit> audit_tasks(const Topology& topology, const std::vector<TaskFacts>& tasks,
                                   const GpuDevices& gpu_devices = {});

// One line for a step ("job 123 step 0: 4 tasks: 3 as-planned, 1 re-pinned; ..."), and one for
// a task ("  rank 1 (pid 4242): re-pinned: thread 4250 (pt_main) on CPUs 0-63, ...").
std::string describe_step(const StepAudit& step);
std::string describe_task(const TaskAudit& task);

}  // namespace gpubind::audit
