#include "gpubind/protocol/client.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>

#include "gpubind/protocol/compact.h"
#include "gpubind/protocol/io.h"

namespace gpubind::protocol {
namespace {

bool trusted_uid(uid_t uid, const TrustedServer& trust) {
  return uid == 0 || (trust.daemon_uid && uid == *trust.daemon_uid);
}

std::string who_may(const TrustedServer& trust) {
  return trust.daemon_uid ? "root or uid " + std::to_string(*trust.daemon_uid) : "root";
}

Error untrusted(const std::string& socket_path, const std::string& what) {
  Error error = make_error("gpubindd at " + socket_path + ": not trusted: " + what);
  error.untrusted = true;
  return error;
}

// The process listening on the connected socket `fd`.
Status check_peer(int fd, const std::string& socket_path, const TrustedServer& trust) {
  if (!trust.check) return Ok{};
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0)
    return untrusted(socket_path,
                     std::string("cannot tell who serves it: ") + std::strerror(errno));
  if (peer.pid == 0)
    return make_error("gpubindd at " + socket_path + ": daemon unavailable: not connected");
  if (!trusted_uid(peer.uid, trust)) {
    return untrusted(socket_path, "served by uid " + std::to_string(peer.uid) + " (pid " +
                                      std::to_string(peer.pid) + "), not " + who_may(trust));
  }
  return Ok{};
}

// The retry pauses while a daemon may be restarting: short against systemd's RestartSec (100 ms)
// and a launch's deadline (1 s by default), long enough not to spin.
constexpr auto kFirstRetryPause = std::chrono::milliseconds(20);
constexpr auto kLongestRetryPause = std::chrono::milliseconds(100);
constexpr auto kShortestRetryPause = std::chrono::milliseconds(1);

std::string framed(const std::string& request) {
  std::string frame(compact::kMagic, sizeof compact::kMagic);
  frame += static_cast<char>(compact::kVersion);
  char length[4];
  compact::put_length(length, static_cast<uint32_t>(request.size()));
  frame.append(length, 4);
  frame += request;
  return frame;
}

// What the daemon's answer says, by its status.
Result<std::string> read_answer(const std::string& where, uint8_t status, std::string answer) {
  switch (status) {
    case compact::kStatusPlan:
      return answer;
    case compact::kStatusRefused: {
      Error refused = make_error(where + ": request refused: " + answer);
      refused.invalid_input = true;
      return refused;
    }
    case compact::kStatusNodeMismatch: {
      Error mismatch =
          make_error(where + ": the step does not fit the daemon's topology: " + answer);
      mismatch.node_mismatch = true;
      return mismatch;
    }
    case compact::kStatusUnsupportedVersion:
      return make_error(where + ": speaks another protocol version (" + answer + ")");
    default:
      return make_error(where + ": unknown answer status " + std::to_string(status));
  }
}

// One try, and whether its failure is one a restarting daemon explains.
struct Attempt {
  Result<std::string> answer;
  bool daemon_gone = false;
  bool timed_out = false;  // the deadline came first
};

Attempt try_exchange(const std::string& socket_path, const std::string& frame,
                     Clock::time_point deadline, const TrustedServer& trust) {
  const std::string where = "gpubindd at " + socket_path;
  const auto too_late = [&] { return make_error(where + ": daemon did not answer in time"); };
  // Checked at every try: a daemon that binds its own socket makes a new one each time it starts.
  if (auto trusted = check_socket_path(socket_path, trust); !trusted) return {trusted.error()};
  int connect_errno = 0;
  auto fd = connect_unix(socket_path, deadline, &connect_errno);
  if (!fd) {
    if (Clock::now() >= deadline) return {too_late(), false, true};
    return {make_error(where + ": daemon unavailable: " + fd.error().message),
            // A socket file nobody listens on is a daemon that died and is coming back; no
            // socket file at all is a node without one (socket activation keeps the file
            // through restarts): waiting would only delay every launch there.
            connect_errno == ECONNREFUSED};
  }
  const UniqueFd conn(*fd);
  if (auto trusted = check_peer(conn.get(), socket_path, trust); !trusted)
    return {trusted.error(), !trusted.error().untrusted};

  // Before the deadline, a Unix socket's send or receive fails only when the daemon closed the
  // connection (EOF, EPIPE, ECONNRESET): it died or dropped it without answering.
  const auto failed = [&](const char* doing, const Error& error) -> Attempt {
    if (Clock::now() >= deadline) return {too_late(), false, true};
    return {make_error(where + ": " + doing + ": " + error.message), true};
  };
  if (auto sent = send_all(conn.get(), frame.data(), frame.size(), deadline); !sent)
    return failed("sending the request", sent.error());
  char header[compact::kAnswerHeaderBytes];
  if (auto got = receive_all(conn.get(), header, sizeof header, deadline); !got)
    return failed("reading the answer", got.error());
  const uint32_t size = compact::get_length(header + 1);
  if (size > compact::kMaxAnswerBytes) return {make_error(where + ": answer too large")};
  std::string answer(size, '\0');
  if (auto got = receive_all(conn.get(), answer.data(), size, deadline); !got)
    return failed("reading the answer", got.error());
  return {read_answer(where, static_cast<uint8_t>(header[0]), std::move(answer))};
}

// The last try's failure; after several, with how many there were and how long they took.
Error after_tries(Error last, int tries, Clock::time_point start) {
  if (tries == 1 || last.invalid_input || last.node_mismatch || last.untrusted) return last;
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  last.message += " (" + std::to_string(tries) + " tries in " + std::to_string(waited) + " ms)";
  return last;
}

}  // namespace

