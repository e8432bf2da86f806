// Which GPUs a worker started by a launcher may divide: those its visibility variable names, as
// the node knows them. Pure: reads an environment lookup.
#pragma once

#include <string>

#include "gpubind/client/flux_job.h"
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
//  4. a Flux job under resource containment (`flux`): numbers are positions among this node's
//     GPUs in the job's R, mapped through it (a warning where R could not be read);
//  5. outside any Slurm job, numbers: the node's GPU numbers (no cgroup renumbering; a Flux job
//     without containment writes R's ids, which are the node's);
//  6. anything else (UUIDs, MIG instances, a list Slurm narrowed per task): handed out by token,
//     the planner placing UUIDs and MIG instances on the node's GPUs (a warning for the rest).
WorkerGpus worker_gpus(const EnvLookup& env, StepRequest& request, const FluxJob& flux = {});

}  // namespace gpubind::client
