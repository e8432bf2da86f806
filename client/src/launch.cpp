#include "gpubind/client/launch.h"

#include <algorithm>

#include "gpubind/client/slurm_gpu_choice.h"
#include "gpubind/parse.h"
#include "gpubind/slurm_words.h"

namespace gpubind::client {
namespace {

std::string joined(const std::vector<int>& values) {
  std::string text;
  for (int value : values)
    text += (text.empty() ? "" : ",") + std::to_string(value);
  return text;
}

// The planned task's node GPUs, a tiled card once, sorted.
std::vector<int> planned_gpus(const TaskBinding& task) {
  std::vector<int> gpus;
  for (const TaskGpuInfo& gpu : task.gpus)
    gpus.push_back(gpu.node_index);
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  return gpus;
}

LaunchDecision keep_slurms(std::string why) {
  LaunchDecision decision;
  decision.why = std::move(why);
  return decision;
}

}  // namespace

ExplicitBinding step_explicit_binding(const EnvLookup& env,
                                      const std::optional<std::string>& passed) {
  ExplicitBinding user;
  if (passed) user = decode_explicit(*passed);
  const auto type = env(slurm::kCpuBindType);
  if (user.cpu.empty() && type && cpu_bind_type_is_explicit(*type))
    user.cpu = slurm::without_verbosity(env(slurm::kCpuBind).value_or(*type));
  const auto mem_type = env(slurm::kMemBindType);
  if (user.mem.empty() && mem_type && mem_bind_type_is_explicit(*mem_type)) {
    // "map_mem:" with its list in SLURM_MEM_BIND_LIST; "local" and "rank" stand alone.
    user.mem = *mem_type + env(slurm::kMemBindList).value_or("");
  }
  return user;
}

StepFacts step_facts(const EnvLookup& env, const ExplicitBinding& user, bool override_explicit) {
  StepFacts facts;
  facts.user = user;
  facts.gpu_binding = slurm_gpu_binding(env(slurm::kTresBind));
  // Before the tasks start the step may not hold Slurm's TRES binding yet: the user's own
  // --gpu-bind says it, else --gpus-per-task ("2" or "a100:2"), which implies per_task unless
  // another --gpu-bind was given (none leaves every task the step's GPUs).
  if (facts.gpu_binding.empty()) facts.gpu_binding = user.gpu;
  if (facts.gpu_binding.empty()) {
    if (const int per_task = count_from_env(env, slurm::kGpusPerTask); per_task > 0)
      facts.gpu_binding = "per_task:" + std::to_string(per_task);
  }
  if (facts.gpu_binding == "none") facts.gpu_binding.clear();
  facts.gpu_id_base = relative_gpu_ids(env);
  facts.slurm_cpus = !user.cpu.empty() && !override_explicit;
  facts.cpus_listed = facts.slurm_cpus && cpu_bind_lists(user.cpu, 1).has_value();
  facts.slurm_memory = !user.mem.empty() && !override_explicit;
  facts.slurm_gpu_vars = user.gpu == "none" && !override_explicit;
  return facts;
}

std::optional<std::vector<CpuSet>> cpu_bind_lists(const std::string& cpu_bind, int tasks) {
  if (tasks < 1) return std::nullopt;
  const size_t colon = cpu_bind.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string kind = cpu_bind.substr(0, colon);
  if (kind != "mask_cpu" && kind != "map_cpu") return std::nullopt;
  std::vector<CpuSet> entries;
  for (const std::string& entry : split_list(cpu_bind.substr(colon + 1))) {
    if (kind == "mask_cpu") {
      auto set = CpuSet::parse_mask(entry);
      if (!set || set->empty()) return std::nullopt;
      entries.push_back(*set);
    } else {
      const auto cpu = parse_whole_number(entry, 0, CpuSet::kMaxCpu);
      if (!cpu) return std::nullopt;
      entries.push_back(CpuSet::of({static_cast<int>(*cpu)}));
    }
  }
  if (entries.empty()) return std::nullopt;
  std::vector<CpuSet> per_task;
  for (int task = 0; task < tasks; ++task)
    per_task.push_back(entries[static_cast<size_t>(task) % entries.size()]);
  return per_task;
}

std::string add_facts(const StepFacts& facts, StepRequest& request) {
  std::string not_carried;
  request.gpus_named_by_slurm = slurm_names_gpus(facts);
  std::vector<FixedTask> fixed(static_cast<size_t>(std::max(request.ntasks, 0)));
  bool any = false;
  if (!facts.gpu_binding.empty() && !gpus_chosen_by_cpus(facts.gpu_binding)) {
    std::vector<int> step;
    for (const auto& gpu : request.gpus)
      step.push_back(gpu.first);
    const auto map = slurm_gpu_map(facts.gpu_binding, step, request.ntasks, facts.gpu_id_base);
    if (map) {
      for (size_t task = 0; task < map->size(); ++task) {
        for (int gpu : (*map)[task]) {
          const auto at = std::find(step.begin(), step.end(), gpu);
          fixed[task].gpus.push_back(static_cast<int>(at - step.begin()));
        }
      }
      any = true;
    } else {
      not_carried = "Slurm's GPU binding " + facts.gpu_binding + " cannot be read here";
    }
  }
  if (facts.slurm_cpus) {
    const auto lists =
        facts.cpus_listed ? cpu_bind_lists(facts.user.cpu, request.ntasks) : std::nullopt;
    if (lists) {
      for (size_t task = 0; task < lists->size(); ++task)
        fixed[task].cpus = (*lists)[task].to_list();
      any = true;
      // Slurm chooses closest's and single's GPUs by those CPUs: the planner follows its rule.
      if (gpus_chosen_by_cpus(facts.gpu_binding))
        request.slurm_gpu_rule = facts.gpu_binding.rfind("closest", 0) == 0 ? "closest" : "single";
    } else {
      request.cpus_bound_at_launch = true;  // Slurm chooses them as each task starts
    }
  }
  if (any) request.fixed = std::move(fixed);
  return not_carried;
}

bool slurm_names_gpus(const StepFacts& facts) {
  return facts.slurm_gpu_vars || !facts.gpu_binding.empty();
}

LaunchDecision decide_launch(const StepPlan& plan, const StepFacts& facts,
                             const std::vector<int>& step_gpus, const EnvLookup& task_env,
                             const TaskLaunch& task, bool no_gpu_env) {
  if (task.local_id < 0) return keep_slurms("Slurm did not give the task's local id");
  if (task.local_id >= static_cast<int>(plan.tasks.size()))
    return keep_slurms("no plan for local task " + std::to_string(task.local_id));
  const TaskBinding& planned = plan.tasks[task.local_id];
  LaunchDecision decision;
  const auto choice = slurm_task_gpus(task_env, step_gpus, task.local_id, task.local_tasks, plan,
                                      task.affinity, facts.gpu_id_base);
  if (choice) {
    const std::string binding = choice->binding.empty() ? "its GPU binding" : choice->binding;
    if (!choice->identified) {
      return keep_slurms("which GPUs Slurm chose for it (" + binding +
                         ") cannot be told here: it keeps Slurm's CPU and GPU binding");
    }
    std::vector<int> given = choice->gpus;
    std::sort(given.begin(), given.end());
    if (given != planned_gpus(planned)) {
      return keep_slurms("Slurm gave it GPUs " + joined(given) + " (" + binding +
                         "), the plan GPUs " + joined(planned_gpus(planned)) +
                         ": it keeps Slurm's CPU and GPU binding");
    }
    decision.slurm_chose_gpus = true;
  }
  if (facts.slurm_cpus) {
    // Planned with the CPUs the user's list names: they must be the ones Slurm bound. The one
    // parse of the task's CPU list on the launch side (apply then binds none).
    decision.cpus_bound_at_launch = !facts.cpus_listed;
    if (facts.cpus_listed) {
      const auto planned_cpus = CpuSet::parse_list(planned.cpus);
      if (!planned_cpus || *planned_cpus != task.affinity) {
        return keep_slurms("Slurm bound it to CPUs " + task.affinity.to_list() + ", not " +
                           planned.cpus + " as --cpu-bind=" + facts.user.cpu +
                           " read: it keeps Slurm's binding");
      }
    }
  }
  decision.apply = true;
  decision.planned = task.local_id;
  decision.options.bind_cpus = !facts.slurm_cpus;
  decision.options.prefer_memory = !facts.slurm_memory;
  // Where Slurm names the task's GPUs (its per-task choice, --gpu-bind=none), its variables stay.
  const bool slurms = decision.slurm_chose_gpus || slurm_names_gpus(facts);
  decision.options.align_other_visibility = !no_gpu_env && !slurms;
  decision.options.set_gpu_visibility = !slurms;
  return decision;
}

}  // namespace gpubind::client
