// The SPANK plugin's exported C interface: `srun --gpu-bind-auto[=FLAGS]`. Every entry point
// catches everything: nothing may unwind across Slurm's C code.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "plugin_state.h"
#include "slurm_log.h"

extern "C" {
#include <slurm/slurm_errno.h>
#include <slurm/slurm_version.h>
}

#define GPUBIND_EXPORT __attribute__((visibility("default")))

extern "C" {
// SPANK_PLUGIN defines these; declared extern "C" (and exported) first so C++ gives them
// external linkage and Slurm finds them.
extern GPUBIND_EXPORT const char plugin_name[];
extern GPUBIND_EXPORT const char plugin_type[];
extern GPUBIND_EXPORT const unsigned int plugin_version;
SPANK_PLUGIN(gpubind, 1)
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
extern "C" {
// Slurm 25.05 and later: what a failed slurm_spank_init in slurmstepd does. The plugin's init never
// fails there on the site's configuration (a bad plugstack argument is logged and the steps keep
// Slurm's binding), only when the node itself cannot run it (out of memory): a fault of the node,
// which Slurm's default answer, draining it, fits. Said here so that the choice is the plugin's.
extern GPUBIND_EXPORT int slurm_spank_init_failure_mode;
GPUBIND_EXPORT int slurm_spank_init_failure_mode = ESPANK_NODE_FAILURE;
}
#endif

namespace gpubind::spank {
namespace {

// Runs `fn`, turning any exception into an error line and `failure`.
template <class Fn>
int guarded(const char* where, int failure, Fn fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    log_error(std::string(where) + ": internal error: " + e.what());
  } catch (...) {
    slurm_error("gpubind: %s: internal error", where);
  }
  return failure;
}

int on_option_unguarded(const char* optarg, int remote) {
  PluginState& s = state();
  s.option_given = true;
  s.option_value = optarg ? optarg : "";
  const char* replayed = remote ? nullptr : std::getenv(kOptionEnv);
  if (replayed && !s.user_env_option && !s.replay_seen_on_component && s.option_value == replayed)
    s.replay_seen_on_component = true;  // an earlier component's, not this one's
  else
    s.option_on_component = true;
  auto flags = client::parse_user_flags(s.option_value);
  if (!flags) {
    if (!remote) log_error(std::string("--") + kOptionName + ": " + flags.error().message);
    return -1;
  }
  if (flags->help && !remote) {
    std::fputs(client::user_flags_help(), stderr);
    std::exit(0);
  }
  return 0;
}

int on_option(int /*val*/, const char* optarg, int remote) {
  return guarded("--gpu-bind-auto", -1, [&] { return on_option_unguarded(optarg, remote); });
}

}  // namespace

int check_flags_from_env() {
  if (state().option_given) return 0;  // checked by the option callback
  const char* from_env = std::getenv(kUserEnv);
  if (!from_env) return 0;
  auto flags = client::parse_user_flags(from_env);
  if (!flags) {
    // The value is quoted only where it is short enough to read.
    if (std::strlen(from_env) <= client::kMaxFlagsBytes)
      log_error(std::string(kUserEnv) + "=" + from_env + ": " + flags.error().message);
    else
      log_error(std::string(kUserEnv) + ": " + flags.error().message);
    return -1;
  }
  if (flags->help) {
    std::fputs(client::user_flags_help(), stderr);
    std::exit(0);
  }
  return 0;
}

void mark_component_option(spank_t sp, const char* mark) {
  PluginState& s = state();
  // A mark that cannot be set leaves the job's option as Slurm passes it.
  spank_job_control_setenv(sp, client::kComponentOptionEnv, mark, 1);
  s.option_on_component = false;
  s.replay_seen_on_component = false;
}

PluginState& state() {
  static PluginState instance;
  return instance;
}

struct spank_option* bind_option() {
  static char name[] = "gpu-bind-auto";
  static char arginfo[] = "FLAGS";
  static char usage[] =
      "Bind each task to the cores, GPU(s) and NIC nearest each other (gpubind). FLAGS: "
      "verbose, dry-run, off, order=gpu|cpu, smt=N, no-gpu-env, no-nic-env, omp, help.";
  static struct spank_option option = {name, arginfo, usage, 2, 0, on_option};
  return &option;
}

}  // namespace gpubind::spank

