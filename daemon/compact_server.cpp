#include "compact_server.h"

#include <unistd.h>

#include <atomic>
#include <chrono>

#include "binder_service.h"
#include "gpubind/protocol/compact.h"
#include "gpubind/protocol/io.h"
#include "log.h"

namespace gpubind::daemon {
namespace {

using protocol::Clock;

// A whole exchange must fit in this: a client trickling bytes cannot hold a worker longer.
constexpr auto kExchangeDeadline = std::chrono::seconds(2);

void reply(int fd, uint8_t status, const std::string& payload, Clock::time_point deadline) {
  char header[compact::kAnswerHeaderBytes];
  header[0] = static_cast<char>(status);
  compact::put_length(header + 1, static_cast<uint32_t>(payload.size()));
  if (!protocol::send_all(fd, header, sizeof header, deadline) ||
      !protocol::send_all(fd, payload.data(), payload.size(), deadline)) {
    log::debug("compact client went away before its answer");
  }
}

// The answer's bytes for one request's, or why it is refused. The same PlanRequest and
// PlanResponse as a gRPC call: parsed, answered (cache or planner), serialized.
Result<std::string> answer(const std::string& bytes, BinderService& service) {
  v1::PlanRequest request;
  if (!request.ParseFromString(bytes)) return make_error("not a gpubind.v1.PlanRequest");
  return service.answer(request);
}

}  // namespace

void serve_compact_connection(int fd, BinderService& service) {
  const protocol::UniqueFd conn(fd);
  const auto deadline = Clock::now() + kExchangeDeadline;
  char header[compact::kRequestHeaderBytes];
  if (!protocol::receive_all(fd, header, sizeof header, deadline)) return;
  const auto version = static_cast<uint8_t>(header[sizeof compact::kMagic]);
  if (version == compact::kFirstReleaseVersion) {
    // A plugin of the first release reads any answer as a refusal and would not fall back; a
    // connection closed without one makes it plan in-process.
    return;
  }
  if (version != compact::kVersion) {
    // An older or newer client: it falls back to planning in-process, and the log says so once.
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      log::warning("compact client speaks protocol version " + std::to_string(version) +
                   ", this daemon " + std::to_string(compact::kVersion));
    reply(fd, compact::kStatusUnsupportedVersion,
          "this daemon speaks version " + std::to_string(compact::kVersion), deadline);
    return;
  }
  const uint32_t size = compact::get_length(header + sizeof compact::kMagic + 1);
  if (size > compact::kMaxRequestBytes) {
    reply(fd, compact::kStatusRefused,
          "request of " + std::to_string(size) + " bytes exceeds the limit of " +
              std::to_string(compact::kMaxRequestBytes),
          deadline);
    return;
  }
  std::string bytes(size, '\0');
  if (!protocol::receive_all(fd, bytes.data(), size, deadline)) return;
  auto result = answer(bytes, service);
  reply(fd, result ? compact::kStatusPlan : compact::kStatusRefused,
        result ? *result : result.error().message, deadline);
}

}  // namespace gpubind::daemon
