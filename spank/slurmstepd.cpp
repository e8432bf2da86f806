// slurmstepd: one plan per step and node in user_init (before the tasks fork), applied by each
// task in task_init (after Slurm's own binding, just before exec).
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gpubind/affinity.h"
#include "gpubind/client/apply.h"
#include "gpubind/client/job_option.h"
#include "gpubind/client/launch.h"
#include "gpubind/client/plan_source.h"
#include "gpubind/client/request.h"
#include "gpubind/client/slurm_gpu_choice.h"
#include "gpubind/client/step_cpus.h"
#include "gpubind/client/step_env.h"
#include "gpubind/parse.h"
#include "gpubind/slurm_words.h"
#include "plugin_state.h"
#include "slurm_log.h"

extern "C" {
#include <slurm/slurm.h>  // SLURM_BATCH_SCRIPT and the other special step ids
#include <slurm/slurm_version.h>
}

namespace gpubind::spank {
namespace {

using client::EnvLookup;
using client::ExplicitBinding;
using client::LaunchDecision;
using client::OnError;
using client::StepRequest;
using client::TaskBinding;
using client::TaskEnv;

constexpr const char* kStepdLibName = "libgpubind_stepd.so";

// The longest value read from the job's environment: past what exec passes a task (128 KiB a
// variable on Linux), so any value a task could have is read whole.
constexpr size_t kMaxEnvValueBytes = size_t{1} << 20;

// A variable of the job's environment, read whole (a value the buffer cannot hold is read again
// into a larger one); nullopt where unset. Longer than kMaxEnvValueBytes: unset, said in slurmd's
// log, never read truncated.
std::optional<std::string> job_env(spank_t sp, const std::string& name) {
  static std::vector<char> buffer(4096);
  while (true) {
    const spank_err_t read = spank_getenv(sp, name.c_str(), buffer.data(), buffer.size());
    if (read == ESPANK_SUCCESS) return std::string(buffer.data());
    if (read != ESPANK_NOSPACE) return std::nullopt;
    if (buffer.size() >= kMaxEnvValueBytes) {
      slurm_error("gpubind: %s is longer than %zu bytes: read as unset", name.c_str(),
                  kMaxEnvValueBytes);
      return std::nullopt;
    }
    buffer.resize(buffer.size() * 2);
  }
}

EnvLookup env_of(spank_t sp) {
  return [sp](const std::string& name) { return job_env(sp, name); };
}

// The task's environment as slurmstepd holds it until exec.
class SpankTaskEnvironment final : public client::TaskEnvironment {
 public:
  explicit SpankTaskEnvironment(spank_t sp) : sp_(sp) {}
  std::optional<std::string> get(const std::string& name) const override {
    return job_env(sp_, name);
  }
  bool set(const std::string& name, const std::string& value) override {
    return spank_setenv(sp_, name.c_str(), value.c_str(), 1) == ESPANK_SUCCESS;
  }
  void unset(const std::string& name) override { spank_unsetenv(sp_, name.c_str()); }

 private:
  spank_t sp_;
};

// This job's component of a heterogeneous step, where srun said how many there are.
std::optional<int> own_het_component(spank_t sp) {
  const auto count = job_env(sp, client::kHetEnv);
  if (!count) return std::nullopt;
  uint32_t job_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS) return std::nullopt;
  const auto components = parse_whole_number(*count, 1, slurm::kMaxHetComponents);
  if (!components) return std::nullopt;
  return client::het_component(env_of(sp), job_id, static_cast<int>(*components));
}

// --gpu-bind-auto on srun (on this component's part of its command line in a heterogeneous
// step), then the job's (its component's) as recorded on this node, else as passed down from
// sbatch/salloc, then SLURM_GPU_BIND_AUTO, then the site default. nullopt: the step did not ask.
struct RequestedFlags {
  std::string text;
  bool asked = false;  // by the user; false: the site's default
};

// The job's option as this node's prolog recorded it; nullopt where there is no usable record.
std::optional<client::JobOption> recorded_job_option(spank_t sp) {
  uint32_t job_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS) return std::nullopt;
  // The record's writer: slurmd's user, the real user of this slurmstepd.
  auto record = client::read_job_record(state().site.job_records, job_id, getuid());
  if (!record) {
    log_error("job " + std::to_string(job_id) + ": " + record.error().message);
    return std::nullopt;
  }
  return *record;
}

