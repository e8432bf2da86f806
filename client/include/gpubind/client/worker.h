// A worker a launcher started (torchrun, mpiexec, PALS, Flux, srun), as gpubind-run reads it:
// the CPUs its launcher had, a CPU binding the user asked the launcher for, and whether the
// plugin bound it already.
#pragma once

#include <optional>
#include <string>
#include <vector>

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

// A CPU binding the user asked the launcher itself for, which gpubind-run keeps as the plugin
// keeps an explicit --cpu-bind: torchrun's --numa-binding (PyTorch 2.9 and later), which starts
// each worker under `numactl --physcpubind=CPUS` (or sets its affinity in the child) and leaves
// no mark in the worker's environment, only on the launcher's command line.
struct LauncherBinding {
  std::string launcher;  // "torchrun"
  std::string option;    // as the user meant it: "--numa-binding=node"
};

// The words of a /proc/PID/cmdline file (NUL-separated); empty where unreadable.
std::vector<std::string> command_line_words(const std::string& path);
// Torchrun's --numa-binding[=]MODE (or an abbreviation argparse takes, down to "--nu") among the
// launcher's command-line words before the worker's own command (`worker_command`, this
// process's argv[0] as torchrun ran it; every word where it is not among them); nullopt where the
// launcher is not torchrun or gave no such option.
std::optional<LauncherBinding> launcher_binding_of(const LocalRank& place,
                                                   const std::vector<std::string>& launcher_words,
                                                   const std::string& worker_command);
// The same from the parent process's command line (torchrun's agent: numactl execs the worker).
std::optional<LauncherBinding> launcher_binding(const LocalRank& place,
                                                const std::string& worker_command);

// Whether gpubind's SPANK plugin bound this process as this very local rank: a Slurm task of a
// step run with --gpu-bind-auto, with nothing more to divide.
bool already_bound_by_plugin(const EnvLookup& env, const LocalRank& place);

// The CPUs the plugin bound this task to (GPUBIND_CPUS) where `current` is wider than them: a
// container runtime that resets the CPU affinity (runc 1.2 and later put the task on its
// cgroup's CPUs) dropped the binding, and re-applying it restores it. nullopt where the task
// still runs on them, on fewer (its own choice, kept), or no CPUs were recorded.
std::optional<CpuSet> recorded_cpus_lost(const EnvLookup& env, const CpuSet& current);

}  // namespace gpubind::client
