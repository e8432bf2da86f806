#include "compact_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "gpubind/protocol/compact.h"

namespace gpubind::compact {
namespace {

using Clock = std::chrono::steady_clock;

class Connection {
 public:
  Connection(const std::string& path, Clock::time_point deadline)
      : path_(path), deadline_(deadline) {}
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }

  Status open() {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ < 0) return fail("socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof addr.sun_path) return make_error(where() + ": path too long");
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return Ok{};
    if (errno != EINPROGRESS && errno != EAGAIN) return fail("daemon unavailable");
    if (auto ready = wait(POLLOUT); !ready) return ready;
    int error = 0;
    socklen_t len = sizeof error;
    getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      errno = error;
      return fail("daemon unavailable");
    }
    return Ok{};
  }

  Status send_all(const char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
      if (n > 0) {
        data += n;
        size -= static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (auto ready = wait(POLLOUT); !ready) return ready;
      } else {
        return fail("sending the request");
      }
    }
    return Ok{};
  }

  Status receive_all(char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = ::recv(fd_, data, size, 0);
      if (n > 0) {
        data += n;
        size -= static_cast<size_t>(n);
      } else if (n == 0) {
        return make_error(where() + ": daemon closed the connection");
      } else if (errno == EAGAIN || errno == EINTR) {
        if (auto ready = wait(POLLIN); !ready) return ready;
      } else {
        return fail("reading the answer");
      }
    }
    return Ok{};
  }

  std::string where() const { return "gpubindd at " + path_; }

 private:
  Status wait(short events) {
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0) return make_error(where() + ": daemon did not answer in time");
      pollfd pfd{fd_, events, 0};
      const int rc = poll(&pfd, 1, static_cast<int>(left));
      if (rc > 0) return Ok{};
      if (rc < 0 && errno != EINTR) return fail("poll");
    }
  }

  Error fail(const char* what) const {
    return make_error(where() + ": " + what + ": " + std::strerror(errno));
  }

  std::string path_;
  Clock::time_point deadline_;
  int fd_ = -1;
};

}  // namespace

Result<std::string> exchange(const std::string& socket_path, const std::string& request,
                             int timeout_ms) {
  if (request.size() > kMaxRequestBytes) return make_error("request too large");
  Connection conn(socket_path, Clock::now() + std::chrono::milliseconds(timeout_ms));
  if (auto status = conn.open(); !status) return status.error();
  std::string frame(kMagic, sizeof kMagic);
  char length[4];
  put_length(length, static_cast<uint32_t>(request.size()));
  frame.append(length, 4);
  frame += request;
  if (auto status = conn.send_all(frame.data(), frame.size()); !status) return status.error();
  char header[5];
  if (auto status = conn.receive_all(header, sizeof header); !status) return status.error();
  const uint32_t size = get_length(header + 1);
  if (size > kMaxAnswerBytes) return make_error(conn.where() + ": answer too large");
  std::string answer(size, '\0');
  if (auto status = conn.receive_all(answer.data(), size); !status) return status.error();
  if (static_cast<uint8_t>(header[0]) == kStatusPlan) return answer;
  Error refused = make_error(conn.where() + ": request refused: " + answer);
  refused.invalid_input = true;
  return refused;
}

}  // namespace gpubind::compact
