// Socket I/O bounded by a deadline: every wait on gpubind's socket, on either side, ends by the
// deadline whatever the peer does (stops, trickles bytes, never reads). One place for the loops.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "gpubind/result.h"

namespace gpubind::protocol {

using Clock = std::chrono::steady_clock;

// Connects to the Unix socket at `path` (the fd is non-blocking and close-on-exec); the caller
// closes it. Errors name the path. Where `connect_errno` is given, it gets connect()'s errno
// when connect() itself failed (ENOENT, ECONNREFUSED...), else 0.
Result<int> connect_unix(const std::string& path, Clock::time_point deadline,
                         int* connect_errno = nullptr);

// Writes all of `data`; fails when the peer goes away or the deadline passes.
Status send_all(int fd, const char* data, size_t size, Clock::time_point deadline);

// Reads exactly `size` bytes; fails on end of stream, an error or the deadline.
Status receive_all(int fd, char* data, size_t size, Clock::time_point deadline);

// An fd closed when it goes out of scope.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace gpubind::protocol