std::optional<RequestedFlags> requested_flags(spank_t sp) {
  // srun replays the job's option from its environment as if given to it: srun's own command line
  // says whether it was.
  std::optional<std::string> replayed;
  if (const auto component = own_het_component(sp)) {
    // Slurm gives every component the option's last value: only this component's own counts.
    if (auto own = job_env(sp, client::het_flags_var(*component)))
      return RequestedFlags{*own, true};
  } else if (char* optarg = nullptr;
             spank_option_getopt(sp, bind_option(), &optarg) == ESPANK_SUCCESS) {
    if (job_env(sp, client::kSrunFlagsEnv)) return RequestedFlags{optarg ? optarg : "", true};
    replayed = optarg ? optarg : "";
  }
  if (const auto recorded = recorded_job_option(sp)) {
    if (recorded->given) return RequestedFlags{recorded->flags, true};
    // Given on another component of the job only: not this one's.
  } else if (replayed) {
    return RequestedFlags{*replayed, true};
  } else if (auto from_job = job_env(sp, kOptionEnv)) {
    return RequestedFlags{*from_job, true};
  }
  if (auto from_user = job_env(sp, kUserEnv)) return RequestedFlags{*from_user, true};
  if (state().site.default_on) return RequestedFlags{"", false};
  return std::nullopt;
}

std::string stepd_lib_path() {
  if (!state().site.stepd_lib.empty()) return state().site.stepd_lib;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&stepd_lib_path), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + kStepdLibName;
  }
  return kStepdLibName;
}

// The user's explicit --cpu-bind/--gpu-bind/--mem-bind for this step: what srun passed down
// (this component's, in a heterogeneous step), else what only a user gives.
ExplicitBinding explicit_binding_of(spank_t sp) {
  const auto component = own_het_component(sp);
  const std::string own = component ? client::het_explicit_var(*component) : client::kExplicitEnv;
  return client::step_explicit_binding(env_of(sp), job_env(sp, own));
}

// srun's messages to the step: a task keeps none of them.
void clear_passed_vars(spank_t sp) {
  const auto het = job_env(sp, client::kHetEnv);
  for (const std::string& name : client::passed_vars(het ? het->c_str() : nullptr))
    spank_unsetenv(sp, name.c_str());
}

// The step as Slurm describes it (client::slurm_step_request), with what Slurm and the user
// fixed for its tasks (client::add_facts: the planner alone decides the tasks); an item Slurm
// cannot give makes the step unplannable.
Result<client::BuiltRequest> build_request(spank_t sp, const UserFlags& flags,
                                           const client::StepFacts& facts) {
  client::StepShape shape;
  uint32_t job_id = 0, step_id = 0, ntasks = 1;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS) {
    return make_error("Slurm did not give the step's job id, step id or task count");
  }
  shape.job_id = job_id;
  shape.step_id = step_id;
  shape.ntasks = static_cast<int>(ntasks);
  char* cores = nullptr;
  if (spank_get_item(sp, S_STEP_ALLOC_CORES, &cores) == ESPANK_SUCCESS && cores)
    shape.allowed_cores = cores;
  int argc = 0;
  char** argv = nullptr;
  if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS && argc > 0 && argv[0])
    shape.command = argv[0];
  // The CPUs the kernel lets the step use, which Slurm's cores narrow to the step's: never
  // slurmstepd's own affinity, which core specialisation confines elsewhere (step_cpus.h).
  const auto allowed = client::cgroup_cpus();
  shape.cpus = allowed ? *allowed : shape.allowed_cores.empty() ? current_affinity() : CpuSet();
  client::BuiltRequest built = client::slurm_step_request(shape, env_of(sp), flags, state().site);
  const std::string not_carried = client::add_facts(facts, built.request);
  if (!not_carried.empty()) log_verbose(not_carried);
  return built;
}

// The daemon's plan, else the in-process fallback (plan_source.h); what an administrator must
// see goes to slurmd's log. A fallback's report waits for task_post_fork, where slurmstepd is
// root again and may write to the daemon's spool.
Result<StepPlan> plan_step_here(const StepRequest& request) {
  // At info, not error: slurmstepd also sends error lines to the job's stderr, where the plan's
  // own warning already says it (once, from local task 0).
  auto planned = client::plan_step(request, state().site, {stepd_lib_path(), ""},
                                   [](const std::string& message) { log_info(message); });
  if (!planned) return planned.error();
  state().fallback_report = std::move(planned->fallback);
  return std::move(planned->plan);
}

