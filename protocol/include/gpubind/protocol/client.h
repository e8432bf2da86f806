// The compact transport's client: binder.proto's PlanRequest and PlanResponse as bytes (nanopb,
// libc only: the SPANK plugin links it), and one exchange with the daemon bounded by a deadline.
#pragma once

#include <string>

#include "gpubind/protocol/step.h"
#include "gpubind/result.h"

namespace gpubind::protocol {

// gpubind.v1.PlanRequest bytes. Fails on values the schema cannot carry (negative counts or GPU
// indices, an order or Level Zero hierarchy it does not name).
Result<std::string> encode_request(const StepRequest& request);

// A gpubind.v1.PlanResponse; fields this side does not know are skipped.
Result<StepPlan> decode_plan(const std::string& bytes);

// Sends one framed request to the daemon at `socket_path` and returns the answer's payload. Never
// blocks past `timeout_ms`. A request the daemon refuses fails with Error::invalid_input set (the
// in-process planner would refuse it too); every other failure, an unknown answer status included,
// means "no daemon".
Result<std::string> exchange(const std::string& socket_path, const std::string& request,
                             int timeout_ms);

// encode_request, exchange, decode_plan.
Result<StepPlan> ask_daemon(const std::string& socket_path, const StepRequest& request,
                            int timeout_ms);

}  // namespace gpubind::protocol
