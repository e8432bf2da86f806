#include "log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace gpubind::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::mutex g_mutex;

const char* name_of(Level level) {
  switch (level) {
    case Level::kError:
      return "error";
    case Level::kWarning:
      return "warning";
    case Level::kInfo:
      return "info";
    case Level::kDebug:
      return "debug";
  }
  return "info";
}

}  // namespace

void set_level(Level level) {
  g_level = static_cast<int>(level);
}

bool parse_level(const std::string& text, Level& level) {
  for (Level l : {Level::kError, Level::kWarning, Level::kInfo, Level::kDebug}) {
    if (text == name_of(l)) {
      level = l;
      return true;
    }
  }
  return false;
}

void write(Level level, const std::string& message) {
  if (static_cast<int>(level) > g_level) return;
  static const bool journal = std::getenv("JOURNAL_STREAM") != nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (journal) {
    std::fprintf(stderr, "<%d>%s\n", static_cast<int>(level), message.c_str());
  } else {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    std::fprintf(stderr, "%s gpubindd %s: %s\n", stamp, name_of(level), message.c_str());
  }
  std::fflush(stderr);
}

}  // namespace gpubind::log