bool is_special_step(uint32_t step_id) {
  return step_id == SLURM_BATCH_SCRIPT || step_id == SLURM_EXTERN_CONT ||
         step_id == SLURM_INTERACTIVE_STEP;
}

// Says `message` once per node (from local task 0), on the task's stderr.
void say_once(int local_id, const std::string& message) {
  if (local_id == 0) std::fprintf(stderr, "gpubind: %s\n", message.c_str());
}

}  // namespace

int slurmstepd_user_init(spank_t sp) {
  PluginState& s = state();
  uint32_t step_id = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS || is_special_step(step_id)) {
    return 0;
  }
  const auto requested = requested_flags(sp);
  if (!requested) return 0;
  s.bind = true;
  s.asked = requested->asked;
  if (!s.site_error.empty()) {
    s.failure = s.site_error;
    return 0;
  }
  auto flags = client::parse_user_flags(requested->text);
  if (!flags) {
    s.failure = "--" + std::string(kOptionName) + ": " + flags.error().message;
    return 0;
  }
  if (flags->off) {
    s.bind = false;
    return 0;
  }
  s.flags = *flags;
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  s.host = host;
  s.facts = client::step_facts(env_of(sp), explicit_binding_of(sp), s.site.override_explicit);
  const Result<client::BuiltRequest> built = build_request(sp, s.flags, s.facts);
  if (!built) {
    s.failure = built.error().message;
    log_info("step " + std::to_string(step_id) + ": no plan: " + s.failure);
    return 0;
  }
  s.gpu_note = built->gpu_source;
  const StepRequest* request = &built->request;
  s.step_gpus = request->gpus;
  s.local_tasks = request->ntasks;
  auto plan = plan_step_here(*request);
  if (!plan) {
    s.failure = plan.error().message;
    log_info("job " + std::to_string(request->job_id) + " step " + std::to_string(step_id) +
             ": no plan: " + s.failure);
    return 0;
  }
  s.plan = std::move(*plan);
  // What reading the step said, ahead of the plan's own warnings.
  if (!built->warning.empty()) s.plan.warnings.insert(s.plan.warnings.begin(), built->warning);
  s.planned = true;
  // What the plugin decided, for an admin reading slurmd's log (SlurmdDebug=verbose).
  slurm_verbose("gpubind: job %lu step %u: %d tasks planned by %s, %zu warning(s)", request->job_id,
                step_id, request->ntasks, s.plan.source.c_str(), s.plan.warnings.size());
  // Each warning in slurmd's log too, once per step and node: a node that is not what Slurm's
  // node line or the topology says (idle CPUs, unknown locality) is the admin's to fix, and the
  // step's output is the user's.
  for (const std::string& warning : s.plan.warnings)
    log_info("job " + std::to_string(request->job_id) + " step " + std::to_string(step_id) +
             ": warning: " + warning);
  return 0;
}

