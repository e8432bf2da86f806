// State the plugin keeps within one process: srun/sbatch/salloc, or one slurmstepd, whose tasks
// inherit it when slurmstepd forks them after user_init.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpubind/client/fallback_report.h"
#include "gpubind/client/launch.h"
#include "gpubind/client/options.h"
#include "gpubind/client/srun_options.h"
#include "gpubind/client/types.h"

extern "C" {
#include <slurm/spank.h>
}

namespace gpubind::spank {

// The launch client's names the plugin's contexts use.
using client::SiteArgs;
using client::StepPlan;
using client::UserFlags;

inline constexpr const char* kOptionName = "gpu-bind-auto";
// How Slurm passes an option given to sbatch/salloc down to the steps of the job.
inline constexpr const char* kOptionEnv = "SLURM_SPANK__SLURM_SPANK_OPTION_gpubind_gpu_bind_auto";
inline constexpr const char* kUserEnv = "SLURM_GPU_BIND_AUTO";

struct PluginState {
  SiteArgs site;
  // slurmstepd: why the site's plugstack line cannot be used here (logged at init); steps that
  // ask for binding are told and keep Slurm's.
  std::string site_error;
  bool option_given = false;
  std::string option_value;
  // srun, sbatch, salloc: the option was given on the component being read (each component's
  // options are read, then post_opt runs for it).
  bool option_on_component = false;
  // Slurm replays the option of earlier components to each later one from the environment it
  // sets (kOptionEnv); a value the user's own environment held when the command started is the
  // user's, as Slurm's other option variables are.
  bool user_env_option = false;
  bool replay_seen_on_component = false;
  // slurmstepd: set by user_init, used by every task_init.
  bool bind = false;     // this step is to be bound
  bool asked = false;    // the user asked (option, job option, SLURM_GPU_BIND_AUTO), not the site
  std::string gpu_note;  // said under verbose: why the step's GPU variables were not read
  UserFlags flags;
  bool planned = false;  // plan holds the step's plan
  StepPlan plan;
  // The step's GPUs (node index, token) and tasks on this node, as asked: task_init compares a
  // task's own GPUs with them (Slurm's per-task choice).
  std::vector<std::pair<int, std::string>> step_gpus;
  int local_tasks = 0;
  client::StepFacts facts;  // what Slurm and the user fixed, as the request carried it
  // The plan was made in-process: the report user_init decided on, left by task_post_fork.
  std::optional<client::FallbackReport> fallback_report;
  std::string failure;  // why there is no plan
  std::string host;
};

PluginState& state();

// The spank_option the plugin registers (one object for the whole process).
struct spank_option* bind_option();

// The user's flags from SLURM_GPU_BIND_AUTO, checked before anything is submitted (srun, sbatch
// and salloc, when the option itself was not given): -1 and a message naming the fault.
int check_flags_from_env();

// srun, sbatch and salloc, once a component's options are read: marks that component's job with
// whether the job's --gpu-bind-auto was given on it ("yes", "no", "step": client::
// kComponentOptionEnv), for its nodes' job prologs.
void mark_component_option(spank_t sp, const char* mark);

// Per-context entry points: srun.cpp (S_CTX_LOCAL), allocator.cpp (S_CTX_ALLOCATOR: sbatch and
// salloc), slurmstepd.cpp (S_CTX_REMOTE), job_script.cpp (S_CTX_JOB_SCRIPT: slurmd's job prolog
// and epilog, where slurm_spank_init does not run and the site's arguments come with the call).
int srun_post_opt(spank_t sp);
int srun_user_init(spank_t sp);
int allocator_post_opt(spank_t sp);
int slurmstepd_user_init(spank_t sp);
int slurmstepd_task_init(spank_t sp);
int slurmstepd_task_post_fork();
void job_prolog(spank_t sp, const SiteArgs& site);
void job_epilog(spank_t sp, const SiteArgs& site);

}  // namespace gpubind::spank
