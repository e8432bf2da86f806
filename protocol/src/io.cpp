#include "gpubind/protocol/io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace gpubind::protocol {
namespace {

Error errno_error(const char* what) {
  return make_error(std::string(what) + ": " + std::strerror(errno));
}

// Waits until `fd` is ready for `events`; fails once the deadline has passed.
Status wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    // Rounded up: "nothing left" means the deadline has passed, as callers check.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return make_error("no answer in time");
    pollfd pfd{fd, events, 0};
    const int rc = poll(&pfd, 1, static_cast<int>(left));
    if (rc > 0) return Ok{};
    if (rc < 0 && errno != EINTR) return errno_error("poll");
  }
}

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

Result<int> connect_unix(const std::string& path, Clock::time_point deadline, int* connect_errno) {
  if (connect_errno) *connect_errno = 0;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return make_error(path + ": path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_error("socket");
  UniqueFd owner(fd);
  // A Unix socket connects at once unless the listener's queue is full (a burst of launches, or
  // someone flooding the socket). A blocking connect then waits in the kernel's line for room,
  // bounded by the send timeout; a non-blocking one would only be told EAGAIN and have to guess
  // when to try again, losing every race to a client that tries without pause.
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  if (left.count() <= 0) return make_error("connect: no time left");
  const timeval wait{static_cast<time_t>(left.count() / 1000000),
                     static_cast<suseconds_t>(left.count() % 1000000)};
  if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait) != 0)
    return errno_error("setsockopt");
  int result;
  do {
    result = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (result != 0 && errno == EINTR && Clock::now() < deadline);
  if (result != 0) {
    if (connect_errno) *connect_errno = errno;
    return errno_error("connect");
  }
  // Everything after the connection is non-blocking, bounded by the deadline.
  const timeval none{0, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno_error("fcntl");
  return owner.release();
}

Status send_all(int fd, const char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (auto ready = wait_ready(fd, POLLOUT, deadline); !ready) return ready;
    } else {
      return errno_error("send");
    }
  }
  return Ok{};
}

Status receive_all(int fd, char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    const ssize_t n = recv(fd, data, size, MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n == 0) {
      return make_error("connection closed");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (auto ready = wait_ready(fd, POLLIN, deadline); !ready) return ready;
    } else {
      return errno_error("recv");
    }
  }
  return Ok{};
}

}  // namespace gpubind::protocol
