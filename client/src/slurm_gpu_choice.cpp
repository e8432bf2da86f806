#include "gpubind/client/slurm_gpu_choice.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <map>
#include <set>

#include "gpubind/cpuset.h"
#include "gpubind/parse.h"

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

// The GPU part of SLURMD_TRES_BIND ("gpu:verbose,map_gpu:1,0" -> "map_gpu:1,0").
std::string gpu_binding(const std::optional<std::string>& tres_bind) {
  if (!tres_bind) return "";
  const size_t at = tres_bind->find("gpu:");
  if (at == std::string::npos) return "";
  std::string binding = tres_bind->substr(at + 4);
  binding = binding.substr(0, binding.find(';'));
  if (binding.rfind("verbose,", 0) == 0) binding.erase(0, 8);
  return binding;
}

// A planned task's GPUs as node indices, one per GPU of the task in its order: the plan's own
// node index for each (a PVC tile's is its card's). The tokens cannot say it where the plan
// numbers GPUs within their vendor (a node of NVIDIA and AMD GPUs) or names tiles (Level Zero's
// FLAT hierarchy); only a plan without node indices is read through the step's token table.
std::vector<int> planned_gpus(const TaskBinding& task,
                              const std::vector<std::pair<int, std::string>>& step_table) {
  std::vector<int> gpus;
  const bool indexed =
      !task.gpus.empty() && std::all_of(task.gpus.begin(), task.gpus.end(),
                                        [](const TaskGpuInfo& gpu) { return gpu.node_index >= 0; });
  if (indexed) {
    for (const TaskGpuInfo& gpu : task.gpus)
      gpus.push_back(gpu.node_index);
    return gpus;
  }
  for (const std::string& token : split_list(task.tokens)) {
    for (const auto& [index, step_token] : step_table)
      if (step_token == token) gpus.push_back(index);
  }
  return gpus;
}

const std::string* env_value(const TaskBinding& task, const std::string& name) {
  for (const TaskEnv& var : task.env)
    if (var.name == name) return &var.value;
  return nullptr;
}

// Whether the plan placed `task` in the L3 of its GPUs (it could not where the step has too few
// CPUs there); true for GPUs of another kind of domain, where the plan does not say.
bool in_gpus_l3(const TaskBinding& task) {
  return std::all_of(task.gpus.begin(), task.gpus.end(), [&](const TaskGpuInfo& gpu) {
    return gpu.locality.rfind("L3 ", 0) != 0 ||
           gpu.locality == "L3 " + std::to_string(task.l3_index);
  });
}

