// Fallback reports: a launch that planned in-process because gpubindd could not answer leaves one
// small file in a spool beside the daemon's socket, which the daemon counts for monitoring. The
// launch side (root in slurmstepd) writes; the daemon owns the folder, reads and removes. A file
// holds one line, "REASON: what failed", REASON one of kFallbackReasons.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace gpubind::protocol {

// The spool: `fallback-reports` in the socket's folder. Never created by the launch side.
inline std::string fallback_spool_of(const std::string& socket_path) {
  const auto slash = socket_path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : socket_path.substr(0, slash);
  return folder + "/fallback-reports";
}

// A bounded set, so that the daemon's counters (and a metric's labels) stay bounded whatever the
// files say: any other word counts as "other".
inline constexpr std::array<std::string_view, 7> kFallbackReasons = {
    "unavailable", "timeout", "refused", "node_mismatch", "untrusted", "version", "other"};

// A report's file holds at most this many bytes; the daemon reads no more of one.
inline constexpr size_t kMaxFallbackReportBytes = 512;

}  // namespace gpubind::protocol
