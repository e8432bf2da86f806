#include "compact_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_convert.h"
#include "binder_service.h"
#include "compact_protocol.h"
#include "log.h"
#include "step_convert.h"

namespace gpubind::daemon {
namespace {

bool read_exact(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = recv(fd, data, size, 0);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool write_exact(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void reply(int fd, uint8_t status, const std::string& text) {
  char header[5];
  header[0] = static_cast<char>(status);
  const uint32_t size = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i)
    header[1 + i] = static_cast<char>((size >> (8 * i)) & 0xff);
  if (!write_exact(fd, header, sizeof header) || !write_exact(fd, text.data(), text.size())) {
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
  if (auto status = service.answer(proto, response); !status) return status.error();
  return spank::encode(spank::to_step_plan(api::plan_from_proto(response), "daemon"));
}

}  // namespace

void serve_compact_connection(int fd, BinderService& service) {
  // Blocking I/O with timeouts: simpler than polling, bounded all the same.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const timeval timeout{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  char header[sizeof compact::kMagic + 4];
  if (read_exact(fd, header, sizeof header)) {
    uint32_t size = 0;
    for (int i = 0; i < 4; ++i) {
      size |= static_cast<uint32_t>(static_cast<unsigned char>(header[8 + i])) << (8 * i);
    }
    std::string text(size <= compact::kMaxRequestBytes ? size : 0, '\0');
    if (size > compact::kMaxRequestBytes) {
      reply(fd, compact::kStatusRefused,
            "request of " + std::to_string(size) + " bytes exceeds the limit of " +
                std::to_string(compact::kMaxRequestBytes));
    } else if (read_exact(fd, text.data(), size)) {
      auto result = answer(text, service);
      reply(fd, result ? compact::kStatusPlan : compact::kStatusRefused,
            result ? *result : result.error().message);
    }
  }
  close(fd);
}

}  // namespace gpubind::daemon
