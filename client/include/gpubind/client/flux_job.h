// A Flux job's GPUs on this node, for a launcher's workers (gpubind-run) under Flux. Flux's
// gpu-affinity shell plugin writes ids from the job's resource set R (node GPU ids: flux-core's
// rhwloc numbers a node's compute GPUs in hwloc order, gpubind's node order) into
// CUDA_VISIBLE_DEVICES; under resource containment (FLUX_EXEC_CONSTRAINED_RESOURCES, flux-core
// 0.89) it writes each GPU's position among this node's allocated GPUs instead, which only the
// job's R maps back to node GPUs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpubind/client/step_env.h"
#include "gpubind/result.h"

namespace gpubind::client {

struct FluxJob {
  bool constrained = false;              // positions, not node ids, in CUDA_VISIBLE_DEVICES
  std::optional<std::vector<int>> gpus;  // this node's GPUs in R, ascending, when read
  std::string error;                     // why they could not be read
};

// Whether `env` is a Flux job task whose GPU numbers are positions (constrained resources).
bool flux_constrained(const EnvLookup& env);

// The GPU ids R (version 1, "execution.R_lite") gives the broker rank `rank`, ascending; an error
// naming the fault for text that is not such an R or has no entry for the rank.
Result<std::vector<int>> flux_rank_gpus(std::string_view r_json, int rank);

}  // namespace gpubind::client
