// gpubindd's side of the compact plan protocol (gpubind/protocol/compact.h): what a request's
// header asks for and the answer's bytes. No I/O: the router reads and writes the socket.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpubind::daemon {

class BinderService;

// What to do after a request's header (compact::kRequestHeaderBytes bytes).
struct HeaderVerdict {
  enum Kind {
    kReadBody,       // read `body_bytes` more, then answer
    kAnswerNow,      // send `answer` without reading further (version or size refused)
    kCloseSilently,  // a first-release plugin: closing unanswered makes it plan in-process
  } kind = kReadBody;
  uint32_t body_bytes = 0;
  std::string answer;
};

HeaderVerdict check_header(const char* header);

// The whole answer frame (status, length, payload) for one request's body: the same
// PlanRequest and PlanResponse as a gRPC call, answered from the cache or the planner. Runs on a
// planning worker.
std::string answer_frame(const std::string& body, BinderService& service);

// The answer frame for a request the cache already answers; nullopt when it must be planned (or
// is too large to look up outside a worker). Runs on the router's thread.
std::optional<std::string> cached_answer_frame(const std::string& body, BinderService& service);

}  // namespace gpubind::daemon
