// The plugin's user flags (--gpu-bind-auto[=FLAGS], SLURM_GPU_BIND_AUTO) and site arguments
// (plugstack.conf). Pure parsing, no Slurm: errors name the offending flag or argument.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpubind/protocol/client.h"
#include "gpubind/protocol/limits.h"
#include "gpubind/result.h"

namespace gpubind::spank {

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

// "verbose,order=cpu,smt=1". Empty text (the bare option) or the "(null)" Slurm passes for an
// optional argument given without a value mean "on, defaults".
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
};

Result<SiteArgs> parse_site_args(const std::vector<std::string>& args);

// Who may serve the socket: root, and the site's daemon_user where that account exists here.
protocol::TrustedServer trusted_server_of(const SiteArgs& site);

// The binding a user asked Slurm for explicitly: srun's own --cpu-bind/--gpu-bind values, less
// the words that only set verbosity ("verbose", "quiet"); empty where not asked.
struct ExplicitBinding {
  std::string cpu, gpu;
  bool any() const { return !cpu.empty() || !gpu.empty(); }
};
// From srun's options (its arguments before the command): "--cpu-bind=X", "--cpu-bind X" and the
// old "--cpu_bind" spelling; the last one given counts, as in srun.
ExplicitBinding explicit_binding(const std::vector<std::string>& launcher_options);
// One component of srun's command line (components are separated by ':' tokens): its
// --gpu-bind-auto flags (nullopt: not given there; "" for the bare option) and explicit binding.
struct LauncherComponent {
  std::optional<std::string> flags;
  ExplicitBinding binding;
};
// `args` are srun's arguments after its name; `first_command_argc` is the length of the first
// component's command (Slurm's S_JOB_ARGV), which ends that component's options exactly. Later
// components have no such boundary: all their arguments are read, which matters only where a
// command itself carries --gpu-bind-auto, --cpu-bind or --gpu-bind.
std::vector<LauncherComponent> launcher_components(const std::vector<std::string>& args,
                                                   int first_command_argc);

// srun passes it to the step in this variable (a SLURM_ name, so that --export=NONE keeps it) as
// "cpu-bind=X;gpu-bind=Y".
inline constexpr const char* kExplicitEnv = "SLURM_GPUBIND_USER_BIND";
// A heterogeneous step: kHetEnv holds the number of components, and component K's flags and
// explicit binding are in kHetFlagsEnv + K and kExplicitEnv + "_" + K (unset: not given there).
inline constexpr const char* kHetEnv = "SLURM_GPUBIND_HET_COMPONENTS";
inline constexpr const char* kHetFlagsEnv = "SLURM_GPUBIND_FLAGS_";
std::string het_flags_var(int component);
std::string het_explicit_var(int component);
// Every variable srun passes to a step (kExplicitEnv, and for `het_components` text from
// kHetEnv, each component's and kHetEnv itself): what a new srun and every task clear.
std::vector<std::string> passed_vars(const char* het_components);
std::string encode_explicit(const ExplicitBinding& binding);
ExplicitBinding decode_explicit(const std::string& text);
// Slurm's SLURM_CPU_BIND_TYPE as a task sees it: "none", "map_cpu:", "rank", "map_ldom:" and
// "mask_ldom:" come only from a user (srun or the SLURM_CPU_BIND it reads); Slurm's own default
// binding and --cpu-bind=cores|threads|sockets reach the task as "mask_cpu:".
bool cpu_bind_type_is_explicit(const std::string& slurm_cpu_bind_type);

}  // namespace gpubind::spank
