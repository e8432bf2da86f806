// The daemon's Unix socket: opened by gpubindd itself or handed over by systemd (socket
// activation). Its connections are accepted by the Router (router.h) in both cases: gRPC 1.51
// cannot adopt a listening socket.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "gpubind/result.h"

namespace gpubind::daemon {

struct SocketOptions {
  std::string path;
  mode_t mode = 0666;          // jobs' tasks of every user connect
  std::optional<gid_t> group;  // with a group: chown to it (mode 0660 unless set)
};

// Creates the socket (and its directory), replacing a stale socket file but refusing to take over
// a socket another process still serves. Returns the listening fd.
Result<int> open_listener(const SocketOptions& options);

// The filesystem path a listening Unix socket is bound to ("" if it has none).
std::string socket_path_of(int fd);

// Checks that an inherited fd (socket activation) is a listening Unix stream socket.
Status check_inherited_listener(int fd);

}  // namespace gpubind::daemon
