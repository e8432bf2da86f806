// systemd's watchdog, fed only while the daemon answers a plan through its own socket.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace gpubind::daemon {

// Pings the systemd watchdog while the daemon answers a plan through its own socket: connect,
// classification, a worker and the answer, so a wedged router or stuck workers stop the pings
// and systemd restarts the daemon.
class Watchdog {
 public:
  explicit Watchdog(std::string socket_path) : socket_path_(std::move(socket_path)) {}
  ~Watchdog() { stop(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void start();  // does nothing unless systemd enabled the watchdog
  void stop();

 private:
  bool healthy(int timeout_ms) const;

  const std::string socket_path_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gpubind::daemon