Status check_socket_path(const std::string& socket_path, const TrustedServer& trust) {
  if (!trust.check) return Ok{};
  struct stat socket_stat {};
  if (lstat(socket_path.c_str(), &socket_stat) != 0) return Ok{};  // absent: connect says so
  if (!S_ISSOCK(socket_stat.st_mode)) return untrusted(socket_path, "not a socket");
  if (!trusted_uid(socket_stat.st_uid, trust)) {
    return untrusted(socket_path, "the socket belongs to uid " +
                                      std::to_string(socket_stat.st_uid) + ", not " +
                                      who_may(trust));
  }
  const size_t slash = socket_path.rfind('/');
  const std::string folder = slash == std::string::npos ? "."
                             : slash == 0               ? "/"
                                                        : socket_path.substr(0, slash);
  struct stat folder_stat {};
  if (stat(folder.c_str(), &folder_stat) != 0)
    return untrusted(socket_path, folder + ": " + std::strerror(errno));
  if (!trusted_uid(folder_stat.st_uid, trust)) {
    return untrusted(socket_path, "its folder " + folder + " belongs to uid " +
                                      std::to_string(folder_stat.st_uid) + ", not " +
                                      who_may(trust));
  }
  if ((folder_stat.st_mode & S_IWGRP) && folder_stat.st_gid != 0) {
    return untrusted(socket_path, "its folder " + folder + " is writable by group " +
                                      std::to_string(folder_stat.st_gid));
  }
  if (folder_stat.st_mode & S_IWOTH) {
    return untrusted(socket_path, "its folder " + folder +
                                      " is writable by every user (anyone could put a socket "
                                      "of their own there)");
  }
  return Ok{};
}

Result<std::string> exchange(const std::string& socket_path, const std::string& request,
                             int timeout_ms, const TrustedServer& trust, DaemonGone when_gone) {
  if (request.size() > compact::kMaxRequestBytes)
    return make_error("gpubindd at " + socket_path + ": request too large");
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  const std::string frame = framed(request);
  auto pause = kFirstRetryPause;
  std::optional<Error> gone;  // why the daemon was last found gone
  for (int tries = 1;; ++tries) {
    Attempt attempt = try_exchange(socket_path, frame, deadline, trust);
    if (attempt.answer) return std::move(attempt.answer);
    const bool retry = attempt.daemon_gone && when_gone == DaemonGone::kRetryInTime;
    if (attempt.daemon_gone) gone = attempt.answer.error();
    // At most half of what is left, so that the last try still has time to be answered.
    const auto wait = std::min<Clock::duration>(pause, (deadline - Clock::now()) / 2);
    if (!retry || wait < kShortestRetryPause) {
      // A retry the deadline cut short says nothing of the daemon: why it was gone before does.
      const Error& why = attempt.timed_out && gone ? *gone : attempt.answer.error();
      return after_tries(why, tries, start);
    }
    std::this_thread::sleep_for(wait);
    pause = std::min(pause * 2, kLongestRetryPause);
  }
}

Result<StepPlan> ask_daemon(const std::string& socket_path, const StepRequest& request,
                            int timeout_ms, const TrustedServer& trust, DaemonGone when_gone) {
  auto bytes = encode_request(request);
  if (!bytes) {
    Error error = bytes.error();
    error.invalid_input = true;
    return error;
  }
  return ask_daemon_encoded(socket_path, *bytes, timeout_ms, trust, when_gone);
}

Result<StepPlan> ask_daemon_encoded(const std::string& socket_path, const std::string& encoded,
                                    int timeout_ms, const TrustedServer& trust,
                                    DaemonGone when_gone) {
  auto answer = exchange(socket_path, encoded, timeout_ms, trust, when_gone);
  if (!answer) return answer.error();
  return decode_plan(*answer);
}

}  // namespace gpubind::protocol
