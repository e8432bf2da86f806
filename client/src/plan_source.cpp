#include "gpubind/client/plan_source.h"

#include "fallback_loader.h"
#include "gpubind/client/answer_check.h"
#include "gpubind/client/fallback_report.h"
#include "gpubind/protocol/client.h"
#include "gpubind/protocol/fallback_reports.h"

namespace gpubind::client {

protocol::DaemonGone when_daemon_gone(OnError on_error) {
  // The in-process plan is as good as the daemon's, and waiting for a daemon that stays away would
  // cost every launch its whole timeout_ms; without it, the launch would lose its binding.
  return on_error == OnError::kFallback ? protocol::DaemonGone::kFail
                                        : protocol::DaemonGone::kRetryInTime;
}

Result<StepPlan> ask_daemon(const StepRequest& request, const std::string& encoded,
                            const SiteArgs& site) {
  auto answer =
      protocol::ask_daemon_encoded(site.socket, encoded, site.timeout_ms, trusted_server_of(site),
                                   when_daemon_gone(site.on_error));
  if (!answer) return answer;
  if (auto checked = check_answer(request, *answer, site.env_allow); !checked) {
    Error refused =
        make_error("gpubindd at " + site.socket + ": answer refused: " + checked.error().message);
    refused.untrusted = true;
    return refused;
  }
  // A daemon older than this plugin plans without what Slurm and the user fixed (fields it does
  // not know): its plan would bind tasks against Slurm's choice.
  if (protocol::has_facts(request) && !answer->facts_kept) {
    return make_error("gpubindd at " + site.socket +
                      " is older than this plugin (another protocol version): it does not take "
                      "what Slurm or the user fixed for the tasks; upgrade and restart gpubindd");
  }
  answer->source = "daemon";
  return answer;
}

Result<StepPlan> plan_in_process(const StepRequest& request, const std::string& encoded,
                                 const SiteArgs& site, const InProcess& where) {
  auto plan = plan_with_stepd_lib(where.stepd_lib, encoded, site.policy, where.topology);
  if (!plan) return plan;
  // The site's own policy planned it, under the rules an answer from the daemon meets.
  if (auto checked = check_answer(request, *plan, site.env_allow); !checked)
    return make_error("in-process plan refused: " + checked.error().message);
  plan->source = "fallback";
  return plan;
}

Result<Planned> plan_step(const StepRequest& request, const SiteArgs& site,
                          const InProcess& fallback,
                          const std::function<void(const std::string&)>& report) {
  auto encoded = protocol::encode_request(request);
  if (!encoded) {
    Error error = encoded.error();
    error.invalid_input = true;
    return error;
  }
  auto answer = ask_daemon(request, *encoded, site);
  if (answer) return Planned{std::move(*answer), std::nullopt};
  const Error& failed = answer.error();
  if (failed.untrusted) report(failed.message);
  if (site.on_error != OnError::kFallback || failed.invalid_input) {
    if (failed.node_mismatch) report(failed.message);
    return failed;
  }
  auto local = plan_in_process(request, *encoded, site, fallback);
  // The live node's planner refusing the step too: it names what the node lacks, and the daemon's
  // view is not stale. Said once, in the live node's words.
  if (!local && failed.node_mismatch && local.error().invalid_input) return local.error();
  if (failed.node_mismatch) report(failed.message);
  if (!local) {
    return make_error(failed.message +
                      "; in-process planning failed too: " + local.error().message);
  }
  local->warnings.insert(local->warnings.begin(), failed.message + "; planned in-process instead");
  // Counted by the daemon's monitoring once it is back (gpubind_fallbacks_total).
  FallbackReport said{protocol::fallback_spool_of(site.socket),
                      trusted_server_of(site).daemon_uid,
                      request.job_id,
                      request.step_id,
                      std::string(fallback_reason(failed)),
                      failed.message};
  return Planned{std::move(*local), std::move(said)};
}

}  // namespace gpubind::client
