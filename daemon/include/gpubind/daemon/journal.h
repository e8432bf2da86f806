// Structured plan records for the systemd journal, so that `journalctl GPUBIND_JOB=123` finds a
// job's binding. Sent in the journal's native protocol (KEY=VALUE fields in one datagram to its
// AF_UNIX socket) without libsystemd: one non-blocking sendto per plan, dropped silently when
// the journal is absent or full.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpubind::daemon {

// Fields in the native protocol: "KEY=VALUE\n", or, for a value holding a newline, "KEY\n", its
// length as 64-bit little endian, the value and "\n".
std::string journal_fields(const std::vector<std::pair<std::string_view, std::string>>& fields);

// How many warnings a serialized gpubind.v1.PlanResponse holds (field 2), without parsing it.
size_t count_warnings(std::string_view answer);

class Journal {
 public:
  // $GPUBIND_JOURNAL_SOCKET (tests), else the journal's socket when stderr is the journal's
  // (JOURNAL_STREAM set, as under systemd), else none.
  static std::optional<std::string> socket_from_env();

  explicit Journal(std::optional<std::string> socket);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  bool enabled() const { return fd_ >= 0; }

  struct PlanRecord {
    uint64_t job_id = 0, step_id = 0;
    uint32_t tasks = 0;
    std::string_view source;  // "cache" or "worker"
    size_t warnings = 0;
  };
  void plan(const PlanRecord& record) const;

 private:
  int fd_ = -1;
  sockaddr_un address_{};
  socklen_t address_size_ = 0;
  std::string hostname_;
};

}  // namespace gpubind::daemon
