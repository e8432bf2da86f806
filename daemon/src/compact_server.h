// gpubindd's side of the compact plan protocol (gpubind/protocol/compact.h): what a request's
// header asks for and the answer's bytes. No I/O: the router reads and writes the socket.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "gpubind/daemon/binder_service.h"

namespace gpubind::daemon {

// An answer frame as the router sends it: the frame's own few bytes (the 5-byte header, or a
// whole refusal), then, for a plan, the serialized answer shared with the cache and with every
// other connection sending it, and the service's small suffix. The shared bytes are never copied
// per connection: a connection that does not read costs only its reference.
struct AnswerFrame {
  std::string head;
  PlanCache::Entry body;    // null for a refusal
  std::string_view suffix;  // BinderService::Answer::suffix(): static bytes
  size_t size() const { return head.size() + (body ? body->size() : 0) + suffix.size(); }
};

// A refusal's frame: why the request gets no plan (compact::kStatusRefused).
AnswerFrame refusal_frame(const std::string& why);

// What to do after a request's header (compact::kRequestHeaderBytes bytes).
struct HeaderVerdict {
  enum Kind {
    kReadBody,       // read `body_bytes` more, then answer
    kAnswerNow,      // send `answer` without reading further (version or size refused)
    kCloseSilently,  // a first-release plugin: closing unanswered makes it plan in-process
  } kind = kReadBody;
  uint32_t body_bytes = 0;
  AnswerFrame answer;
  Metrics::Refusal cause = Metrics::Refusal::kMalformed;  // with kAnswerNow
};

HeaderVerdict check_header(const char* header);

// A compact request for a planning worker: parsed and keyed already, or (a large one) its body,
// which the worker parses.
using CompactRequest = std::variant<std::string, KeyedRequest>;

// A request's body as the router takes it in. A step's request (a few hundred bytes) is parsed
// and keyed on the router's thread, so a repeated step shape is answered from the cache without a
// worker; a larger one (long CPU lists, many GPUs) is parsed on the worker, where its cost counts
// against its sender's turn. Either way each request is parsed once and keyed once.
struct CompactIntake {
  std::optional<AnswerFrame> answer;  // when no planning is needed
  CompactRequest request;             // otherwise: what a worker answers
};
CompactIntake take_in(std::string_view body, BinderService& service);

// The whole answer frame (status, length, payload) for a request: the same PlanRequest and
// PlanResponse as a gRPC call, answered from the cache or the planner. Runs on a planning worker.
AnswerFrame answer_frame(const CompactRequest& request, BinderService& service);

}  // namespace gpubind::daemon
