// A worker a launcher started (torchrun, mpiexec, PALS, Flux, srun), as gpubind-run reads it:
// the CPUs its launcher had, and whether the plugin bound it already.
#pragma once

#include <string>

#include "gpubind/client/step_env.h"
#include "gpubind/cpuset.h"
#include "gpubind/launcher.h"

namespace gpubind::client {

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
bool already_bound_by_plugin(const EnvLookup& env, const LocalRank& place);

}  // namespace gpubind::client
