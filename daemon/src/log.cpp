#include "gpubind/daemon/log.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>

#include "gpubind/printable.h"

namespace gpubind::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::mutex g_mutex;         // one line at a time; held only for non-blocking calls
uint64_t g_unreported = 0;  // dropped lines not yet mentioned in the log (g_mutex)

// A pipe's POLLOUT promises room for PIPE_BUF bytes; longer lines are cut to fit.
constexpr size_t kMaxLine = 4000;

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

// One line whatever `message` holds: what a client sent and a message quotes can neither end the
// line nor start a journal record of its own ("\n<0>...").
std::string format(Level level, const std::string& message) {
  static const bool journal = std::getenv("JOURNAL_STREAM") != nullptr;
  std::string line;
  if (journal) {
    line = "<" + std::to_string(static_cast<int>(level)) + ">" + printable(message);
  } else {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    line = std::string(stamp) + " gpubindd " + name_of(level) + ": " + printable(message);
  }
  if (line.size() > kMaxLine) {
    size_t end = kMaxLine;  // on a character boundary
    while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xc0) == 0x80)
      --end;
    line.resize(end);
  }
  line += '\n';
  return line;
}

// Writes `line` whole to stderr if that cannot block, else returns false.
bool write_now(const std::string& line) {
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  if (S_ISSOCK(st.st_mode)) {  // the journal's stream socket
    const ssize_t n = send(STDERR_FILENO, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    return n == static_cast<ssize_t>(line.size());
  }
  if (S_ISFIFO(st.st_mode)) {
    pollfd pfd{STDERR_FILENO, POLLOUT, 0};
    if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLOUT)) return false;
  }
  return ::write(STDERR_FILENO, line.data(), line.size()) == static_cast<ssize_t>(line.size());
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
  const std::string line = format(level, message);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_unreported > 0) {
    const std::string note =
        format(Level::kWarning, std::to_string(g_unreported) +
                                    " log lines were dropped: stderr could not take them");
    if (!write_now(note)) {
      ++g_unreported;
      return;
    }
    g_unreported = 0;
  }
  if (!write_now(line)) {
    ++g_unreported;
  }
}

void RateLimited::write(Level level, const std::string& message) {
  uint64_t held_back = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (said_ && now - last_ < period_) {
      ++held_back_;
      return;
    }
    said_ = true;
    last_ = now;
    held_back = held_back_;
    held_back_ = 0;
  }
  log::write(level, held_back == 0 ? message
                                   : message + " (and " + std::to_string(held_back) +
                                         " more like it in the last " +
                                         std::to_string(period_.count()) + " s)");
}

}  // namespace gpubind::log
