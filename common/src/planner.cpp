// The planner works in four steps:
//   1. usable cores: the step's CPUs minus reserved ones, trimmed to `smt` threads per core;
//   2. GPUs per task: consecutive ranks share a GPU, or a task gets GPUs that sit together;
//   3. cores per task: tasks with the same home domain (their GPUs' L3/NUMA, or the whole node
//      for order=cpu) split it along package > NUMA > L3 > core, so a task stays inside one L3
//      whenever its share fits; shortfalls spill to the nearest free L3 that holds them whole;
//   4. NIC per GPU (nearest, balanced);
// then each task's environment is rendered from the finished task plans.
//
// Each step lives in a file of its own under plan/ (plan_state.h lists them); this file checks
// the request, runs the steps in order and turns their results into task plans.
#include "gpubind/planner.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "plan/env_render.h"
#include "plan/plan_state.h"

namespace gpubind {
namespace planning {
namespace {

// The most frequent value (the smallest on ties), -1 for none. Sorts `values`.
int majority(Scratch<int>& values) {
  std::sort(values.begin(), values.end());
  int best = -1, best_count = 0;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j < values.size() && values[j] == values[i])
      ++j;
    if (static_cast<int>(j - i) > best_count) {
      best = values[i];
      best_count = static_cast<int>(j - i);
    }
    i = j;
  }
  return best;
}

}  // namespace

