// A launch that planned in-process because gpubindd could not answer says so to the daemon's
// monitoring: one small file in the spool beside the socket (gpubind/protocol/fallback_reports.h).
// The spool is root's (or the daemon user's): the plugin decides on the report while it plans, as
// the job's user (slurm_spank_user_init), and leaves it once privileged again
// (slurm_spank_task_post_fork, root in slurmstepd), so every user's fallbacks are counted and no
// user can write one. Best effort: whatever fails is ignored, and the launch neither fails nor
// waits for it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gpubind/result.h"

namespace gpubind::client {

// Which of protocol::kFallbackReasons `failed` (the daemon's error) is.
std::string_view fallback_reason(const Error& failed);

// A report decided on, to be left where its writer may write.
struct FallbackReport {
  std::string spool;
  std::optional<uid_t> daemon_uid;
  uint64_t job_id = 0;
  uint64_t step_id = 0;
  std::string reason;  // one of protocol::kFallbackReasons
  std::string message;
};

// Writes "REASON: MESSAGE" (one line, cut to fit) into a new file of `spool`, named after the
// job, step and process. Only into a real folder (not a symlink) that root or `daemon_uid` owns
// and nobody else may write, so no user can point the report elsewhere or have it counted in a
// folder of theirs; never creates the folder. Whether a report was left (for tests).
bool leave_fallback_report(const std::string& spool, std::optional<uid_t> daemon_uid,
                           uint64_t job_id, uint64_t step_id, std::string_view reason,
                           std::string_view message) noexcept;
inline bool leave_fallback_report(const FallbackReport& r) noexcept {
  return leave_fallback_report(r.spool, r.daemon_uid, r.job_id, r.step_id, r.reason, r.message);
}

}  // namespace gpubind::client