// closest and single: Slurm chooses the task's GPUs by its CPUs and each GPU's cores.
bool chosen_by_cpus(const std::string& binding) {
  const std::string kind = binding.substr(0, binding.find(':'));
  return kind == "closest" || kind == "single";
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

// Each local task's CPUs as Slurm bound them (SLURM_CPU_BIND_TYPE mask_cpu or map_cpu, with
// SLURM_CPU_BIND_LIST, entries reused in turn as Slurm does); nullopt for any other binding.
std::optional<std::vector<CpuSet>> slurm_task_cpus(const EnvLookup& env, int local_tasks) {
  const auto type = env("SLURM_CPU_BIND_TYPE");
  const auto list = env("SLURM_CPU_BIND_LIST");
  if (!type || !list || local_tasks < 1) return std::nullopt;
  const bool masks = type->find("mask_cpu") != std::string::npos;
  if (!masks && type->find("map_cpu") == std::string::npos) return std::nullopt;
  std::vector<CpuSet> entries;
  for (const std::string& entry : split_list(*list)) {
    if (masks) {
      auto set = CpuSet::parse_mask(entry);
      if (!set) return std::nullopt;
      entries.push_back(*set);
    } else {
      const auto cpu = parse_number(entry, 10);
      if (!cpu || *cpu > CpuSet::kMaxCpu) return std::nullopt;
      entries.push_back(CpuSet::of({static_cast<int>(*cpu)}));
    }
  }
  if (entries.empty()) return std::nullopt;
  std::vector<CpuSet> tasks;
  for (int task = 0; task < local_tasks; ++task)
    tasks.push_back(entries[static_cast<size_t>(task) % entries.size()]);
  return tasks;
}

// Counts the local tasks before `local_id`, and in all, for which `same(task_cpus)` holds, by
// each task's CPUs as Slurm bound them; -1 where those are not known or disagree with this
// task's own.
template <typename Same>
void count_same(const EnvLookup& env, int local_id, int local_tasks, const CpuSet& own_cpus,
                Same same, SlurmTaskGpus& choice) {
  const auto cpus = slurm_task_cpus(env, local_tasks);
  if (!cpus || local_id < 0 || local_id >= local_tasks || (*cpus)[local_id] != own_cpus) return;
  int before = 0, total = 0;
  for (int task = 0; task < local_tasks; ++task) {
    const auto result = same((*cpus)[task]);
    if (!result) return;
    if (!*result) continue;
    ++total;
    if (task < local_id) ++before;
  }
  choice.same_before = before;
  choice.same_total = total;
}

// A closest or single task's GPUs: SLURM_STEP_GPUS where it names anything but the step's first
// GPUs (only node indices read so), else those near its CPUs where Slurm's choice follows from
// them, else, for single, the GPUs near its CPUs it lies among.
void identify_by_cpus(const EnvLookup& env, const std::vector<int>& step_gpus, int local_id,
                      int local_tasks, const StepPlan& plan, const std::string& task_cpus,
                      SlurmTaskGpus& choice) {
  const auto own_cpus = CpuSet::parse_list(task_cpus);
  if (!own_cpus || own_cpus->empty()) return;
  const auto near_of = [&](const CpuSet& cpus) {
    return gpus_near_cpus(plan, step_gpus, cpus.to_list());
  };
  const auto chosen_for = [&](const CpuSet& cpus) -> std::optional<std::vector<int>> {
    const auto near = near_of(cpus);
    if (!near) return std::nullopt;
    return slurm_choice_by_cpus(choice.binding, *near, step_gpus);
  };
  const std::vector<int> listed = sorted(choice.gpus);
  std::optional<std::vector<int>> gpus;
  if (listed != first_gpus(step_gpus, listed.size()))
    gpus = choice.gpus;
  else if (auto chosen = chosen_for(*own_cpus); chosen && chosen->size() == listed.size())
    gpus = chosen;  // as many as Slurm listed, or the plan does not see what Slurm saw
  if (gpus) {
    choice.gpus = *gpus;
    choice.identified = true;
    const std::vector<int> own = sorted(*gpus);
    count_same(
        env, local_id, local_tasks, *own_cpus,
        [&](const CpuSet& cpus) -> std::optional<bool> {
          if (cpus == *own_cpus) return true;
          const auto other = chosen_for(cpus);
          if (!other) return std::nullopt;
          return sorted(*other) == own;
        },
        choice);
    return;
  }
  // single picks among the GPUs near (closest would have given them all, as many as listed).
  const auto near = near_of(*own_cpus);
  if (choice.binding.rfind("single", 0) != 0 || !near || near->size() <= choice.gpus.size()) return;
  choice.among = *near;
  count_same(
      env, local_id, local_tasks, *own_cpus,
      [&](const CpuSet& cpus) -> std::optional<bool> {
        const auto other = near_of(cpus);
        if (!other) return std::nullopt;
        return *other == *near;
      },
      choice);
}

}  // namespace

std::optional<std::vector<std::vector<int>>> slurm_gpu_map(const std::string& binding,
                                                           const std::vector<int>& step_gpus,
                                                           int local_tasks) {
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
      if (in_step(step_gpus, static_cast<int>(*gpu))) map[task].push_back(static_cast<int>(*gpu));
    } else {
      const bool prefixed = entry.rfind("0x", 0) == 0 || entry.rfind("0X", 0) == 0;
      const std::string digits = prefixed ? entry.substr(2) : entry;
      const auto mask = parse_whole_number(digits, 0, 0xFFFFFFF, 16);
      if (!mask || digits.size() > 7) return std::nullopt;
      for (int gpu = 0; gpu < 28; ++gpu)
        if (((*mask >> gpu) & 1) && in_step(step_gpus, gpu)) map[task].push_back(gpu);
    }
    // Slurm binds such a task its own way (the first GPU of the step): not computed here.
    if (map[task].empty()) return std::nullopt;
  }
  return map;
}

