// The plugin's user flags (--gpu-bind-auto[=FLAGS], SLURM_GPU_BIND_AUTO) and site arguments
// (plugstack.conf). Pure parsing, no Slurm: errors name the offending flag or argument.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpubind/client/job_option.h"
#include "gpubind/protocol/client.h"
#include "gpubind/protocol/limits.h"
#include "gpubind/result.h"

namespace gpubind::client {

enum class OnError { kFallback, kSkip, kFail };
const char* on_error_name(OnError on_error);

// What a user asked for with --gpu-bind-auto[=FLAGS].
struct UserFlags {
  bool off = false;
  bool verbose = false;
  bool dry_run = false;
  bool help = false;
  bool no_gpu_env = false;
  bool no_nic_env = false;
  bool omp = false;
  std::optional<std::string> order;  // "gpu" or "cpu"
  std::optional<int> smt;
};

// The longest flags text read: every flag at once fits in a tenth of it.
inline constexpr size_t kMaxFlagsBytes = 1024;

// "verbose,order=cpu,smt=1". Empty text (the bare option) or the "(null)" Slurm passes for an
// optional argument given without a value mean "on, defaults". Longer than kMaxFlagsBytes: refused,
// the message giving the length, not the text.
Result<UserFlags> parse_user_flags(const std::string& text);

// The help text for --gpu-bind-auto=help.
const char* user_flags_help();

// What the site set in plugstack.conf.
struct SiteArgs {
  bool default_on = false;
  std::string socket = protocol::kDefaultSocket;
  int timeout_ms = protocol::kDefaultTimeoutMs;
  OnError on_error = OnError::kFallback;
  std::string policy;     // policy file for in-process fallback planning
  std::string stepd_lib;  // the client library loaded in slurmstepd; empty = beside the plugin
  // A user's explicit --cpu-bind/--gpu-bind wins for that resource unless the site forces
  // gpubind's binding (override_explicit=yes).
  bool override_explicit = false;
  // Sites whose Slurm does not manage GPUs (no gres/gpu): `node` shares out every GPU of the
  // node when Slurm says nothing about GPUs at all; `none` (the default) gives such steps none.
  bool gpus_without_gres_node = false;
  // Who may serve the socket besides root (its uid is looked up when a step asks).
  std::string daemon_user = "gpubind";
  // Variables an answer may set beyond those binding is about (names, or prefixes "FOO_*").
  std::vector<std::string> env_allow;
  // Where each node's job prolog records a job's --gpu-bind-auto (job_option.h).
  std::string job_records = kDefaultJobRecordDir;
};

Result<SiteArgs> parse_site_args(const std::vector<std::string>& args);

// Who may serve the socket: root, and the site's daemon_user where that account exists here.
protocol::TrustedServer trusted_server_of(const SiteArgs& site);

}  // namespace gpubind::client
