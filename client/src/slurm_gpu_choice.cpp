#include "gpubind/client/slurm_gpu_choice.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <map>
#include <numeric>
#include <set>

#include "gpubind/cpuset.h"
#include "gpubind/parse.h"
#include "gpubind/slurm_words.h"

namespace gpubind::client {
namespace {

std::optional<long> parse_number(const std::string& text, int base) {
  return parse_whole_number(text, 0, 1'000'000, base);
}

// "0,1,4-5" -> {0, 1, 4, 5}; nullopt for anything else.
std::optional<std::vector<int>> parse_indices(const std::string& text) {
  std::vector<int> out;
  for (const std::string& part : split_list(text)) {
    const size_t dash = part.find('-');
    const auto first = parse_number(part.substr(0, dash), 10);
    const auto last = dash == std::string::npos ? first : parse_number(part.substr(dash + 1), 10);
    if (!first || !last || *last < *first || *last - *first > 4096) return std::nullopt;
    for (long i = *first; i <= *last; ++i)
      out.push_back(static_cast<int>(i));
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::vector<int> sorted(std::vector<int> values) {
  std::sort(values.begin(), values.end());
  return values;
}

// "1*2,0" -> {"1", "1", "0"}: Slurm's repeat count on map_gpu and mask_gpu entries.
std::optional<std::vector<std::string>> expand_repeats(const std::string& list) {
  std::vector<std::string> out;
  for (const std::string& entry : split_list(list)) {
    const size_t star = entry.find('*');
    long count = 1;
    if (star != std::string::npos) {
      const auto parsed = parse_number(entry.substr(star + 1), 10);
      if (!parsed || *parsed < 1 || *parsed > 4096) return std::nullopt;
      count = *parsed;
    }
    out.insert(out.end(), static_cast<size_t>(count), entry.substr(0, star));
  }
  if (out.empty()) return std::nullopt;
  return out;
}

bool in_step(const std::vector<int>& step_gpus, int gpu) {
  return std::find(step_gpus.begin(), step_gpus.end(), gpu) != step_gpus.end();
}

// The k smallest of the step's GPUs: what a narrowed task's SLURM_STEP_GPUS lists under
// ConstrainDevices, whichever GPUs it holds.
std::vector<int> first_gpus(const std::vector<int>& step_gpus, size_t k) {
  std::vector<int> first = sorted(step_gpus);
  first.resize(std::min(k, first.size()));
  return first;
}

// What Slurm gives a task whose CPUs are near `near` of the step's GPUs, where that is one answer
// for every release: closest gives all of them, or the step's first GPU when none is near
// (Slurm's "Binding to the first device in the allocation instead"); single gives one GPU, which
// is that one only when one is near.
std::optional<std::vector<int>> slurm_choice_by_cpus(const std::string& binding,
                                                     const std::vector<int>& near,
                                                     const std::vector<int>& step_gpus) {
  if (binding.rfind("closest", 0) == 0) return near.empty() ? first_gpus(step_gpus, 1) : near;
  if (near.size() == 1) return std::vector<int>{near.front()};
  return std::nullopt;
}

// A closest or single task's GPUs: SLURM_STEP_GPUS where it names anything but the step's first
// GPUs (only node indices read so), else those near its CPUs where Slurm's choice follows from
// them and agrees with how many Slurm listed.
void identify_by_cpus(const StepPlan& plan, const std::vector<int>& step_gpus,
                      const CpuSet& task_cpus, SlurmTaskGpus& choice) {
  const std::vector<int> listed = sorted(choice.gpus);
  if (listed != first_gpus(step_gpus, listed.size())) {
    choice.identified = true;
    return;
  }
  if (task_cpus.empty()) return;
  const auto near = gpus_near_cpus(plan, step_gpus, task_cpus);
  if (!near) return;
  const auto chosen = slurm_choice_by_cpus(choice.binding, *near, step_gpus);
  if (!chosen || chosen->size() != listed.size()) return;
  choice.gpus = *chosen;
  choice.identified = true;
}

}  // namespace

std::optional<std::vector<std::vector<int>>> slurm_gpu_map(const std::string& binding,
                                                           const std::vector<int>& step_gpus,
                                                           int local_tasks,
                                                           const std::vector<int>& id_base) {
  // A GPU id of the binding as a node index: itself, or under ConstrainDevices the id-th of the
  // job's GPUs; -1 for none.
  const auto node_gpu = [&](long id) -> int {
    if (id_base.empty()) return static_cast<int>(id);
    return id >= 0 && id < static_cast<long>(id_base.size()) ? id_base[static_cast<size_t>(id)]
                                                             : -1;
  };
  const size_t colon = binding.find(':');
  if (colon == std::string::npos || step_gpus.empty() || local_tasks < 1) return std::nullopt;
  const std::string kind = binding.substr(0, colon), list = binding.substr(colon + 1);
  std::vector<std::vector<int>> map(static_cast<size_t>(local_tasks));
  if (kind == "per_task") {
    const auto count = parse_number(list, 10);
    if (!count || *count < 1) return std::nullopt;
    const std::vector<int> ordered = sorted(step_gpus);
    for (int task = 0; task < local_tasks; ++task)
      for (long i = 0; i < *count && i < static_cast<long>(ordered.size()); ++i)
        map[task].push_back(ordered[(task * *count + i) % ordered.size()]);
    return map;
  }
  if (kind != "map_gpu" && kind != "mask_gpu") return std::nullopt;
  const auto entries = expand_repeats(list);
  if (!entries) return std::nullopt;
  for (int task = 0; task < local_tasks; ++task) {
    const std::string& entry = (*entries)[task % entries->size()];
    if (kind == "map_gpu") {
      const bool hex = entry.rfind("0x", 0) == 0 || entry.rfind("0X", 0) == 0;
      const auto gpu = parse_number(hex ? entry.substr(2) : entry, hex ? 16 : 10);
      if (!gpu) return std::nullopt;
      if (in_step(step_gpus, node_gpu(*gpu))) map[task].push_back(node_gpu(*gpu));
    } else {
      const bool prefixed = entry.rfind("0x", 0) == 0 || entry.rfind("0X", 0) == 0;
      const std::string digits = prefixed ? entry.substr(2) : entry;
      const auto mask = parse_whole_number(digits, 0, 0xFFFFFFF, 16);
      if (!mask || digits.size() > 7) return std::nullopt;
      for (int gpu = 0; gpu < 28; ++gpu)
        if (((*mask >> gpu) & 1) && in_step(step_gpus, node_gpu(gpu)))
          map[task].push_back(node_gpu(gpu));
    }
    // Slurm binds such a task its own way (the first GPU of the step): not computed here.
    if (map[task].empty()) return std::nullopt;
  }
  return map;
}

std::optional<std::vector<int>> gpus_near_cpus(const StepPlan& plan,
                                               const std::vector<int>& step_gpus,
                                               const CpuSet& cpus) {
  std::vector<int> near;
  for (int gpu : sorted(step_gpus)) {
    const auto place = std::find_if(plan.gpu_places.begin(), plan.gpu_places.end(),
                                    [&](const GpuPlace& p) { return p.node_index == gpu; });
    if (place == plan.gpu_places.end()) return std::nullopt;
    const auto domain = CpuSet::parse_list(place->cpus);
    if (!domain) return std::nullopt;
    if (domain->intersects(cpus)) near.push_back(gpu);
  }
  return near;
}

std::optional<SlurmTaskGpus> slurm_task_gpus(const EnvLookup& task_env,
                                             const std::vector<int>& step_gpus, int local_id,
                                             int local_tasks, const StepPlan& plan,
                                             const CpuSet& task_cpus,
                                             const std::vector<int>& id_base) {
  const std::optional<std::string> listed = task_env(slurm::kStepGpus);
  if (!listed || step_gpus.empty()) return std::nullopt;
  const auto gpus = parse_indices(*listed);
  if (!gpus || sorted(*gpus) == sorted(step_gpus)) return std::nullopt;
  SlurmTaskGpus choice;
  choice.gpus = *gpus;
  choice.binding = slurm_gpu_binding(task_env(slurm::kTresBind));
  if (gpus_chosen_by_cpus(choice.binding)) {
    identify_by_cpus(plan, step_gpus, task_cpus, choice);
    return choice;
  }
  const auto map = slurm_gpu_map(choice.binding, step_gpus, local_tasks, id_base);
  if (!map || local_id < 0 || local_id >= local_tasks) return choice;  // not identified
  // Under ConstrainDevices a narrowed task's SLURM_STEP_GPUS names the step's first GPUs, not
  // its own; Slurm's binding names them. The count must agree.
  if ((*map)[local_id].size() != gpus->size()) return choice;
  choice.gpus = (*map)[local_id];
  choice.identified = true;
  return choice;
}

std::string slurm_gpu_binding(const std::optional<std::string>& tres_bind) {
  if (!tres_bind) return "";
  const size_t at = tres_bind->find("gpu:");
  if (at == std::string::npos) return "";
  std::string binding = tres_bind->substr(at + 4);
  binding = binding.substr(0, binding.find(';'));
  return slurm::without_verbosity(binding);
}

std::vector<int> relative_gpu_ids(const EnvLookup& env) {
  const auto step = env(slurm::kStepGpus);
  const auto visibility = slurm_visibility_var(env);
  if (!step || !visibility) return {};
  const auto global = parse_indices(*step);
  const auto listed = parse_indices(visibility->value);
  if (!global || !listed || global->size() != listed->size()) return {};
  std::vector<int> first(listed->size());
  std::iota(first.begin(), first.end(), 0);
  if (sorted(*listed) != first || sorted(*global) == first) return {};
  // Numbered from 0 while the step's GPUs are others: ConstrainDevices. Ids count the job's.
  const auto job = env(slurm::kJobGpus);
  const auto job_gpus = job ? parse_indices(*job) : std::nullopt;
  return sorted(job_gpus ? *job_gpus : *global);
}

namespace {

std::vector<int> gpus_of(const TaskBinding& task) {
  std::vector<int> gpus;
  for (const TaskGpuInfo& gpu : task.gpus)
    if (gpu.node_index >= 0) gpus.push_back(gpu.node_index);
  return sorted(gpus);
}

}  // namespace

bool gpus_isolated_per_task(const EnvLookup& task_env, std::vector<int> task_gpus,
                            std::vector<int> step_gpus) {
  const auto visibility = slurm_visibility_var(task_env);
  const auto listed = visibility ? parse_indices(visibility->value) : std::nullopt;
  if (!listed || task_gpus.empty() || listed->size() != task_gpus.size()) return false;
  task_gpus = sorted(task_gpus);
  std::vector<int> from_zero(task_gpus.size());
  std::iota(from_zero.begin(), from_zero.end(), 0);
  return sorted(*listed) == from_zero && task_gpus != from_zero &&
         task_gpus != first_gpus(step_gpus, task_gpus.size());
}

int task_showing_gpu_isolation(const StepPlan& plan, std::vector<int> step_gpus) {
  if (plan.tasks.size() < 2) return -1;  // one task has no peer to reach
  for (const TaskBinding& task : plan.tasks) {
    const std::vector<int> gpus = gpus_of(task);
    std::vector<int> from_zero(gpus.size());
    std::iota(from_zero.begin(), from_zero.end(), 0);
    if (!gpus.empty() && gpus != from_zero && gpus != first_gpus(step_gpus, gpus.size()))
      return task.rank;
  }
  return -1;
}

bool gpus_chosen_by_cpus(const std::string& binding) {
  const std::string kind = binding.substr(0, binding.find(':'));
  return kind == "closest" || kind == "single";
}

}  // namespace gpubind::client
