// The CPUs the kernel lets a step's tasks run on, for the step's request: the cpuset of the
// cgroup slurmstepd runs in (Slurm's task/cgroup puts it in the step's), never slurmstepd's own
// affinity. With core specialisation and no cpuset cgroup (task/affinity alone, ConstrainCores=no)
// Slurm confines slurmd and slurmstepd to the specialised CPUs with sched_setaffinity, where no
// task of the step ever runs: their affinity says nothing of the step. Slurm's allocated cores
// (S_STEP_ALLOC_CORES) narrow the cgroup's CPUs to the step's.
#pragma once

#include <optional>
#include <string>

#include "gpubind/cpuset.h"

namespace gpubind::client {

// The effective cpuset of the calling process's cgroup (cgroup v2's cpuset.cpus.effective, from
// the nearest folder up that has one; v1's cpuset controller, cpuset.effective_cpus), reading
// /proc/self/mountinfo, /proc/self/cgroup and the cgroup files under `root` ("" for the real
// root). nullopt where none can be read.
std::optional<CpuSet> cgroup_cpus(const std::string& root = "");

}  // namespace gpubind::client
