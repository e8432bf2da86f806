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
inline constexpr const char* kJobId = "SLURM_JOB_ID";
inline constexpr const char* kStepId = "SLURM_STEP_ID";
// The job's GPUs (a step of none keeps them while its own list is unset).
inline constexpr const char* kJobGpus = "SLURM_JOB_GPUS";
// The step's shape as srun passed it: -c, --gpus-per-task (which implies --gpu-bind=per_task),
// --ntasks-per-gpu, --threads-per-core or --hint=nomultithread.
inline constexpr const char* kCpusPerTask = "SLURM_CPUS_PER_TASK";
inline constexpr const char* kGpusPerTask = "SLURM_GPUS_PER_TASK";
inline constexpr const char* kTasksPerGpu = "SLURM_NTASKS_PER_GPU";
inline constexpr const char* kThreadsPerCore = "SLURM_THREADS_PER_CORE";
// A heterogeneous job's component K has its job id in SLURM_JOB_ID_HET_GROUP_K (PACK_GROUP before
// Slurm 20.02); srun accepts at most this many components.
inline constexpr const char* kHetGroupPrefixes[] = {"SLURM_JOB_ID_HET_GROUP_",
                                                    "SLURM_JOB_ID_PACK_GROUP_"};
inline constexpr int kMaxHetComponents = 1024;
// What Slurm sets in a step with GPUs (besides the vendors' visibility variables): none of them
// set means Slurm says nothing about GPUs.
inline constexpr const char* kGpuCountVars[] = {"SLURM_STEP_GPUS",     "SLURM_JOB_GPUS",
                                                "SLURM_GPUS_ON_NODE",  "SLURM_GPUS",
                                                "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK"};

// A binding without the words that only set verbosity: "verbose,cores" -> "cores",
// "quiet" -> "", "gpu:verbose,map_gpu:1,0"'s GPU part "verbose,map_gpu:1,0" -> "map_gpu:1,0".
// A list (map_cpu:0,1) keeps its commas.
std::string without_verbosity(const std::string& value);

}  // namespace gpubind::slurm
