#include "compact_server.h"

#include "gpubind/daemon/log.h"
#include "gpubind/protocol/compact.h"

namespace gpubind::daemon {
namespace {

std::string header(uint8_t status, size_t payload_bytes) {
  std::string out(compact::kAnswerHeaderBytes, '\0');
  out[0] = static_cast<char>(status);
  compact::put_length(out.data() + 1, static_cast<uint32_t>(payload_bytes));
  return out;
}

AnswerFrame frame(uint8_t status, const std::string& payload) {
  return {header(status, payload.size()) + payload, nullptr, {}};
}

// The plan's frame: its header, and the (possibly shared, megabytes long) answer by reference.
AnswerFrame plan_frame(const BinderService::Answer& answer) {
  return {header(compact::kStatusPlan, answer.size()), answer.bytes, answer.suffix()};
}

AnswerFrame error_frame(const Error& error) {
  return frame(error.node_mismatch ? compact::kStatusNodeMismatch : compact::kStatusRefused,
               error.message);
}

}  // namespace

AnswerFrame refusal_frame(const std::string& why) {
  return frame(compact::kStatusRefused, why);
}

HeaderVerdict check_header(const char* header) {
  const auto version = static_cast<uint8_t>(header[sizeof compact::kMagic]);
  if (version == compact::kFirstReleaseVersion) {
    // A plugin of the first release reads any answer as a refusal and would not fall back.
    return {HeaderVerdict::kCloseSilently, 0, {}};
  }
  if (version != compact::kVersion) {
    // An older or newer client: it falls back to planning in-process; the log says so now and
    // then, however many such clients there are.
    static log::RateLimited said(std::chrono::seconds(600));
    said.write(log::Level::kWarning, "a compact client speaks protocol version " +
                                         std::to_string(version) + ", this daemon " +
                                         std::to_string(compact::kVersion));
    return {HeaderVerdict::kAnswerNow, 0,
            frame(compact::kStatusUnsupportedVersion,
                  "this daemon speaks version " + std::to_string(compact::kVersion)),
            Metrics::Refusal::kVersion};
  }
  const uint32_t size = compact::get_length(header + sizeof compact::kMagic + 1);
  if (size > compact::kMaxRequestBytes) {
    return {HeaderVerdict::kAnswerNow, 0,
            frame(compact::kStatusRefused, "request of " + std::to_string(size) +
                                               " bytes exceeds the limit of " +
                                               std::to_string(compact::kMaxRequestBytes)),
            Metrics::Refusal::kTooLarge};
  }
  return {HeaderVerdict::kReadBody, size, {}};
}

CompactIntake take_in(std::string_view body, BinderService& service) {
  // A step's request is a few hundred bytes; larger ones are parsed on a worker.
  constexpr size_t kMaxInlineBytes = 4096;
  if (body.size() > kMaxInlineBytes) return {std::nullopt, std::string(body)};
  auto request = service.receive(body);
  if (!request) return {error_frame(request.error()), std::string()};
  if (auto cached = service.answer_from_cache(*request))
    return {plan_frame(*cached), std::string()};
  return {std::nullopt, std::move(request).value()};
}

AnswerFrame answer_frame(const CompactRequest& request, BinderService& service) {
  auto answer = [&service](const KeyedRequest& keyed) {
    auto planned = service.answer(keyed);
    return planned ? plan_frame(*planned) : error_frame(planned.error());
  };
  if (const auto* keyed = std::get_if<KeyedRequest>(&request)) return answer(*keyed);
  auto received = service.receive(std::get<std::string>(request));
  return received ? answer(*received) : error_frame(received.error());
}

}  // namespace gpubind::daemon
