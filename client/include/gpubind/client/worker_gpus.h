// Which GPUs a worker started by a launcher may divide: those its visibility variable names, as
// the node knows them. Pure: reads an environment lookup.
#pragma once

#include <string>

#include "gpubind/client/step_env.h"
#include "gpubind/client/types.h"

namespace gpubind::client {

struct WorkerGpus {
  std::string how;      // where they came from, for --verbose
  std::string warning;  // set when they could not all be placed on the node's GPUs
};

// Fills `request`'s GPU fields (gpus_given, gpus or gpus_by_pci, unplaced_gpus) from `env`, by
// the first rule that applies:
//  1. no visibility variable: none in a Slurm job whose step has no GPU, else every GPU of the
//     node;
//  2. a task gpubind bound: the first visibility variable whose tokens gpubind recorded, by their
//     bus ids (GPUBIND_GPUS, GPUBIND_GPU_PCI);
//  3. a Slurm step: SLURM_STEP_GPUS beside the visibility list, position by position, where both
//     list the same number of GPUs; in a batch script or salloc shell, SLURM_JOB_GPUS so;
//  4. outside any Slurm job, numbers: the node's GPU numbers (no cgroup renumbering);
//  5. anything else (UUIDs, MIG instances, a list Slurm narrowed per task): handed out by token,
//     cores placed without their locality (with a warning, except for MIG instances).
WorkerGpus worker_gpus(const EnvLookup& env, StepRequest& request);

}  // namespace gpubind::client
