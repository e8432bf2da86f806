// A worker's request and binding: the CPUs its launcher had, the request every worker of the
// node sends alike, and its own entry applied to this process (affinity, NUMA preference,
// environment) before COMMAND runs.
#pragma once

#include <string>

#include "gpubind/cpuset.h"
#include "gpubind/launcher.h"
#include "gpubind/result.h"
#include "options.h"
#include "step_env.h"
#include "step_types.h"

namespace gpubind::run {

struct LauncherCpus {
  CpuSet cpus;
  std::string how;  // for --verbose
};

// The CPUs the launcher had, which every worker divides alike: this process's own, or its
// parent's (the launcher's) where the launcher bound this worker to part of them (Open MPI's
// default --bind-to core/package), since each worker would otherwise divide a different set.
// The parent's never reach past this process's cpuset cgroup (the job's CPUs).
LauncherCpus launcher_cpus();
// The rule itself: `own`, `parent` and `cgroup` (each empty where unreadable).
LauncherCpus launcher_cpus_of(const CpuSet& own, const CpuSet& parent, const CpuSet& cgroup);

// Whether gpubind's SPANK plugin bound this process as this very local rank: a Slurm task of a
// step run with --gpu-bind-auto, with nothing more to divide.
bool already_bound_by_plugin(const spank::EnvLookup& env, const LocalRank& place);

// The request every worker sends alike (GPUs are filled by worker_gpus).
spank::StepRequest worker_request(const spank::EnvLookup& env, const LocalRank& place,
                                  const spank::UserFlags& flags, const CpuSet& cpus);

// Binds this process as `task` says and sets its environment (clearing first what an outer
// binding left, as a new Slurm step does). Fails only when the CPUs cannot be set; the
// environment is then left as it was.
Status apply_binding(const spank::EnvLookup& env, const spank::TaskBinding& task,
                     const spank::UserFlags& flags);

}  // namespace gpubind::run
