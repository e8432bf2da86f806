#include "gpubind/daemon/fallback_spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "gpubind/daemon/log.h"
#include "gpubind/v1/binder.pb.h"

namespace gpubind::daemon {
namespace {

// The reason a report names ("REASON: ..."), as its index in kFallbackReasons; "other" when it
// names none of them.
size_t reason_of(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view word = text.substr(0, colon);
  for (size_t i = 0; i < protocol::kFallbackReasons.size(); ++i)
    if (colon != std::string_view::npos && word == protocol::kFallbackReasons[i]) return i;
  return protocol::kFallbackReasons.size() - 1;
}

void warn_once(const std::string& message) {
  static log::RateLimited said(std::chrono::seconds(600));
  said.write(log::Level::kWarning, message);
}

}  // namespace

void FallbackSpool::prepare() const {
  if (mkdir(folder_.c_str(), 0755) != 0 && errno != EEXIST) {
    log::info("fallback reports of launches are not counted: cannot create " + folder_ + ": " +
              std::strerror(errno));
  }
}

FallbackSpool::Counts FallbackSpool::absorb() {
  std::lock_guard<std::mutex> lock(mutex_);
  const int dir_fd = open(folder_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) return counts_;
  struct stat st {};
  if (fstat(dir_fd, &st) != 0 || (st.st_uid != geteuid() && st.st_uid != 0) ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    warn_once("fallback reports in " + folder_ +
              " are not counted: the folder must belong to root or the daemon's user and be "
              "writable by its owner only");
    close(dir_fd);
    return counts_;
  }
  DIR* dir = fdopendir(dir_fd);
  if (!dir) {
    close(dir_fd);
    return counts_;
  }
  size_t read = 0;
  while (read < kMaxPerCall) {
    const dirent* entry = readdir(dir);
    if (!entry) break;
    if (entry->d_name[0] == '.') continue;
    // Regular files only, never followed: a link is not a report.
    const int fd = openat(dir_fd, entry->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat file {};
    if (fstat(fd, &file) != 0 || !S_ISREG(file.st_mode)) {
      close(fd);
      continue;
    }
    char text[protocol::kMaxFallbackReportBytes];
    const ssize_t n = ::read(fd, text, sizeof text);
    close(fd);
    ++read;
    // Counted once removed, so that a report the daemon cannot remove is never counted twice.
    if (unlinkat(dir_fd, entry->d_name, 0) == 0)
      ++counts_[reason_of(std::string_view(text, n > 0 ? static_cast<size_t>(n) : 0))];
  }
  closedir(dir);
  return counts_;
}

void FallbackSpool::absorb_into(v1::GetStatusResponse& response) {
  const Counts counts = absorb();
  for (size_t i = 0; i < counts.size(); ++i) {
    v1::FallbackCount& count = *response.add_fallbacks();
    count.set_reason(std::string(protocol::kFallbackReasons[i]));
    count.set_count(counts[i]);
  }
}

}  // namespace gpubind::daemon
