// Where a step's plan comes from, for the plugin and gpubind-run alike: the daemon, when whoever
// serves the socket is trusted and its answer stays inside the step; else, where the site allows
// it, the in-process planner (libgpubind_stepd.so). The request is encoded once for both.
#pragma once

#include <functional>
#include <string>

#include "gpubind/client/fallback_report.h"
#include "gpubind/client/options.h"
#include "gpubind/client/types.h"
#include "gpubind/result.h"

namespace gpubind::client {

// The fallback: the step library's path, and the topology it plans on ("" = the policy's
// topology_file, else live discovery).
struct InProcess {
  std::string stepd_lib;
  std::string topology;
};

// What asking the daemon does when it went away without answering (see protocol::DaemonGone):
// under on_error=fallback, fall back at once; under skip and fail, which have nothing as good,
// try again while timeout_ms allows, so that a launch meeting a daemon restart waits for it.
protocol::DaemonGone when_daemon_gone(OnError on_error);

// The daemon's plan, checked; an answer that fails a check is Error::untrusted.
Result<StepPlan> ask_daemon(const StepRequest& request, const std::string& encoded,
                            const SiteArgs& site);

// The in-process plan, checked as the daemon's answer is.
Result<StepPlan> plan_in_process(const StepRequest& request, const std::string& encoded,
                                 const SiteArgs& site, const InProcess& where);

// The daemon's plan; when the daemon cannot give one (absent, slow, not trusted, its node view
// stale) and on_error=fallback, the in-process plan, its first warning saying why. Under skip and
// fail, a daemon that went away is asked again within timeout_ms (when_daemon_gone). A request the
// daemon refuses on its merits is not retried: it would be refused in-process too. `report` gets
// what an administrator must see (an untrusted server or answer, a stale daemon topology: one the
// step does not fit while the live node does). A step that fits neither gets one message. A plan
// made in-process goes with the report for the daemon's monitoring (`fallback`), which the caller
// leaves where it may (fallback_report.h).
struct Planned {
  StepPlan plan;
  std::optional<FallbackReport> fallback;
};
Result<Planned> plan_step(const StepRequest& request, const SiteArgs& site,
                          const InProcess& fallback,
                          const std::function<void(const std::string&)>& report);

}  // namespace gpubind::client
