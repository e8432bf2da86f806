// Planning a request in the calling process, on this node's topology (or a dump) and the site's
// policy: the bytes in and out are the daemon's (PlanRequest, PlanResponse), through the same
// conversions, so a client treats both answers alike. The fallback library and gpubind-run use
// it when the daemon cannot answer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "gpubind/result.h"

namespace gpubind::fallback {

// `policy`: the policy file (nullopt: the site's where it exists); `topology`: an hwloc XML dump
// (nullopt: the policy's topology_file, else live discovery). The error names the fault.
Result<std::string> plan_here(const void* request, size_t size,
                              const std::optional<std::string>& policy,
                              const std::optional<std::string>& topology = std::nullopt);

}  // namespace gpubind::fallback
