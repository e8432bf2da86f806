// srun, sbatch and salloc: check the user's flags before anything is submitted. Nothing heavy is
// loaded here: these commands load every SPANK plugin on every invocation.
#include <cstdio>
#include <cstdlib>

#include "plugin_state.h"

namespace gpubind::spank {

int local_post_opt(spank_t) {
  const PluginState& s = state();
  if (s.option_given) return 0;  // checked by the option callback
  const char* from_env = std::getenv(kUserEnv);
  if (!from_env) return 0;
  auto flags = parse_user_flags(from_env);
  if (!flags) {
    slurm_error("gpubind: %s=%s: %s", kUserEnv, from_env, flags.error().message.c_str());
    return -1;
  }
  if (flags->help) {
    std::fputs(user_flags_help(), stderr);
    std::exit(0);
  }
  return 0;
}

}  // namespace gpubind::spank
