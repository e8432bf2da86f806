#include "gpubind/protocol/io.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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

Result<int> connect_unix(const std::string& path, Clock::time_point deadline) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return make_error(path + ": path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return errno_error("socket");
  UniqueFd owner(fd);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    // EAGAIN: the listener's queue is full; the socket is not connected, and there is nothing
    // to wait for. Unix sockets connect at once otherwise.
    if (errno != EINPROGRESS) return errno_error("connect");
    if (auto ready = wait_ready(fd, POLLOUT, deadline); !ready) return ready.error();
    int error = 0;
    socklen_t len = sizeof error;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      errno = error;
      return errno_error("connect");
    }
  }
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
