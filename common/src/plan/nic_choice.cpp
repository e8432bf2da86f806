// Phase 4, NIC choice: each node GPU's nearest NIC (equals taken round robin), a task's NICs
// those of its GPUs in GPU order, led by the one fewest earlier tasks lead with; tasks without
// GPUs take the least used NIC nearest their cores.
#include <algorithm>
#include <array>

#include "plan/plan_state.h"

namespace gpubind::planning {
namespace {

// Each node GPU's NIC, whatever the step: the i-th of the GPUs with the same equally nearest NICs
// takes the i-th of them, round robin. Jobs sharing a node thus spread over the NICs instead of
// all taking the first, and a task of two such GPUs gets two NICs.
// `equally_near`, when given, gets how many NICs each GPU had to choose from.
Scratch<int> gpu_nics(const Topology& topo, const DomainSizes& sizes,
                      Scratch<int>* equally_near = nullptr) {
  const int gpus = static_cast<int>(topo.gpus.size());
  Scratch<Scratch<int>> nearest(gpus);
  for (int g = 0; g < gpus; ++g) {
    int best = DomainSizes::kFar + 1;
    for (const Nic& nic : topo.nics) {
      const int d = sizes.distance(place_of(topo.gpus[g].locality), place_of(nic.locality));
      if (d < best) nearest[g].clear();
      if (d <= best) {
        best = d;
        nearest[g].push_back(nic.index);
      }
    }
  }
  Scratch<int> nic(gpus, -1);
  for (int g = 0; g < gpus; ++g) {
    if (nearest[g].empty()) continue;
    const auto before = std::count(nearest.begin(), nearest.begin() + g, nearest[g]);
    nic[g] = nearest[g][before % nearest[g].size()];
  }
  if (equally_near) {
    equally_near->resize(gpus);
    for (int g = 0; g < gpus; ++g)
      (*equally_near)[g] = static_cast<int>(nearest[g].size());
  }
  return nic;
}

}  // namespace

void Planner::assign_nics() {
  if (topo_.nics.empty()) return;
  Scratch<int> equally_near;
  const Scratch<int> gpu_nic = gpu_nics(topo_, sizes_, explain_ ? &equally_near : nullptr);
  Scratch<int> load(topo_.nics.size(), 0);
  for (int task = 0; task < ntasks_; ++task) {
    for (int g : task_gpus_[task])
      ++load[gpu_nic[step_gpus_[g].node_index]];
  }
  // Tasks without GPUs: the nearest NIC to their cores, the least used among equals.
  auto nearest_nic = [&](const Place& from) {
    int best = -1;
    std::array<int, 3> best_key{};
    for (size_t n = 0; n < topo_.nics.size(); ++n) {
      const std::array<int, 3> key = {distance(from, place_of(topo_.nics[n].locality)), load[n],
                                      static_cast<int>(n)};
      if (best < 0 || key < best_key) {
        best = static_cast<int>(n);
        best_key = key;
      }
    }
    ++load[best];
    return best;
  };
  // A task's NICs: its GPUs' NICs, in GPU order, each once. The first (where one NIC per task is
  // used, as by Cray MPICH) is, of those as near its first GPU as that GPU's own, the one fewest
  // earlier tasks lead with: tasks of several GPUs sharing NICs do not all lead with one.
  Scratch<int> leading(topo_.nics.size(), 0);
  for (int task = 0; task < ntasks_; ++task) {
    TaskPlan& plan = plan_.tasks[task];
    if (task_gpus_[task].empty()) plan.nic_indices.push_back(nearest_nic(task_place(task)));
    for (int g : task_gpus_[task]) {
      const int nic = gpu_nic[step_gpus_[g].node_index];
      if (std::find(plan.nic_indices.begin(), plan.nic_indices.end(), nic) ==
          plan.nic_indices.end())
        plan.nic_indices.push_back(nic);
    }
    if (!task_gpus_[task].empty()) {
      // Among the NICs as near the task's first GPU as its own.
      const Place gpu = place_of(gpu_locality(task_gpus_[task][0]));
      const int near = distance(gpu, place_of(topo_.nics[plan.nic_indices.front()].locality));
      auto first = plan.nic_indices.begin();
      for (auto it = plan.nic_indices.begin(); it != plan.nic_indices.end(); ++it) {
        if (leading[*it] < leading[*first] &&
            distance(gpu, place_of(topo_.nics[*it].locality)) == near)
          first = it;
      }
      std::rotate(plan.nic_indices.begin(), first, first + 1);
    }
    ++leading[plan.nic_indices.front()];
    plan.nic_index = plan.nic_indices.front();
    if (explain_) explain_nics(task, gpu_nic, equally_near);
    for (int n : plan.nic_indices)
      plan.nic_names += (plan.nic_names.empty() ? "" : ",") + topo_.nics[n].name;
  }
}

// Each NIC of the task: the GPU it serves (the first of the task's GPUs whose NIC it is) and how
// near, or, for a task without GPUs, how near its cores.
void Planner::explain_nics(int task, const Scratch<int>& gpu_nic,
                           const Scratch<int>& equally_near) {
  const TaskPlan& plan = plan_.tasks[task];
  for (int n : plan.nic_indices) {
    NicChoice choice;
    choice.nic_index = n;
    choice.leads = n == plan.nic_index;
    const Place nic = place_of(topo_.nics[n].locality);
    for (int g : task_gpus_[task]) {
      const int node_gpu = step_gpus_[g].node_index;
      if (gpu_nic[node_gpu] != n) continue;
      choice.gpu_step_index = g;
      choice.nearness = sizes_.nearness(place_of(gpu_locality(g)), nic);
      choice.equally_near = equally_near[node_gpu];
      break;
    }
    if (choice.gpu_step_index < 0) choice.nearness = sizes_.nearness(task_place(task), nic);
    explain_->tasks[task].nics.push_back(choice);
  }
}

}  // namespace gpubind::planning
