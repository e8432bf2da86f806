// Bounds on the model's values that every input is checked against, whichever way it comes in
// (a policy file, a request over either protocol, gpubindctl's flags). The protocol's limits
// take these from here, beside the wire's own limits.
#pragma once

namespace gpubind {

// Tasks per node and request: far above any node, bounds the work per request.
inline constexpr int kMaxTasks = 4096;
// Hardware threads per core a request or policy may name (smt); no CPU has more.
inline constexpr int kMaxSmt = 64;

}  // namespace gpubind
