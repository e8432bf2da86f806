// Slurm's words, in one place: every SLURM_*/SLURMD_* variable the launch side reads to learn
// what Slurm or the user already fixed for a task, and how Slurm spells a binding. A Slurm
// release that changes one of them changes it here (docs/development.md).
#pragma once

#include <string>

namespace gpubind::slurm {

// The GPUs of the step, or of a task that Slurm gave GPUs of its own (node indices, or under
// ConstrainDevices the step's first ones: slurm_gpu_choice.h).
inline constexpr const char* kStepGpus = "SLURM_STEP_GPUS";
// The step's TRES binding, its GPU part "gpu:[verbose,]map_gpu:1,0" (slurmd, every release).
inline constexpr const char* kTresBind = "SLURMD_TRES_BIND";
// The CPU binding a task got: its kind ("mask_cpu:", "map_cpu:", "none", "rank", ...), its list
// for the _cpu kinds, the whole value as srun read it, and "verbose" when it was asked for.
inline constexpr const char* kCpuBindType = "SLURM_CPU_BIND_TYPE";
inline constexpr const char* kCpuBindList = "SLURM_CPU_BIND_LIST";
inline constexpr const char* kCpuBind = "SLURM_CPU_BIND";
inline constexpr const char* kCpuBindVerbose = "SLURM_CPU_BIND_VERBOSE";
inline constexpr const char* kMemBindType = "SLURM_MEM_BIND_TYPE";
inline constexpr const char* kMemBindList = "SLURM_MEM_BIND_LIST";
inline constexpr const char* kProcId = "SLURM_PROCID";

// A binding without the words that only set verbosity: "verbose,cores" -> "cores",
// "quiet" -> "", "gpu:verbose,map_gpu:1,0"'s GPU part "verbose,map_gpu:1,0" -> "map_gpu:1,0".
// A list (map_cpu:0,1) keeps its commas.
std::string without_verbosity(const std::string& value);

}  // namespace gpubind::slurm
