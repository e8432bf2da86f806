// What every side of gpubind's socket agrees on: where it is, how large a request may be, and
// the bounds a request's values are checked against. The daemon, the plugin, the fallback
// library and the tools take them from here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpubind/model_limits.h"

namespace gpubind::protocol {

inline constexpr const char* kDefaultSocket = "/run/gpubind/gpubind.sock";
// The most a step launch waits for the daemon (plugstack timeout_ms default).
inline constexpr int kDefaultTimeoutMs = 1000;

// Hard limits on a Plan request, whichever protocol carries it (also in binder.proto).
inline constexpr uint32_t kMaxRequestBytes = 256 * 1024;
inline constexpr int kMaxGpus = 1024;
inline constexpr size_t kMaxTokenBytes = 128;
inline constexpr size_t kMaxCpuListBytes = 65536;
// The model's own bounds, checked on every side the same way.
using gpubind::kMaxSmt;
using gpubind::kMaxTasks;

}  // namespace gpubind::protocol
