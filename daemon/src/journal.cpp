#include "gpubind/daemon/journal.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "gpubind/printable.h"

namespace gpubind::daemon {

std::string journal_fields(const std::vector<std::pair<std::string_view, std::string>>& fields) {
  std::string out;
  for (const auto& [key, value] : fields) {
    out += key;
    if (value.find('\n') == std::string::npos) {
      out += '=';
    } else {
      out += '\n';
      uint64_t size = value.size();
      for (int i = 0; i < 8; ++i, size >>= 8)
        out += static_cast<char>(size & 0xff);
    }
    out += value;
    out += '\n';
  }
  return out;
}

namespace {

// Reads a varint at `at`; false past the end or on a varint of more than ten bytes.
bool varint(std::string_view bytes, size_t& at, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && at < bytes.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(bytes[at++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

size_t count_warnings(std::string_view answer) {
  constexpr uint64_t kWarningsField = 2;
  size_t count = 0, at = 0;
  uint64_t tag = 0, value = 0;
  // Only the top level: every task (field 1) is skipped whole by its length.
  while (at < answer.size() && varint(answer, at, tag)) {
    switch (tag & 7) {
      case 0:
        if (!varint(answer, at, value)) return count;
        break;
      case 1:
        at += 8;
        break;
      case 2:
        if (!varint(answer, at, value) || value > answer.size() - at) return count;
        at += value;
        if ((tag >> 3) == kWarningsField) ++count;
        break;
      case 5:
        at += 4;
        break;
      default:
        return count;
    }
  }
  return count;
}

std::optional<std::string> Journal::socket_from_env() {
  if (const char* path = std::getenv("GPUBIND_JOURNAL_SOCKET"); path && *path) return path;
  if (std::getenv("JOURNAL_STREAM")) return "/run/systemd/journal/socket";
  return std::nullopt;
}

Journal::Journal(std::optional<std::string> socket) {
  if (!socket || socket->size() >= sizeof address_.sun_path) return;
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) return;
  address_.sun_family = AF_UNIX;
  std::memcpy(address_.sun_path, socket->data(), socket->size());
  address_size_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket->size() + 1);
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) hostname_ = name;
}

Journal::~Journal() {
  if (fd_ >= 0) close(fd_);
}

void Journal::plan(const PlanRecord& r) const {
  if (fd_ < 0) return;
  const std::string job = std::to_string(r.job_id), step = std::to_string(r.step_id);
  const std::string datagram = journal_fields({
      {"MESSAGE", printable("plan for job " + job + " step " + step + ": " +
                            std::to_string(r.tasks) + " tasks (" + std::string(r.source) + ", " +
                            std::to_string(r.warnings) + " warnings)")},
      {"PRIORITY", "6"},
      {"SYSLOG_IDENTIFIER", "gpubindd"},
      {"GPUBIND_JOB", job},
      {"GPUBIND_STEP", step},
      {"GPUBIND_NODE", hostname_},
      {"GPUBIND_SOURCE", std::string(r.source)},
      {"GPUBIND_TASKS", std::to_string(r.tasks)},
      {"GPUBIND_WARNINGS", std::to_string(r.warnings)},
  });
  // Dropped when the journal is gone or its queue is full: a plan never waits for logging.
  (void)sendto(fd_, datagram.data(), datagram.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
               reinterpret_cast<const sockaddr*>(&address_), address_size_);
}

}  // namespace gpubind::daemon
