#include "gpubind/client/request.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <utility>

#include "gpubind/client/worker_gpus.h"
#include "gpubind/parse.h"
#include "gpubind/slurm_words.h"

namespace gpubind::client {
namespace {

uint64_t id_from_env(const EnvLookup& env, const char* name) {
  const auto text = env(name);
  if (!text) return 0;
  return static_cast<uint64_t>(parse_whole_number(*text, 0, LLONG_MAX).value_or(0));
}

// Whether the step's HIP_VISIBLE_DEVICES is one an outer task's binding set, unchanged since.
bool set_by_gpubind(const EnvLookup& env) {
  for (const EnvEntry& held : inherited_values(env))
    if (held.name == "HIP_VISIBLE_DEVICES") return true;
  return false;
}

// Warnings of reading the step, one line.
void add_warning(BuiltRequest& built, const std::string& warning) {
  if (warning.empty()) return;
  built.warning += (built.warning.empty() ? "" : "; ") + warning;
}

}  // namespace

namespace {

// The base name of a task's program, where it is a plain word the daemon takes ("apptainer");
// "" for anything else (a path to a folder, spaces, a name past the wire's limit).
std::string command_name(const std::string& command) {
  const std::string name = command.substr(command.rfind('/') + 1);
  const bool word = !name.empty() && name.size() <= 64 &&
                    std::all_of(name.begin(), name.end(), [](unsigned char c) {
                      return std::isalnum(c) != 0 || c == '_' || c == '-' || c == '.';
                    });
  return word ? name : "";
}

}  // namespace

StepRequest make_request(const StepShape& shape, const UserFlags& flags, const EnvLookup& env) {
  StepRequest request;
  request.job_id = shape.job_id;
  request.step_id = shape.step_id;
  request.ntasks = shape.ntasks;
  request.allowed_cpus = shape.cpus.to_list();
  request.allowed_cores = shape.allowed_cores;
  request.order = flags.order.value_or("");
  request.smt = flags.smt.value_or(shape.threads_per_core > 0 ? shape.threads_per_core : -1);
  request.no_gpu_env = flags.no_gpu_env;
  request.no_nic_env = flags.no_nic_env;
  request.omp = flags.omp;
  request.ze_hierarchy = ze_hierarchy_from_env(env);
  request.ccl_worker_count = count_from_env(env, "CCL_WORKER_COUNT");
  // A launcher name past the wire's token limit is no launcher oneCCL knows.
  request.ccl_process_launcher = env("CCL_PROCESS_LAUNCHER").value_or("").substr(0, 64);
  request.ccl_local_size = count_from_env(env, "CCL_LOCAL_SIZE");
  request.task_command = command_name(shape.command);
  return request;
}

BuiltRequest slurm_step_request(StepShape shape, const EnvLookup& env, const UserFlags& flags,
                                const SiteArgs& site) {
  shape.threads_per_core = count_from_env(env, slurm::kThreadsPerCore);
  BuiltRequest built{make_request(shape, flags, env), "", ""};
  StepRequest& request = built.request;
  // The step's GPUs are the ones Slurm lists for it. A visibility variable without Slurm's list
  // is the user's own (a node whose GPUs Slurm does not manage, or a step given none): it is
  // neither read as the step's GPUs nor changed.
  const bool slurm_listed = env(slurm::kStepGpus).has_value();
  StepGpus gpus = slurm_listed ? step_gpus_from_env(env) : StepGpus{};
  std::optional<EnvEntry> own = slurm_listed ? std::nullopt : slurm_visibility_var(env);
  if (const auto hip = env("HIP_VISIBLE_DEVICES"); !slurm_listed && !own && hip)
    own = EnvEntry{"HIP_VISIBLE_DEVICES", *hip};  // Slurm never sets it: always the user's
  if (own) {
    built.gpu_source = own->name + "=" + own->value.substr(0, 64) +
                       (own->value.size() > 64 ? "..." : "") +
                       " is the user's own (Slurm gave the step no GPU list): left as it is, and "
                       "the tasks are bound without GPUs";
  }
  request.gpus_given = !(site.gpus_without_gres_node && slurm_says_nothing_about_gpus(env));
  request.gpus = std::move(gpus.gpus);
  request.unplaced_gpus = std::move(gpus.unplaced);
  request.unplaced_slurm_indices = std::move(gpus.unplaced_slurm_indices);
  built.warning = std::move(gpus.warning);
  add_warning(built, ze_hierarchy_warning(env));
  // The user's HIP_VISIBLE_DEVICES counts the step's GPUs: the plan rewrites it per task. One an
  // outer task's binding set (a step inside a bound task) is gpubind's, not the user's.
  if (const auto hip = env("HIP_VISIBLE_DEVICES"); slurm_listed && hip && !set_by_gpubind(env)) {
    request.hip_inherited = true;
    request.inherited_hip = *hip;
  }
  request.cpus_per_task = count_from_env(env, slurm::kCpusPerTask);
  request.gpus_per_task = count_from_env(env, slurm::kGpusPerTask);
  request.tasks_per_gpu = count_from_env(env, slurm::kTasksPerGpu);
  return built;
}

BuiltRequest launcher_step_request(const LocalRank& place, const CpuSet& cpus, const EnvLookup& env,
                                   const UserFlags& flags, const std::string& command,
                                   const FluxJob& flux) {
  StepShape shape;
  shape.command = command;
  shape.job_id = id_from_env(env, slurm::kJobId);
  shape.step_id = id_from_env(env, slurm::kStepId);
  shape.ntasks = place.size;
  shape.cpus = cpus;
  BuiltRequest built{make_request(shape, flags, env), "", ""};
  WorkerGpus gpus = worker_gpus(env, built.request, flux);
  built.gpu_source = std::move(gpus.how);
  built.warning = std::move(gpus.warning);
  add_warning(built, ze_hierarchy_warning(env));
  return built;
}

}  // namespace gpubind::client