// "1 task", "2 tasks".
std::string counted(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// A request naming CPUs or GPUs this topology does not have.
Error node_mismatch(std::string message) {
  Error error = make_error(std::move(message));
  error.node_mismatch = true;
  return error;
}

Status Planner::check_request() {
  ntasks_ = request_.ntasks;
  if (ntasks_ < 1)
    return make_error("ntasks must be at least 1 (got " + std::to_string(ntasks_) + ")");
  if (ntasks_ > kMaxTasks) {
    return make_error("ntasks " + std::to_string(ntasks_) + " exceeds the limit of " +
                      std::to_string(kMaxTasks) + " tasks per node");
  }
  for (auto [value, name] : {std::pair{request_.cpus_per_task, "cpus-per-task"},
                             std::pair{request_.gpus_per_task, "gpus-per-task"},
                             std::pair{request_.tasks_per_gpu, "tasks-per-gpu"}}) {
    if (value < 0) return make_error(std::string(name) + " must not be negative");
  }
  if (request_.smt && *request_.smt < 0) return make_error("smt must not be negative");
  order_ = request_.order.value_or(policy_.order);
  if (explain_) {
    *explain_ = PlanExplanation{};
    explain_->tasks.resize(ntasks_);
    for (int task = 0; task < ntasks_; ++task)
      explain_->tasks[task].rank = task;
    explain_->order_from = request_.order ? OrderFrom::kRequest : OrderFrom::kPolicy;
    explain_->policy_source = policy_.source;
  }
  return Ok{};
}

Result<Plan> Planner::run() {
  if (auto s = check_request(); !s) return s.error();
  if (auto s = find_usable_cores(); !s) return s.error();
  if (auto s = resolve_step_gpus(); !s) return s.error();
  if (auto s = check_fixed(); !s) return s.error();
  find_gpu_domains();
  task_gpus_.assign(ntasks_, {});
  task_tiles_.assign(ntasks_, -1);
  // Fixed GPUs: cores follow them (order=gpu's way). Fixed CPUs: GPUs follow them (order=cpu's).
  if (fixed_gpus_ || fixed_cpus_) {
    order_ = fixed_gpus_ ? Order::kGpu : Order::kCpu;
    if (explain_)
      explain_->order_from = fixed_gpus_ ? OrderFrom::kFixedGpus : OrderFrom::kFixedCpus;
  }
  if (step_gpus_.empty()) {
    if (explain_ && order_ != Order::kCpu) explain_->order_from = OrderFrom::kNoGpus;
    order_ = Order::kCpu;
  }
  if (explain_) explain_->order = order_;

  if (fixed_gpus_) {
    take_fixed_gpus();
  } else if (order_ == Order::kGpu) {
    assign_gpus_by_rank();
  }
  if (fixed_cpus_) {
    take_fixed_cores();
    // Slurm's closest/single by those CPUs: its GPUs for each task, as if fixed.
    if (!fixed_gpus_ && take_slurm_rule_gpus()) fixed_gpus_ = true;
  } else {
    assign_cores();
  }
  if (order_ == Order::kCpu && !fixed_gpus_ && !step_gpus_.empty()) assign_gpus_by_cores();
  build_task_plans();
  hand_out_unplaced_gpus();
  if (order_ == Order::kGpu || fixed_cpus_) warn_tasks_far_from_gpus();
  assign_nics();
  warn_unknown_locality();
  warn_shared_gpus();
  list_gpu_places();
  plan_.facts_kept = has_facts(request_);
  render_env(topo_, policy_, request_, plan_.tasks, plan_.warnings, explain_, plan_.gpu_places);
  if (explain_) finish_explanation();
  return std::move(plan_);
}

// Each task's CPUs, GPUs and home NUMA node and L3, from the units and step GPUs it was given.
void Planner::build_task_plans() {
  plan_.tasks.resize(ntasks_);
  Scratch<int> numas, l3s, cores;  // scratch lists, reused across tasks
  for (int task = 0; task < ntasks_; ++task) {
    TaskPlan& plan = plan_.tasks[task];
    plan.rank = task;
    numas.clear();
    l3s.clear();
    cores.clear();
    for (int u : task_cores_[task]) {
      const UsableCore& core = usable_[u];
      for (int i = 0; i < core.pu_count; ++i)
        plan.cpus.set(usable_pus_[core.pu_begin + i]);
      numas.push_back(core.numa);
      l3s.push_back(core.l3);
      cores.push_back(core.core);
    }
    // Distinct: a task may hold single threads of its cores (units of one core are adjacent).
    plan.ncores = static_cast<int>(std::unique(cores.begin(), cores.end()) - cores.begin());
    if (fixed_cpus_) keep_fixed_cpus(task, plan);
    // Memory goes to the first GPU's NUMA node (and L3) when the task has cores there, even if
    // its spare cores lie mostly elsewhere.
    const Locality* gpu = task_gpus_[task].empty() ? nullptr : &gpu_locality(task_gpus_[task][0]);
    auto holds = [](const Scratch<int>& values, int v) {
      return v >= 0 && std::find(values.begin(), values.end(), v) != values.end();
    };
    int numa = gpu && holds(numas, gpu->numa_index) ? gpu->numa_index : majority(numas);
    if (request_.cpus_bound_at_launch) numa = -1;  // not where the task will run
    plan.numa_node = numa >= 0 ? topo_.numa_os_number(numa) : -1;
    if (explain_ && numa >= 0) {
      explain_->tasks[task].memory =
          gpu && numa == gpu->numa_index ? MemoryReason::kGpuNuma : MemoryReason::kMostCpus;
    }
    plan.l3_index = gpu && holds(l3s, gpu->l3_index) ? gpu->l3_index : majority(l3s);
    plan.gpus.reserve(task_gpus_[task].size());
    for (int g : task_gpus_[task]) {
      const StepGpu& step_gpu = step_gpus_[g];
      const Gpu& node_gpu = topo_.gpus[step_gpu.node_index];
      const int tile = task_tiles_[task];
      plan.gpus.push_back({g, step_gpu.node_index, tile, device_token(g, tile), node_gpu.pci_bus_id,
                           node_gpu.vendor});
    }
  }
}

// The recorded grants as CPU sets per task, in the order the phases gave them (the last grant of
// a core counts: one given up to a task that had none is that task's); and who shares what.
void Planner::finish_explanation() {
  std::stable_sort(grant_records_.begin(), grant_records_.end(),
                   [](const GrantRecord& a, const GrantRecord& b) {
                     return std::tie(a.task, a.unit) < std::tie(b.task, b.unit);
                   });
  Scratch<int> holders(step_gpus_.size(), 0);
  for (int task = 0; task < ntasks_; ++task)
    for (int g : task_gpus_[task])
      ++holders[g];
  for (int task = 0; task < ntasks_; ++task) {
    TaskExplanation& mine = explain_->tasks[task];
    for (int u : task_cores_[task]) {
      auto last =
          std::upper_bound(grant_records_.begin(), grant_records_.end(), std::pair{task, u},
                           [](const auto& key, const GrantRecord& r) {
                             return std::tie(key.first, key.second) < std::tie(r.task, r.unit);
                           });
      if (last == grant_records_.begin() || (last - 1)->task != task || (last - 1)->unit != u)
        continue;  // not recorded: cannot happen, every phase records what it gives
      const GrantRecord& r = *(last - 1);
      auto same = [&](const CoreGrant& g) {
        return g.source == r.source && g.nearness == r.nearness && g.domain_gpu == r.domain_gpu;
      };
      auto grant = std::find_if(mine.cores.begin(), mine.cores.end(), same);
      if (grant == mine.cores.end()) {
        mine.cores.push_back({r.source, {}, r.domain_gpu, r.nearness});
        grant = mine.cores.end() - 1;
      }
      const UsableCore& unit = usable_[u];
      for (int i = 0; i < unit.pu_count; ++i)
        grant->cpus.set(usable_pus_[unit.pu_begin + i]);
      if (core_owners_[u] > 1) mine.shares_cores = true;
    }
    std::stable_sort(mine.cores.begin(), mine.cores.end(),
                     [](const CoreGrant& a, const CoreGrant& b) { return a.source < b.source; });
    for (GpuChoice& choice : mine.gpus) {
      if (choice.reason != GpuReason::kUnplaced) choice.sharers = holders[choice.step_index];
    }
  }
}

}  // namespace planning

CpuSet reserved_cpus(const Topology& topology, const SitePolicy& policy) {
  CpuSet reserved = policy.reserved_cpus;
  if (policy.reserve_first_core_per_l3) {
    std::vector<bool> seen(std::max(topology.l3_count, 0), false);
    for (const Core& core : topology.cores) {
      if (core.l3_index < 0 || core.l3_index >= static_cast<int>(seen.size()) ||
          seen[core.l3_index])
        continue;
      seen[core.l3_index] = true;
      for (int pu : core.pus)
        reserved.set(pu);
    }
  }
  return reserved;
}

Result<Plan> make_plan(const Topology& topology, const SitePolicy& policy,
                       const PlanRequest& request) {
  return planning::Planner(topology, policy, request).run();
}

Result<Plan> make_plan(const Topology& topology, const SitePolicy& policy,
                       const PlanRequest& request, PlanExplanation& explanation) {
  return planning::Planner(topology, policy, request, &explanation).run();
}

}  // namespace gpubind
