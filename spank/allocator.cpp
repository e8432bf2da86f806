// sbatch and salloc (S_CTX_ALLOCATOR): the user's flags are checked before the job is
// submitted; the option itself reaches the job's steps through Slurm (kOptionEnv) and each
// node's job record (job_script.cpp). Nothing heavy is loaded here: these commands load every
// SPANK plugin on every invocation.
#include "plugin_state.h"

namespace gpubind::spank {

int allocator_post_opt(spank_t sp) {
  // Slurm hands each component the options of all components read before it: the mark says
  // whether this one was given its own.
  mark_component_option(sp, state().option_on_component ? "yes" : "no");
  return check_flags_from_env();
}

}  // namespace gpubind::spank
