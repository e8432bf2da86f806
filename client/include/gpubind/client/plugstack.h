// The site's plugin arguments (socket, timeout, on_error, policy, daemon_user, env_allow...) as
// written on plugstack.conf's spank_gpubind.so line: gpubind-run follows the same site settings
// as the plugin on the same node.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpubind/result.h"

namespace gpubind::client {

// The arguments after spank_gpubind.so on the first line of `text` that loads it (as
// "required" or "optional"), or nullopt where none does. `include` lines are returned in
// `includes` (their glob patterns) for the caller to read; comments and blank lines are skipped.
struct PlugstackLines {
  std::string plugin;  // the spank_gpubind.so path on that line
  std::optional<std::vector<std::string>> gpubind_args;
  std::vector<std::string> includes;
};
PlugstackLines read_plugstack_text(const std::string& text);

inline constexpr const char* kSlurmConf = "/etc/slurm/slurm.conf";

// Slurm's plugstack.conf: `path` if given (it must exist), else the one the slurm.conf that
// SLURM_CONF names (else /etc/slurm/slurm.conf) gives (plugstack_path_of), where it exists.
// Follows include lines (globs, at most 8 deep). No gpubind_args: no such line (the defaults
// apply).
Result<PlugstackLines> gpubind_plugstack_line(const std::optional<std::string>& path,
                                              const std::optional<std::string>& slurm_conf);

// The plugstack.conf Slurm reads with `slurm_conf` (its path and text): its PlugStackConfig, else
// plugstack.conf beside it (under configless Slurm: the copy slurmd fetched into its conf-cache).
std::string plugstack_path_of(const std::string& slurm_conf, const std::string& slurm_conf_text);

// Why `plugstack` (includes followed as SPANK follows them: relative to its folder, globs) loads
// no spank_gpubind.so, naming each include that matched no file; "" where a line loads it.
std::string why_gpubind_not_loaded(const std::string& plugstack);

}  // namespace gpubind::client
