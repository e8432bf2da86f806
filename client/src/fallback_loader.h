// Planning in the calling process through libgpubind_stepd.so (stepd_abi.h), loaded only when it
// is needed: the plugin's fallback in slurmstepd and gpubind-run's, so that neither links hwloc
// nor protobuf, and a worker's start stays a small program's.
#pragma once

#include <string>

#include "gpubind/client/types.h"
#include "gpubind/result.h"

namespace gpubind::client {

// `encoded`: the request as encode_request writes it; `policy`: the policy file ("" = the
// site's); `topology`: an hwloc XML dump ("" = the policy's topology_file, else live discovery).
// The answer is decoded but not checked.
Result<StepPlan> plan_with_stepd_lib(const std::string& lib_path, const std::string& encoded,
                                     const std::string& policy, const std::string& topology = "");

}  // namespace gpubind::client
