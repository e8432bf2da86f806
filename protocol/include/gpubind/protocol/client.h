// The compact transport's client: binder.proto's PlanRequest and PlanResponse as bytes (nanopb,
// libc only: the SPANK plugin links it), and one exchange with the daemon bounded by a deadline.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "gpubind/protocol/step.h"
#include "gpubind/result.h"

namespace gpubind::protocol {

// gpubind.v1.PlanRequest bytes. Fails on values the schema cannot carry (negative counts or GPU
// indices, an order or Level Zero hierarchy it does not name).
Result<std::string> encode_request(const StepRequest& request);

// A gpubind.v1.PlanResponse; fields this side does not know are skipped.
Result<StepPlan> decode_plan(const std::string& bytes);

// Who may serve gpubind's socket: root, and the daemon's own account where it has one. The
// socket and its folder must belong to one of them, the folder must not be writable by others
// (else anyone could put a socket of their own in its place), and the process listening on it
// must run as one of them (SO_PEERCRED).
struct TrustedServer {
  std::optional<uid_t> daemon_uid;  // nullopt: root only
  bool check = true;                // false: any server (tests of the transport alone)
};

// Whether the socket at `socket_path` and its folder are as TrustedServer says; the error names
// the path, the owner or mode found, and Error::untrusted is set.
Status check_socket_path(const std::string& socket_path, const TrustedServer& trust);

// What an exchange does when no daemon gave an answer although one may be back in a moment: the
// socket is gone or refuses connections (a daemon that binds its own socket, between two lives),
// or the daemon closed the connection before its whole answer (killed mid-request). A restarting
// daemon is back within milliseconds (systemd restarts it after RestartSec; under socket
// activation new connections wait in the socket's queue meanwhile).
enum class DaemonGone {
  kFail,         // fail at once: the caller has something as good to fall back on
  kRetryInTime,  // try again after 20 ms, doubling up to 100 ms, while the deadline allows
};

// Sends one framed request to the daemon at `socket_path` and returns the answer's payload. The
// whole exchange, retries included, never blocks past `timeout_ms`. A request the daemon refuses
// fails with Error::invalid_input set (the in-process planner would refuse it too); one that does
// not fit the daemon's topology with Error::node_mismatch set (the live node may plan it); a
// server that fails `trust` with Error::untrusted set; none of them is retried. Every other
// failure, an unknown answer status included, means "no daemon".
Result<std::string> exchange(const std::string& socket_path, const std::string& request,
                             int timeout_ms, const TrustedServer& trust = {},
                             DaemonGone when_gone = DaemonGone::kFail);

// encode_request, exchange, decode_plan.
Result<StepPlan> ask_daemon(const std::string& socket_path, const StepRequest& request,
                            int timeout_ms, const TrustedServer& trust = {},
                            DaemonGone when_gone = DaemonGone::kFail);
// The same for a request encode_request made already.
Result<StepPlan> ask_daemon_encoded(const std::string& socket_path, const std::string& encoded,
                                    int timeout_ms, const TrustedServer& trust = {},
                                    DaemonGone when_gone = DaemonGone::kFail);

}  // namespace gpubind::protocol
