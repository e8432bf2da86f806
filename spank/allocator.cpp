// sbatch and salloc (S_CTX_ALLOCATOR): the user's flags are checked before the job is
// submitted; the option itself reaches the job's steps through Slurm (kOptionEnv). Nothing heavy
// is loaded here: these commands load every SPANK plugin on every invocation.
#include "plugin_state.h"

namespace gpubind::spank {

int allocator_post_opt(spank_t) {
  return check_flags_from_env();
}

}  // namespace gpubind::spank
