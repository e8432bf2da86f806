// The plugin's side of the compact protocol: one exchange, bounded by a deadline.
#pragma once

#include <string>

#include "gpubind/result.h"

namespace gpubind::compact {

// Sends `request` to the daemon at `socket_path` and returns its answer text. Fails, never
// blocking past `timeout_ms`, when the daemon is absent, stopped or slow; a request the daemon
// refuses fails with Error::invalid_input set.
Result<std::string> exchange(const std::string& socket_path, const std::string& request,
                             int timeout_ms);

}  // namespace gpubind::compact
