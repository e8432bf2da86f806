// Levelled logging to stderr that never blocks the caller. Under systemd (JOURNAL_STREAM set)
// lines carry the "<N>" priority prefix the journal understands; otherwise a timestamp and the
// level name. A line that cannot be written at once (a full pipe nobody reads, a journal that
// lags) is dropped and counted, and the next line written says how many were lost: serving
// plans always comes before logging about it.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace gpubind::log {

enum class Level { kError = 3, kWarning = 4, kInfo = 6, kDebug = 7 };

void set_level(Level level);
bool parse_level(const std::string& text, Level& level);  // "error", "warning", "info", "debug"
void write(Level level, const std::string& message);

inline void error(const std::string& m) {
  write(Level::kError, m);
}
inline void warning(const std::string& m) {
  write(Level::kWarning, m);
}
inline void info(const std::string& m) {
  write(Level::kInfo, m);
}
inline void debug(const std::string& m) {
  write(Level::kDebug, m);
}

// One kind of message that may repeat without bound (a client misbehaving, once per
// connection): written at most once per period, with the count of those held back since.
class RateLimited {
 public:
  explicit RateLimited(std::chrono::seconds period = std::chrono::seconds(10)) : period_(period) {}
  void write(Level level, const std::string& message);

 private:
  const std::chrono::seconds period_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point last_{};
  bool said_ = false;
  uint64_t held_back_ = 0;
};

}  // namespace gpubind::log
