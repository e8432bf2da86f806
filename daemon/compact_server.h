// gpubindd's side of the compact plan protocol (gpubind/protocol/compact.h).
#pragma once

namespace gpubind::daemon {

class BinderService;

// Answers the one request on `fd` (whose first bytes are the protocol's magic) and closes it.
// The whole exchange must finish within two seconds: a stuck or trickling client cannot hold
// the worker.
void serve_compact_connection(int fd, BinderService& service);

}  // namespace gpubind::daemon
