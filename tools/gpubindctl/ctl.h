// What gpubindctl's commands share: exit codes, the plan options, offline loading and the daemon's
// address. Each command lives in a file of its own; gpubindctl.cpp dispatches to them.
#pragma once

#include <chrono>
#include <string>

#include "gpubind/cli_args.h"
#include "gpubind/node.h"
#include "gpubind/planner.h"
#include "gpubind/result.h"

namespace gpubind::ctl {

using cli::Args;  // the tools' shared argument parser (cli_args.h)

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitNothing = 3;  // audit --admin-comment: no record of the job on this node

// Prints "gpubindctl: MESSAGE" to stderr and returns `code`.
int fail(const std::string& message, int code = kExitBadInput);

// A failed call to the daemon, with what to do when the daemon does not serve this user gRPC.
int fail_from_daemon(const std::string& socket_path, const Error& error, int code = kExitFailed);

// The step shape of `plan`, `explain` and `bench`: --ntasks, --cpus, --gpus and the rest.
Result<PlanRequest> request_from(const Args& args);

// With --topology FILE.xml|live: work on that node instead of asking gpubindd.
bool offline(const Args& args);

// The node of --topology and --policy (built-in defaults without --policy).
Result<Node> load_offline(const Args& args);

struct DaemonAccess {
  std::string socket;
  std::chrono::milliseconds timeout;
};

// --socket (else $GPUBIND_SOCKET, else the default) and --timeout.
Result<DaemonAccess> daemon_access(const Args& args);

// Written beside the target and renamed, so a failed write never leaves half a file; no link on
// the way is followed and nothing already there is opened (file_output.cpp).
Status write_file_atomically(const std::string& path, const std::string& content);
// The same, for a file root writes where others read it (the metrics textfile): refused unless
// every folder from / to the file's belongs to root (or this user) and nobody else may change it.
Status write_trusted_file(const std::string& path, const std::string& content);

// The commands, each in a file of its own.
int run_topology(const Args& args);  // plan_commands.cpp
int run_plan(const Args& args);      // plan_commands.cpp
int run_explain(const Args& args);   // explain_command.cpp
int run_status(const Args& args);    // daemon_commands.cpp
int run_bench(const Args& args);     // daemon_commands.cpp
int run_metrics(const Args& args);   // metrics_command.cpp
// check_node_command.cpp
int run_check_node(const Args& args);
int run_audit(const Args& args);  // audit_command.cpp
// explain --job ID: each running task's plan (its record) beside what it runs with now.
int run_explain_job(const Args& args);  // audit_command.cpp

// The audit's counts in the metrics' format and, with --record DIR, the jobs' records written
// (audit_command.cpp).
struct AuditMetrics {
  std::string text;
  Status recorded = Ok{};
};
AuditMetrics audit_metrics(const Args& args);

}  // namespace gpubind::ctl
