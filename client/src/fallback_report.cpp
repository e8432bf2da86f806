#include "gpubind/client/fallback_report.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "gpubind/printable.h"
#include "gpubind/protocol/fallback_reports.h"

namespace gpubind::client {

std::string_view fallback_reason(const Error& failed) {
  if (failed.untrusted) return "untrusted";
  if (failed.node_mismatch) return "node_mismatch";
  // The transport's own words (protocol/src/client.cpp).
  const std::string& m = failed.message;
  if (m.find("did not answer in time") != std::string::npos) return "timeout";
  if (m.find("daemon unavailable") != std::string::npos) return "unavailable";
  if (m.find("request refused") != std::string::npos) return "refused";
  if (m.find("another protocol version") != std::string::npos) return "version";
  return "other";
}

namespace {

uint64_t random_tag() {
  uint64_t tag = 0;
  if (getrandom(&tag, sizeof tag, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof tag)) return tag;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace

bool leave_fallback_report(const std::string& spool, std::optional<uid_t> daemon_uid,
                           uint64_t job_id, uint64_t step_id, std::string_view reason,
                           std::string_view message) noexcept {
  try {
    const int dir = open(spool.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) return false;
    struct stat st {};
    const bool trusted = fstat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
                         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0 &&
                         (st.st_uid == 0 || (daemon_uid && st.st_uid == *daemon_uid));
    bool left = false;
    if (trusted) {
      std::string line = std::string(reason) + ": " + printable(message);
      if (line.size() >= protocol::kMaxFallbackReportBytes)
        line.resize(protocol::kMaxFallbackReportBytes - 1);
      line += '\n';
      char name[96];
      std::snprintf(name, sizeof name, "%llu.%llu.%d.%016llx",
                    static_cast<unsigned long long>(job_id),
                    static_cast<unsigned long long>(step_id), static_cast<int>(getpid()),
                    static_cast<unsigned long long>(random_tag()));
      const int fd = openat(
          dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
      if (fd >= 0) {
        // Whatever the launching process's umask, the daemon's user must read it.
        (void)fchmod(fd, 0644);
        left = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
        close(fd);
      }
    }
    close(dir);
    return left;
  } catch (...) {  // std::bad_alloc: a report is never worth a launch
    return false;
  }
}

}  // namespace gpubind::client
