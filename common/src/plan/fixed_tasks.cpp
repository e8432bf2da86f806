// Phase 0, what was fixed: the GPUs and CPUs Slurm, the launcher or the user gave tasks before
// gpubind planned (PlanRequest::fixed). The planner keeps them as given and places the rest
// around them, so every variable it renders names what each task really runs on.
#include <algorithm>
#include <numeric>
#include <vector>

#include "plan/plan_state.h"

namespace gpubind::planning {
namespace {

bool gpus_fixed(const FixedTask& task) {
  return !task.gpus.empty();
}
bool cpus_fixed(const FixedTask& task) {
  return task.cpus.has_value();
}

}  // namespace

// Fixed GPUs and CPUs come for every task or for none (Slurm's lists are reused in turn), name
// step GPUs, and CPUs of the step.
Status Planner::check_fixed() {
  const std::vector<FixedTask>& fixed = request_.fixed;
  if (fixed.empty()) return Ok{};
  if (static_cast<int>(fixed.size()) != ntasks_) {
    return make_error("fixed bindings are given for " + counted(fixed.size(), "task") +
                      ", not for each of the step's " + counted(ntasks_, "task"));
  }
  fixed_gpus_ = gpus_fixed(fixed[0]);
  fixed_cpus_ = cpus_fixed(fixed[0]);
  const int gpus = static_cast<int>(step_gpus_.size());
  const CpuSet step = request_.allowed_cpus.value_or(all_pus_) & all_pus_;
  for (int task = 0; task < ntasks_; ++task) {
    const FixedTask& mine = fixed[task];
    if (gpus_fixed(mine) != fixed_gpus_ || cpus_fixed(mine) != fixed_cpus_) {
      return make_error("task " + std::to_string(task) +
                        ": fixed GPUs or CPUs must be given for every task or for none");
    }
    for (int g : mine.gpus) {
      if (unplaced_ || g < 0 || g >= gpus) {
        return node_mismatch("task " + std::to_string(task) + ": fixed GPU " + std::to_string(g) +
                             " is not one of the step's " + counted(gpus, "placed GPU"));
      }
    }
    if (mine.cpus && (*mine.cpus & step).empty()) {
      return node_mismatch("task " + std::to_string(task) + ": fixed CPUs " + mine.cpus->to_list() +
                           " lie outside the step's CPUs " + step.to_list());
    }
  }
  return Ok{};
}

// Step GPU `g` to `task`, as fixed before planning (explained so).
void Planner::give_fixed_gpu(int task, int g) {
  task_gpus_[task].push_back(g);
  if (!explain_) return;
  GpuChoice choice;
  choice.step_index = g;
  choice.reason = GpuReason::kFixed;
  record_gpu(task, choice);
}

// Each task's fixed GPUs, as its launcher gave them.
void Planner::take_fixed_gpus() {
  task_gpus_.assign(ntasks_, {});
  task_tiles_.assign(ntasks_, -1);
  for (int task = 0; task < ntasks_; ++task)
    for (int g : request_.fixed[task].gpus)
      give_fixed_gpu(task, g);
}

// Slurm's closest or single over each task's fixed CPUs (request_.slurm_gpu_rule): the GPUs Slurm
// gives it, by the same rule, where the rule decides them for every task: closest every step GPU
// whose domain holds one of the task's CPUs (none: the step's first, Slurm's "first device in the
// allocation"), single the one such GPU. False, with nothing changed, where single leaves a task
// several or none (which Slurm picks differs between releases).
bool Planner::take_slurm_rule_gpus() {
  const SlurmGpuRule rule = request_.slurm_gpu_rule;
  if (rule == SlurmGpuRule::kNone || step_gpus_.empty() || unplaced_) return false;
  std::vector<int> by_node(step_gpus_.size());  // Slurm counts GPUs in node order
  std::iota(by_node.begin(), by_node.end(), 0);
  std::sort(by_node.begin(), by_node.end(),
            [&](int a, int b) { return step_gpus_[a].node_index < step_gpus_[b].node_index; });
  std::vector<std::vector<int>> chosen(static_cast<size_t>(ntasks_));
  for (int task = 0; task < ntasks_; ++task) {
    const CpuSet& cpus = *request_.fixed[task].cpus;
    std::vector<int>& mine = chosen[static_cast<size_t>(task)];
    for (int g : by_node)
      if (gpu_locality(g).cpus.intersects(cpus)) mine.push_back(g);
    if (rule == SlurmGpuRule::kClosest && mine.empty()) mine.push_back(by_node.front());
    if (rule == SlurmGpuRule::kSingle && mine.size() != 1) return false;
  }
  task_gpus_.assign(ntasks_, {});
  for (int task = 0; task < ntasks_; ++task)
    for (int g : chosen[static_cast<size_t>(task)])
      give_fixed_gpu(task, g);
  return true;
}

// Each task's fixed CPUs as usable units (those on the cores of its CPUs, whichever threads it
// was bound to: a second thread the policy's smt leaves out sits where its core does), for the
// GPU choice and the task's home; the task keeps its whole fixed set (build_task_plans).
void Planner::take_fixed_cores() {
  task_cores_.assign(ntasks_, {});
  for (int task = 0; task < ntasks_; ++task) {
    const CpuSet& cpus = *request_.fixed[task].cpus;
    for (int u = 0; u < static_cast<int>(usable_.size()); ++u) {
      const std::vector<int>& core_pus = topo_.cores[usable_[u].core].pus;
      if (std::none_of(core_pus.begin(), core_pus.end(), [&](int pu) { return cpus.test(pu); }))
        continue;
      task_cores_[task].push_back(u);
      ++core_owners_[u];
      record_grant(task, u, CoreSource::kFixed);
    }
  }
}

// A task with fixed CPUs has all of them, reserved or beyond `smt` ones included, as bound; where
// none lies on a usable core (only reserved ones), its home is that of its first core.
void Planner::keep_fixed_cpus(int task, TaskPlan& plan) const {
  const CpuSet step = request_.allowed_cpus.value_or(all_pus_) & all_pus_;
  plan.cpus = *request_.fixed[task].cpus & step;
  int cores = 0;
  const Core* first = nullptr;
  for (const Core& core : topo_.cores) {
    if (std::none_of(core.pus.begin(), core.pus.end(), [&](int pu) { return plan.cpus.test(pu); }))
      continue;
    ++cores;
    if (!first) first = &core;
  }
  plan.ncores = cores;
  if (task_cores_[task].empty() && first) {
    if (first->numa_index >= 0 && !request_.cpus_bound_at_launch)
      plan.numa_node = topo_.numa_os_number(first->numa_index);
    plan.l3_index = first->l3_index;
  }
}

// The step's placed GPUs and their domains' CPUs.
void Planner::list_gpu_places() {
  if (unplaced_) return;
  plan_.gpu_places.reserve(step_gpus_.size());
  for (size_t g = 0; g < step_gpus_.size(); ++g)
    plan_.gpu_places.push_back({step_gpus_[g].node_index, gpu_locality(static_cast<int>(g)).cpus});
}

}  // namespace gpubind::planning
