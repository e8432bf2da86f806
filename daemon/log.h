// Levelled logging to stderr. Under systemd (JOURNAL_STREAM set) lines carry the "<N>" priority
// prefix the journal understands; otherwise a timestamp and the level name.
#pragma once

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

}  // namespace gpubind::log