std::optional<std::vector<int>> gpus_near_cpus(const StepPlan& plan,
                                               const std::vector<int>& step_gpus,
                                               const std::string& cpus) {
  const auto wanted = CpuSet::parse_list(cpus);
  if (!wanted) return std::nullopt;
  std::map<int, std::string> domain_of;  // node GPU index -> its locality in the plan
  std::map<std::string, CpuSet> domain_cpus;
  CpuSet placed;  // the CPUs of some domain
  for (const TaskBinding& task : plan.tasks) {
    const auto task_cpus = CpuSet::parse_list(task.cpus);
    if (!task_cpus) return std::nullopt;
    std::set<std::string> domains;
    for (const TaskGpuInfo& gpu : task.gpus) {
      if (gpu.node_index < 0 || gpu.locality.empty()) continue;
      domain_of[gpu.node_index] = gpu.locality;
      domains.insert(gpu.locality);
    }
    // The plan says which L3 a task's CPUs lie in, even where its GPU lies elsewhere (too few of
    // the step's CPUs there); of a domain of another kind, only that it holds the task's GPUs.
    if (task.l3_index >= 0) {
      domain_cpus["L3 " + std::to_string(task.l3_index)] |= *task_cpus;
      placed |= *task_cpus;
    }
    if (domains.size() == 1 && domains.begin()->rfind("L3 ", 0) != 0) {
      domain_cpus[*domains.begin()] |= *task_cpus;
      placed |= *task_cpus;
    }
  }
  std::vector<int> near;
  for (int gpu : sorted(step_gpus)) {
    const auto domain = domain_of.find(gpu);
    if (domain == domain_of.end()) return std::nullopt;
    if (domain->second == "machine" || domain_cpus[domain->second].intersects(*wanted))
      near.push_back(gpu);
  }
  // No GPU near: Slurm's answer, if every CPU is known to lie outside their domains.
  if (near.empty() && (*wanted & placed) != *wanted) return std::nullopt;
  return near;
}

std::optional<SlurmTaskGpus> slurm_task_gpus(const EnvLookup& task_env,
                                             const std::vector<int>& step_gpus, int local_id,
                                             int local_tasks, const StepPlan& plan,
                                             const std::string& task_cpus) {
  const std::optional<std::string> listed = task_env("SLURM_STEP_GPUS");
  if (!listed || step_gpus.empty()) return std::nullopt;
  const auto gpus = parse_indices(*listed);
  if (!gpus || sorted(*gpus) == sorted(step_gpus)) return std::nullopt;
  SlurmTaskGpus choice;
  choice.gpus = *gpus;
  choice.binding = gpu_binding(task_env("SLURMD_TRES_BIND"));
  if (chosen_by_cpus(choice.binding)) {
    identify_by_cpus(task_env, step_gpus, local_id, local_tasks, plan, task_cpus, choice);
    return choice;
  }
  const auto map = slurm_gpu_map(choice.binding, step_gpus, local_tasks);
  if (!map || local_id < 0 || local_id >= local_tasks) return choice;  // not identified
  // Under ConstrainDevices a narrowed task's SLURM_STEP_GPUS names the step's first GPUs, not
  // its own; Slurm's binding names them. The count must agree.
  const std::vector<int> computed = sorted((*map)[local_id]);
  if (computed.size() != gpus->size()) return choice;
  choice.gpus = (*map)[local_id];
  choice.identified = true;
  choice.same_before = choice.same_total = 0;
  for (int task = 0; task < local_tasks; ++task) {
    if (sorted((*map)[task]) != computed) continue;
    ++choice.same_total;
    if (task < local_id) ++choice.same_before;
  }
  return choice;
}