namespace {

// A value the outer task's binding set and the new step still holds may be the user's own again
// (the environment cannot tell): it is kept. Said where this step's plan would have set another.
void say_kept_inherited(int local_id, const std::vector<client::EnvEntry>& inherited,
                        const TaskBinding& task) {
  for (const client::EnvEntry& held : inherited) {
    for (const TaskEnv& var : task.env) {
      if (var.name != held.name || !var.only_if_unset || var.value == held.value) continue;
      say_once(local_id, held.name + "=" + held.value +
                             " is kept from the step's environment (set by gpubind in the outer "
                             "task, or by you again); this step's binding would give " +
                             var.value + ": unset it before srun to get that");
    }
  }
}

// Under verbose: a variable of the user's own that the plan would set otherwise is kept, and said
// (OMP_PLACES=threads kept over the omp flag's cores). What an outer binding left is said above.
void say_kept_users(int local_id, const std::vector<client::EnvEntry>& inherited,
                    const TaskBinding& task, const client::EnvLookup& env) {
  for (const TaskEnv& var : task.env) {
    if (!var.only_if_unset) continue;
    const auto from_outer = [&](const client::EnvEntry& e) { return e.name == var.name; };
    if (std::any_of(inherited.begin(), inherited.end(), from_outer)) continue;
    const std::optional<std::string> own = env(var.name);
    if (!own || *own == var.value) continue;
    say_once(local_id,
             var.name + "=" + *own + " is your own: kept (gpubind would set " + var.value + ")");
  }
}

// Says (on the task's stderr) the binding applied, or planned under dry-run.
void say_binding(const PluginState& s, unsigned global_id, const TaskBinding& task,
                 const std::string& notes) {
  const std::string line = client::describe_binding(s.host, global_id, task, s.plan.source) +
                           notes + (s.flags.dry_run ? " (dry run: not applied)" : "");
  std::fprintf(stderr, "%s\n", line.c_str());
}

// The task's own facts just before exec: its local id, the step's task count, its CPUs now.
client::TaskLaunch task_launch(int local_id) {
  client::TaskLaunch task;
  task.local_id = local_id;
  task.local_tasks = state().local_tasks;
  task.affinity = current_affinity();
  return task;
}

// An OCI container step (srun --container: srun exports SLURM_CONTAINER). Slurm before 23.02
// wrote the container's config.json, environment included, when the step was set up, before any
// task started (slurmstepd's container.c): no task variable, Slurm's or gpubind's, reaches the
// container; the task's CPUs and memory policy do (the runtime inherits them). From 23.02 the
// file is written after SPANK's task_init, with the task's final environment.
void say_container_limits(spank_t sp, int local_id) {
#if SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(23, 2, 0)
  const auto bundle = job_env(sp, "SLURM_CONTAINER");
  if (!bundle || bundle->empty()) return;
  say_once(local_id,
           "this step runs in an OCI container (" + excerpt(*bundle) +
               "): this Slurm writes the container's environment before its tasks start, so no "
               "task variable reaches it (neither Slurm's GPU variables nor gpubind's); its CPUs "
               "and memory policy do. Slurm 23.02 and later pass them; here, start the command "
               "inside the container with gpubind-run (docs/launchers.md, \"Containers\")");
#else
  (void)sp;
  (void)local_id;
#endif
}

// Slurm's per-task GPU binding under ConstrainDevices: each task's device cgroup holds its own
// GPUs alone. Said once per node, by the task bound as the planned task whose numbering shows
// it (under Slurm's own GPU binding a task's local id need not be its planned task's).
void say_gpu_isolation(const PluginState& s, const TaskBinding& task,
                       const std::vector<int>& step_gpus, const client::EnvLookup& task_env) {
  if (task.rank != client::task_showing_gpu_isolation(s.plan, step_gpus)) return;
  std::vector<int> gpus;
  for (const auto& gpu : task.gpus)
    if (gpu.node_index >= 0) gpus.push_back(gpu.node_index);
  if (!client::gpus_isolated_per_task(task_env, gpus, step_gpus)) return;
  std::fprintf(stderr,
               "gpubind: warning: Slurm gave each task a device cgroup of its own GPUs "
               "(--gpus-per-task or --gpu-bind, under the site's ConstrainDevices): the tasks "
               "cannot open each other's GPUs, so GPU peer-to-peer between them (CUDA IPC, NCCL "
               "and RCCL P2P, GPU-aware MPI) fails or goes through host memory. Add "
               "--gres-flags=allow-task-sharing (Slurm 23.11.4 and later), or ask for --gpus=N "
               "without a per-task option and let gpubind share the GPUs out\n");
}

// Says what was kept from Slurm and the user, once per node.
void say_what_stays(const PluginState& s, int local_id, const LaunchDecision& decision) {
  const ExplicitBinding& user = s.facts.user;
  if (decision.slurm_chose_gpus && !user.gpu.empty() && user.gpu != "none") {
    say_once(local_id, "--gpu-bind=" + user.gpu +
                           " given: tasks keep the GPUs Slurm chose; gpubind binds their cores "
                           "and NICs next to them");
  }
  if (s.facts.slurm_cpus) {
    say_once(local_id, "--cpu-bind=" + user.cpu +
                           " given: tasks keep Slurm's CPU binding; gpubind sets their GPU and "
                           "NIC variables");
  }
  if (s.facts.slurm_memory) {
    say_once(local_id, "--mem-bind=" + user.mem +
                           " given: tasks keep Slurm's memory binding; gpubind binds their CPUs "
                           "and sets their GPU and NIC variables");
  }
  if (s.facts.slurm_gpu_vars)
    say_once(local_id, "--gpu-bind=none given: the GPU visibility variables stay Slurm's");
}

}  // namespace

int slurmstepd_task_post_fork() {
  PluginState& s = state();
  if (!s.fallback_report) return 0;
  // Once per step on this node, whichever task comes first; as root, into root's spool.
  if (!client::leave_fallback_report(*s.fallback_report))
    log_verbose("the fallback report for the daemon's metrics could not be left in " +
                s.fallback_report->spool);
  s.fallback_report.reset();
  return 0;
}

