// Phase 1, usable cores: the step's CPUs and cores minus the policy's reserved CPUs, trimmed to
// `smt` threads per core; single threads become units of their own when tasks outnumber cores.
#include <algorithm>

#include "plan/plan_state.h"

namespace gpubind::planning {

// Slurm's node line and this node disagreeing (threads per core after a BIOS change, cores
// numbered otherwise): a confined step's CPUs (its cgroup's) lie off the cores Slurm gave it, as
// this node's topology numbers them, and those CPUs would sit idle. Said with what to compare.
void Planner::warn_cores_and_cpus_disagree(const CpuSet& step_cpus) {
  if (!request_.allowed_cores || !request_.allowed_cpus || step_cpus == all_pus_) return;
  CpuSet on_cores;
  for (const Core& core : topo_.cores) {
    if (!request_.allowed_cores->test(core.index)) continue;
    for (int pu : core.pus)
      on_cores.set(pu);
  }
  const CpuSet off = step_cpus.minus(on_cores);
  if (off.empty() || !step_cpus.intersects(on_cores)) return;  // none at all: refused below
  warn("the step's CPUs " + step_cpus.to_list() + " include " + off.to_list() +
       ", which are not on its cores " + request_.allowed_cores->to_list() +
       " as this node's topology numbers them: Slurm's node line and the node disagree (threads "
       "per core, or core order); those CPUs stay idle. Compare `slurmd -C` with `gpubindctl "
       "topology` and fix the node line");
}

Status Planner::find_usable_cores() {
  all_pus_ = topo_.all_pus();
  const CpuSet& all = all_pus_;
  const CpuSet allowed = request_.allowed_cpus.value_or(all);
  const CpuSet unknown = allowed.minus(all);
  if (!unknown.empty()) {
    warn("allowed CPUs " + unknown.to_list() + " are not in the node's topology; ignored");
  }
  const CpuSet& reserved = reserved_ = reserved_cpus(topo_, policy_);
  const int smt = request_.smt.value_or(policy_.smt);
  if (request_.allowed_cores &&
      request_.allowed_cores->last() >= static_cast<int>(topo_.cores.size())) {
    warn("allowed cores " +
         request_.allowed_cores->minus(CpuSet::range(0, static_cast<int>(topo_.cores.size()) - 1))
             .to_list() +
         " are not in the node's topology (" + std::to_string(topo_.cores.size()) +
         " cores); ignored");
  }
  warn_cores_and_cpus_disagree(allowed & all);
  usable_.reserve(topo_.cores.size());
  usable_pus_.reserve(all.count());
  for (const Core& core : topo_.cores) {
    if (request_.allowed_cores && !request_.allowed_cores->test(core.index)) continue;
    UsableCore usable;
    usable.core = core.index;
    usable.package = core.package_index;
    usable.numa = core.numa_index;
    usable.l3 = core.l3_index;
    usable.pu_begin = static_cast<int>(usable_pus_.size());
    for (int pu : core.pus) {
      if (!allowed.test(pu) || reserved.test(pu)) continue;
      if (smt > 0 && usable.pu_count == smt) {
        if (!explain_) break;
        explain_->smt_trimmed.set(pu);
        continue;
      }
      usable_pus_.push_back(pu);
      ++usable.pu_count;
    }
    if (usable.pu_count == 0) continue;
    usable.first_pu = usable_pus_[usable.pu_begin];
    usable_.push_back(usable);
  }
  if (usable_.empty()) {
    if (!allowed.empty() && !allowed.intersects(all)) {
      return node_mismatch("none of the step's CPUs (" + allowed.to_list() +
                           ") is in the node's topology (" + all.to_list() + ")");
    }
    std::string step = "CPUs " + (allowed & all).to_list();
    if (request_.allowed_cores) step += " on cores " + request_.allowed_cores->to_list();
    // Only the reserved CPUs the step holds: the node's whole reserved list says nothing here.
    CpuSet on_cores;  // the step's CPUs on its cores
    for (const Core& core : topo_.cores) {
      if (request_.allowed_cores && !request_.allowed_cores->test(core.index)) continue;
      for (int pu : core.pus)
        if (allowed.test(pu)) on_cores.set(pu);
    }
    const CpuSet held = on_cores & reserved;
    if (on_cores.empty()) {
      return make_error("no usable CPUs: the step's " + step +
                        " share no CPU (Slurm's cores, as this node's topology numbers them, "
                        "hold none of those CPUs: compare `slurmd -C` with `gpubindctl topology`)");
    }
    return make_error("no usable CPUs: the step's " + step +
                      " are all reserved by the site policy (reserved: " + held.to_list() + ")");
  }
  if (explain_) explain_reserved(allowed & all, smt);
  split_cores_into_threads();
  core_owners_.assign(usable_.size(), 0);
  return Ok{};
}

// The step's CPUs and which of them no task may have, by the policy line that keeps them.
void Planner::explain_reserved(const CpuSet& step, int smt) {
  explain_->step_cpus = step;
  explain_->smt = smt;
  explain_->reserved_listed = step & policy_.reserved_cpus;
  explain_->reserved_first_core_per_l3 = (step & reserved_).minus(policy_.reserved_cpus);
  if (!request_.allowed_cores) return;
  for (const Core& core : topo_.cores) {
    if (request_.allowed_cores->test(core.index)) continue;
    for (int pu : core.pus)
      if (step.test(pu)) explain_->outside_cores.set(pu);
  }
}

// More tasks than cores but no more than hardware threads: tasks get threads of their own before
// any thread is shared, so each thread becomes a unit of its own (its core's threads side by side).
void Planner::split_cores_into_threads() {
  const int threads = static_cast<int>(usable_pus_.size());
  if (ntasks_ <= static_cast<int>(usable_.size()) || ntasks_ > threads) return;
  Scratch<UsableCore> units;
  units.reserve(threads);
  for (const UsableCore& core : usable_) {
    for (int i = 0; i < core.pu_count; ++i) {
      UsableCore unit = core;
      unit.pu_begin = core.pu_begin + i;
      unit.pu_count = 1;
      unit.first_pu = usable_pus_[unit.pu_begin];
      units.push_back(unit);
    }
  }
  warn(counted(ntasks_, "task") + " on " + counted(usable_.size(), "usable core") +
       ": some tasks share cores, on hardware threads of their own");
  if (explain_) explain_->threads_as_units = true;
  usable_ = std::move(units);
}

int Planner::cores_wanted_per_task() {
  if (request_.cpus_per_task == 0) return 0;
  int threads = 1;
  for (const UsableCore& core : usable_)
    threads = std::max(threads, core.pu_count);
  const int wanted = (request_.cpus_per_task + threads - 1) / threads;
  const int usable = static_cast<int>(usable_.size());
  if (wanted * ntasks_ <= usable) return wanted;
  const int fitted = std::max(1, usable / ntasks_);
  warn("cpus-per-task " + std::to_string(request_.cpus_per_task) + " needs " +
       counted(wanted * ntasks_, "core") + " for " + counted(ntasks_, "task") + " but only " +
       std::to_string(usable) + (usable == 1 ? " is" : " are") + " usable; each task gets " +
       counted(fitted, "core"));
  return fitted;
}

}  // namespace gpubind::planning
