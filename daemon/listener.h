// The daemon's Unix socket: opened by gpubindd itself or handed over by systemd (socket
// activation), and an accept loop that gives each connection to the gRPC server. gRPC 1.51
// cannot adopt a listening socket, so connections are accepted here for both cases alike.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>

#include "gpubind/result.h"

namespace grpc {
class Server;
}

namespace gpubind::daemon {

struct SocketOptions {
  std::string path;
  mode_t mode = 0666;          // jobs' tasks of every user connect
  std::optional<gid_t> group;  // with a group: chown to it (mode 0660 unless set)
};

// Creates the socket (and its directory), replacing a stale socket file but refusing to take over
// a socket another process still serves. Returns the listening fd.
Result<int> open_listener(const SocketOptions& options);

// Checks that an inherited fd (socket activation) is a listening Unix stream socket.
Status check_inherited_listener(int fd);

class Acceptor {
 public:
  Acceptor() = default;
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;
  ~Acceptor() { stop(); }

  Status start(int listen_fd, grpc::Server* server);
  void stop();  // stops accepting; established connections stay with the server

 private:
  void run();
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  grpc::Server* server_ = nullptr;
  std::thread thread_;
};

}  // namespace gpubind::daemon