using namespace gpubind::spank;

extern "C" {

GPUBIND_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded("init", -1, [&] {
    const spank_context_t context = spank_context();
    // In slurmstepd the site's mistakes never fail a job or drain a node: they go to slurmd's
    // log, and a step that asks for binding is told it keeps Slurm's. srun, sbatch and salloc
    // stop with the message (under `required`) before anything is submitted.
    const bool in_step = context == S_CTX_REMOTE;
    state().user_env_option = std::getenv(kOptionEnv) != nullptr;
    auto site = gpubind::client::parse_site_args(std::vector<std::string>(av, av + ac));
    if (!site) {
      log_error("plugstack.conf: " + site.error().message);
      if (!in_step) return -1;
      state().site_error = "plugstack.conf on this node: " + site.error().message;
    } else {
      state().site = *site;
    }
    if (context == S_CTX_LOCAL || context == S_CTX_ALLOCATOR || in_step) {
      if (spank_option_register(sp, bind_option()) != ESPANK_SUCCESS) {
        slurm_error("gpubind: cannot register --%s", kOptionName);
        if (!in_step) return -1;
        if (state().site_error.empty())
          state().site_error = std::string("cannot register --") + kOptionName + " on this node";
      }
    }
    return 0;
  });
}

GPUBIND_EXPORT int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  return guarded("init_post_opt", -1, [&] {
    switch (spank_context()) {
      case S_CTX_LOCAL:
        return srun_post_opt(sp);
      case S_CTX_ALLOCATOR:
        return allocator_post_opt(sp);
      default:
        return 0;
    }
  });
}

GPUBIND_EXPORT int slurm_spank_local_user_init(spank_t sp, int, char**) {
  return guarded("local_user_init", 0,
                 [&] { return spank_context() == S_CTX_LOCAL ? srun_user_init(sp) : 0; });
}

// User errors are reported from task_init: errors here are swallowed by srun and drain the node
// under sbatch, so this never fails.
GPUBIND_EXPORT int slurm_spank_user_init(spank_t sp, int, char**) {
  return guarded("user_init", 0, [&] { return slurmstepd_user_init(sp); });
}

// Privileged again in slurmstepd, each task forked but none started: what user_init could not
// write as the job's user (the fallback report) is written here.
GPUBIND_EXPORT int slurm_spank_task_post_fork(spank_t, int, char**) {
  return guarded("task_post_fork", 0,
                 [&] { return spank_context() == S_CTX_REMOTE ? slurmstepd_task_post_fork() : 0; });
}

GPUBIND_EXPORT int slurm_spank_task_init(spank_t sp, int, char**) {
  return guarded("task_init", 0, [&] { return slurmstepd_task_init(sp); });
}

// slurmd's job prolog and epilog (S_CTX_JOB_SCRIPT): they never fail, as a failed prolog drains
// the node; what goes wrong is said in slurmd's log.
GPUBIND_EXPORT int slurm_spank_job_prolog(spank_t sp, int ac, char** av) {
  return guarded("job_prolog", 0, [&] {
    auto site = gpubind::client::parse_site_args(std::vector<std::string>(av, av + ac));
    if (!site) {
      log_error("plugstack.conf: " + site.error().message);
      return 0;
    }
    job_prolog(sp, *site);
    return 0;
  });
}

GPUBIND_EXPORT int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  return guarded("job_epilog", 0, [&] {
    auto site = gpubind::client::parse_site_args(std::vector<std::string>(av, av + ac));
    if (site) job_epilog(sp, *site);
    return 0;
  });
}

}  // extern "C"
