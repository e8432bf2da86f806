#include "compact_server.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "api_convert.h"
#include "binder_service.h"
#include "gpubind/protocol/compact.h"
#include "log.h"
#include "step_convert.h"

namespace gpubind::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// A whole exchange must fit in this: a client trickling bytes cannot hold a worker longer.
constexpr auto kExchangeDeadline = std::chrono::seconds(2);

// Waits until `fd` is ready for `events` or the deadline passes.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd pfd{fd, events, 0};
    const int rc = poll(&pfd, 1, static_cast<int>(left));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

bool read_exact(int fd, char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    const ssize_t n = recv(fd, data, size, MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR) || !wait_ready(fd, POLLIN, deadline)) {
      return false;
    }
  }
  return true;
}

bool write_exact(int fd, const char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR) ||
               !wait_ready(fd, POLLOUT, deadline)) {
      return false;
    }
  }
  return true;
}

void reply(int fd, uint8_t status, const std::string& text, Clock::time_point deadline) {
  char header[5];
  header[0] = static_cast<char>(status);
  compact::put_length(header + 1, static_cast<uint32_t>(text.size()));
  if (!write_exact(fd, header, sizeof header, deadline) ||
      !write_exact(fd, text.data(), text.size(), deadline)) {
    log::debug("compact client went away before its answer");
  }
}

// The answer text for one request, or why it is refused.
Result<std::string> answer(const std::string& text, BinderService& service) {
  auto step = spank::decode_request(text);
  if (!step) return step.error();
  auto request = spank::to_plan_request(*step);
  if (!request) return request.error();
  v1::PlanRequest proto = api::request_to_proto(*request);
  proto.set_job_id(step->job_id);
  proto.set_step_id(step->step_id);
  v1::PlanResponse response;
  const StatePtr state = service.state();
  if (auto status = service.answer(proto, response); !status) return status.error();
  // The localities are named from the topology the plan was made on (none across a reload).
  const Topology* topology = response.topology_generation() == state->topology_generation
                                 ? &state->node.topology
                                 : nullptr;
  return spank::encode(spank::to_step_plan(api::plan_from_proto(response), "daemon", topology));
}

}  // namespace

void serve_compact_connection(int fd, BinderService& service) {
  const auto deadline = Clock::now() + kExchangeDeadline;
  char header[sizeof compact::kMagic + 4];
  if (read_exact(fd, header, sizeof header, deadline)) {
    const uint32_t size = compact::get_length(header + sizeof compact::kMagic);
    if (size > compact::kMaxRequestBytes) {
      reply(fd, compact::kStatusRefused,
            "request of " + std::to_string(size) + " bytes exceeds the limit of " +
                std::to_string(compact::kMaxRequestBytes),
            deadline);
    } else {
      std::string text(size, '\0');
      if (read_exact(fd, text.data(), size, deadline)) {
        auto result = answer(text, service);
        reply(fd, result ? compact::kStatusPlan : compact::kStatusRefused,
              result ? *result : result.error().message, deadline);
      }
    }
  }
  close(fd);
}

}  // namespace gpubind::daemon