KeptBinding keep_slurm_gpus(const StepPlan& plan,
                            const std::vector<std::pair<int, std::string>>& step_table,
                            const SlurmTaskGpus& choice, int local_id,
                            const std::string& slurm_tokens) {
  // Placed by its GPUs, or where only their domain is known, by the GPUs it lies among.
  const std::vector<int> wanted = sorted(choice.identified ? choice.gpus : choice.among);
  std::map<int, std::string> pci_of;     // node GPU index -> bus id, from every planned task
  std::map<int, TaskGpuInfo> described;  // and what the verbose line says of it
  std::vector<const TaskBinding*> exact, touching;
  for (const TaskBinding& task : plan.tasks) {
    const std::vector<int> in_order = planned_gpus(task, step_table);
    if (const std::string* pci = env_value(task, "GPUBIND_GPU_PCI")) {
      const std::vector<std::string> ids = split_list(*pci);
      if (ids.size() == in_order.size())
        for (size_t i = 0; i < ids.size(); ++i)
          pci_of[in_order[i]] = ids[i];
    }
    if (task.gpus.size() == in_order.size())
      for (size_t i = 0; i < in_order.size(); ++i)
        described[in_order[i]] = task.gpus[i];
    // Tiles of one card are that card once.
    std::vector<int> gpus = sorted(in_order);
    gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
    if (gpus == wanted) exact.push_back(&task);
    const bool shares = std::any_of(gpus.begin(), gpus.end(), [&](int gpu) {
      return std::binary_search(wanted.begin(), wanted.end(), gpu);
    });
    if (shares) touching.push_back(&task);
  }
  // Of those, the tasks the plan could place in their GPUs' L3, where there are any.
  std::vector<const TaskBinding*> placed_near;
  std::copy_if(touching.begin(), touching.end(), std::back_inserter(placed_near),
               [](const TaskBinding* task) { return in_gpus_l3(*task); });
  if (!placed_near.empty()) touching = placed_near;

  KeptBinding kept;
  const TaskBinding* base = nullptr;
  std::string cpus;
  if (!exact.empty()) {
    // The k-th task Slurm gave these GPUs takes the k-th planned task holding them.
    const int k = choice.same_before >= 0 ? choice.same_before : local_id;
    base = exact[static_cast<size_t>(k) % exact.size()];
    kept.basis = KeptBinding::Basis::kSameGpus;
    cpus = base->cpus;
    kept.cores_may_be_shared =
        choice.same_total < 0 || choice.same_total > static_cast<int>(exact.size());
  } else if (!touching.empty()) {
    // No planned task holds exactly these GPUs: the cores of all that hold one of them.
    base = touching.front();
    kept.basis = KeptBinding::Basis::kSomeOfItsGpus;
    CpuSet all;
    for (const TaskBinding* task : touching)
      if (auto set = CpuSet::parse_list(task->cpus)) all |= *set;
    cpus = all.to_list();
    kept.cores_may_be_shared = true;
  } else if (local_id >= 0 && local_id < static_cast<int>(plan.tasks.size())) {
    base = &plan.tasks[local_id];
    kept.basis = KeptBinding::Basis::kOwnTask;
    cpus = base->cpus;
    kept.cores_may_be_shared = true;
  } else {
    return kept;  // no plan to take cores from: an empty binding
  }

  kept.planned_rank = base->rank;
  TaskBinding& task = kept.task;
  task = *base;
  task.rank = local_id;
  task.cpus = cpus;
  task.env.clear();
  for (const TaskEnv& var : base->env) {
    if (is_gpu_visibility_var(var.name) || var.name == "GPUBIND_GPUS" ||
        var.name == "GPUBIND_GPU_PCI" || var.name == "GPUBIND_CPUS" ||
        var.name == "GPUBIND_LOCAL_RANK")
      continue;
    task.env.push_back(var);
  }
  task.env.push_back({"GPUBIND_LOCAL_RANK", std::to_string(local_id), false});
  task.env.push_back({"GPUBIND_CPUS", cpus, false});
  task.env.push_back({"GPUBIND_GPUS", slurm_tokens, false});
  std::string pcis;
  bool every_pci = choice.identified;
  for (int gpu : choice.gpus) {
    const auto found = pci_of.find(gpu);
    if (found == pci_of.end()) {
      every_pci = false;
      continue;
    }
    pcis += (pcis.empty() ? "" : ",") + found->second;
  }
  if (every_pci && !pcis.empty()) task.env.push_back({"GPUBIND_GPU_PCI", pcis, false});

  const std::vector<std::string> tokens = split_list(slurm_tokens);
  task.gpus.clear();
  for (size_t i = 0; i < choice.gpus.size(); ++i) {
    const auto found = choice.identified ? described.find(choice.gpus[i]) : described.end();
    TaskGpuInfo gpu = found != described.end() ? found->second : TaskGpuInfo{};
    gpu.token = tokens.size() == choice.gpus.size() ? tokens[i] : std::to_string(choice.gpus[i]);
    task.gpus.push_back(std::move(gpu));
  }
  task.tokens = slurm_tokens;
  return kept;
}

}  // namespace gpubind::client
