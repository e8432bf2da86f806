// A step's plan request, built once and in one place for every client: the SPANK plugin reads
// the step from Slurm, gpubind-run from its launcher, and both hand the same shape to
// make_request. Pure: reads an environment lookup and the values given.
#pragma once

#include <cstdint>
#include <string>

#include "gpubind/client/flux_job.h"
#include "gpubind/client/options.h"
#include "gpubind/client/step_env.h"
#include "gpubind/client/types.h"
#include "gpubind/cpuset.h"
#include "gpubind/launcher.h"

namespace gpubind::client {

// What the launcher says of the step on this node, before its GPUs are read.
struct StepShape {
  uint64_t job_id = 0, step_id = 0;  // for the daemon's log only: plans do not depend on them
  int ntasks = 1;
  CpuSet cpus;                // the CPUs the tasks divide
  std::string allowed_cores;  // Slurm's S_STEP_ALLOC_CORES; "" where not known
  // The step's own choice of hardware threads per core (Slurm's --threads-per-core or
  // --hint=nomultithread); 0 where the launcher made none. The user's smt= flag wins over it.
  int threads_per_core = 0;
  // The program the tasks run first (their argv[0]); its base name goes into the request.
  std::string command;
};

// The request's shape and the user's flags; GPUs are left for the caller's rule.
StepRequest make_request(const StepShape& shape, const UserFlags& flags, const EnvLookup& env);

// A request with where its GPUs came from: `gpu_source` for --verbose, `warning` set when the
// GPUs could not all be placed on the node's.
struct BuiltRequest {
  StepRequest request;
  std::string gpu_source;
  std::string warning;
};

// A Slurm step on this node (the plugin in slurmstepd): GPUs, per-task counts and the thread
// choice from the step's environment; every GPU of the node only where the site says Slurm does
// not manage GPUs and Slurm indeed says nothing about them.
BuiltRequest slurm_step_request(StepShape shape, const EnvLookup& env, const UserFlags& flags,
                                const SiteArgs& site);

// The workers a launcher started on this node (gpubind-run): `place` gives their count, `cpus`
// the CPUs the launcher had (launcher_cpus); GPUs by worker_gpus's rules (`flux`: a Flux job's
// GPUs on this node, read by the caller); `command`: the program each worker runs.
BuiltRequest launcher_step_request(const LocalRank& place, const CpuSet& cpus, const EnvLookup& env,
                                   const UserFlags& flags, const std::string& command = "",
                                   const FluxJob& flux = {});

}  // namespace gpubind::client