int slurmstepd_task_init(spank_t sp) {
  const PluginState& s = state();
  clear_passed_vars(sp);
  SpankTaskEnvironment task_env(sp);
  // What an outer task's binding left (a step started inside a bound task), bound or not: its
  // GPUBIND_* information goes; the values it set stay, as the user may have exported them again.
  const std::vector<client::EnvEntry> inherited = client::inherited_values(task_env.lookup());
  client::clear_binding_info(task_env);
  if (!s.bind) return 0;
  int local_id = -1;
  uint32_t global_id = 0;
  if (spank_get_item(sp, S_TASK_ID, &local_id) != ESPANK_SUCCESS) local_id = -1;
  if (spank_get_item(sp, S_TASK_GLOBAL_ID, &global_id) != ESPANK_SUCCESS) global_id = 0;
  // In a heterogeneous step Slurm's task id counts within the component; SLURM_PROCID is the
  // rank the user's program sees across all components.
  if (auto procid = job_env(sp, slurm::kProcId)) {
    if (const auto rank = parse_whole_number(*procid, 0, UINT32_MAX))
      global_id = static_cast<uint32_t>(*rank);
  }
  // A site's default never fails a job: only a step whose user asked for binding fails.
  const bool fail_task = s.site.on_error == OnError::kFail && s.asked;
  auto keep_slurms = [&](const std::string& why) {
    if (fail_task) {
      log_error("cannot bind task " + std::to_string(global_id) + ": " + why);
      return -1;
    }
    std::fprintf(stderr, "gpubind: task %u: %s; Slurm's binding is kept\n", global_id, why.c_str());
    return 0;
  };
  if (!s.planned) {
    if (fail_task) return keep_slurms(s.failure);
    say_once(local_id, s.failure + "; Slurm's binding is kept");
    return 0;
  }
  std::vector<int> step_indices;
  for (const auto& gpu : s.step_gpus)
    step_indices.push_back(gpu.first);
  const LaunchDecision decision = client::decide_launch(
      s.plan, s.facts, step_indices, task_env.lookup(), task_launch(local_id), s.flags.no_gpu_env);
  if (!decision.apply) return keep_slurms(decision.why);
  TaskBinding task = s.plan.tasks[decision.planned];
  if (decision.cpus_bound_at_launch)
    task = client::with_launch_cpus(task, current_affinity().to_list());
  say_what_stays(s, local_id, decision);
  say_container_limits(sp, local_id);
  if (decision.slurm_chose_gpus) say_gpu_isolation(s, task, step_indices, task_env.lookup());
  for (const std::string& warning : s.plan.warnings)
    say_once(local_id, "warning: " + warning);
  say_kept_inherited(local_id, inherited, task);
  if (s.flags.verbose) say_kept_users(local_id, inherited, task, task_env.lookup());
  slurm_debug("%s",
              printable(client::describe_binding(s.host, global_id, task, s.plan.source)).c_str());
  // Slurm's --cpu-bind=verbose printed the mask it set: the task is told what replaced it.
  const bool slurm_said_mask =
      job_env(sp, slurm::kCpuBindVerbose) == "verbose" && !s.facts.slurm_cpus;
  if (s.flags.verbose || s.flags.dry_run || slurm_said_mask) {
    if (s.flags.verbose && !s.gpu_note.empty()) say_once(local_id, s.gpu_note);
    say_binding(
        s, global_id, task,
        std::string(decision.slurm_chose_gpus ? " (GPUs chosen by Slurm)" : "") +
            (s.facts.slurm_cpus ? " (CPUs bound by Slurm)" : "") +
            (s.facts.slurm_memory ? " (memory bound by Slurm)" : "") +
            (slurm_said_mask && !s.flags.dry_run ? " (replaces the CPU mask Slurm set)" : ""));
  }
  if (s.flags.dry_run) return 0;
  const Result<client::Applied> bound = client::apply_binding(task, task_env, decision.options);
  if (!bound) return keep_slurms(bound.error().message);
  if (!bound->memory_refused.empty())
    std::fprintf(stderr, "gpubind: task %u: %s; memory stays where the kernel puts it\n", global_id,
                 bound->memory_refused.c_str());
  return 0;
}

}  // namespace gpubind::spank
