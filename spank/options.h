// The plugin's user flags (--gpu-bind-auto[=FLAGS], SLURM_GPU_BIND_AUTO) and site arguments
// (plugstack.conf). Pure parsing, no Slurm: errors name the offending flag or argument.
#pragma once

#include <optional>
#include <string>
#include <vector>

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
  std::string socket = "/run/gpubind/gpubind.sock";
  int timeout_ms = 1000;
  OnError on_error = OnError::kFallback;
  std::string policy;     // policy file for in-process fallback planning
  std::string stepd_lib;  // the client library loaded in slurmstepd; empty = beside the plugin
};

Result<SiteArgs> parse_site_args(const std::vector<std::string>& args);

}  // namespace gpubind::spank
