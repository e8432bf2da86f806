// The daemon's Unix socket: opened by gpubindd itself or handed over by systemd (socket
// activation), and an accept loop that gives each connection to the gRPC server. gRPC 1.51
// cannot adopt a listening socket, so connections are accepted here for both cases alike.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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

// Accepts connections and routes each by its first bytes: the compact plan protocol's magic
// goes to `compact` (run on one of a few workers), anything else (gRPC's HTTP/2 preface) to the
// gRPC server.
class Acceptor {
 public:
  using CompactHandler = std::function<void(int fd)>;
  static constexpr int kWorkers = 4;
  static constexpr size_t kMaxPending = 256;
  static constexpr int kClassifyTimeoutMs = 1000;

  Acceptor() = default;
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;
  ~Acceptor() { stop(); }

  Status start(int listen_fd, grpc::Server* server, CompactHandler compact);
  void stop();  // stops accepting; established gRPC connections stay with the server

 private:
  void accept_loop();
  void worker_loop();
  void route(int fd);

  int listen_fd_ = -1;
  int wake_fd_ = -1;
  grpc::Server* server_ = nullptr;
  CompactHandler compact_;
  std::thread acceptor_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<int> pending_;
  bool stopping_ = false;
};

}  // namespace gpubind::daemon
