#include "watchdog.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <chrono>

#include "gpubind/daemon/log.h"
#include "gpubind/protocol/client.h"
#include "gpubind/protocol/limits.h"
#include "gpubind/v1/binder.pb.h"

namespace gpubind::daemon {

void Watchdog::start() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return;
  const auto period = std::chrono::microseconds(usec / 2);
  // The probe must be answered well inside the period, but never needs more than the
  // plugin's own deadline twice over.
  const int timeout_ms = static_cast<int>(
      std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(period).count() / 2,
                          50, 2 * protocol::kDefaultTimeoutMs));
  thread_ = std::thread([this, period, timeout_ms] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      lock.unlock();
      const bool answered = healthy(timeout_ms);
      lock.lock();
      if (answered) sd_notify(0, "WATCHDOG=1");
      wake_.wait_for(lock, period, [this] { return stopping_; });
    }
  });
  log::info("watchdog enabled: a plan through " + socket_path_ + " every " +
            std::to_string(usec / 2000) + " ms");
}

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Watchdog::healthy(int timeout_ms) const {
  v1::PlanRequest probe;
  probe.set_ntasks(1);
  probe.set_bypass_cache(true);  // the planner too, not only the cache
  protocol::TrustedServer itself;
  itself.check = false;
  auto answer = protocol::exchange(socket_path_, probe.SerializeAsString(), timeout_ms, itself);
  if (!answer) {
    static log::RateLimited said;
    said.write(log::Level::kError,
               "watchdog probe through " + socket_path_ + " failed: " + answer.error().message);
  }
  return answer.ok();
}

}  // namespace gpubind::daemon
