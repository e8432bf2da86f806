// Properties every plan must have, checked independently of how the planner works.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "gpubind/planner.h"

namespace gpubind::testing {

// The core of every PU, from the topology.
inline std::map<int, int> core_of_pu(const Topology& t) {
  std::map<int, int> core_of;
  for (const Core& core : t.cores) {
    for (int pu : core.pus)
      core_of[pu] = core.index;
  }
  return core_of;
}

inline ::testing::AssertionResult no_core_shared(const Topology& t, const Plan& plan) {
  const auto core_of = core_of_pu(t);
  std::map<int, int> owner;
  for (const TaskPlan& task : plan.tasks) {
    std::set<int> cores;
    task.cpus.for_each([&](int pu) { cores.insert(core_of.at(pu)); });
    for (int core : cores) {
      auto [it, fresh] = owner.emplace(core, task.rank);
      if (!fresh) {
        return ::testing::AssertionFailure()
               << "core " << core << " given to ranks " << it->second << " and " << task.rank;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// A canonical text of everything in a plan, to compare plans.
inline std::string fingerprint(const Plan& plan) {
  std::ostringstream out;
  for (const TaskPlan& task : plan.tasks) {
    out << task.rank << " " << task.cpus.to_list() << " nic=" << task.nic_index
        << " numa=" << task.numa_node << " l3=" << task.l3_index << " gpus=";
    for (const TaskGpu& gpu : task.gpus)
      out << gpu.node_index << "/" << gpu.token << ",";
    for (const EnvVar var : task.env)
      out << " " << var.name << "=" << var.value;
    out << "\n";
  }
  for (const std::string& w : plan.warnings)
    out << "warning: " << w << "\n";
  return out.str();
}

// The CPUs a step may use: its CPUs (default: all), limited to its cores when Slurm names them.
inline CpuSet step_cpus(const Topology& t, const PlanRequest& request) {
  const CpuSet all = t.all_pus();
  CpuSet allowed = request.allowed_cpus.value_or(all) & all;
  if (request.allowed_cores) {
    CpuSet of_cores;
    for (const Core& core : t.cores) {
      if (!request.allowed_cores->test(core.index)) continue;
      for (int pu : core.pus)
        of_cores.set(pu);
    }
    allowed = allowed & of_cores;
  }
  return allowed;
}

// Rules that hold for every plan of every node:
//  - each task has CPUs, all inside the step's CPUs (and cores) and outside the reserved ones;
//  - no core is shared unless there are more tasks than usable cores (and then a warning says so);
//  - with GPUs in the step, each task has GPUs from the step, tokens from the step's own tokens,
//    GPUs shared evenly (task counts per GPU differ by at most one when each task has one GPU);
//  - the NIC exists, and when any NIC shares the GPU's locality domain the chosen one does too.
inline ::testing::AssertionResult plan_invariants(const Topology& t, const SitePolicy& policy,
                                                  const PlanRequest& request, const Plan& plan) {
  const CpuSet allowed = step_cpus(t, request);
  const CpuSet reserved = reserved_cpus(t, policy);
  if (static_cast<int>(plan.tasks.size()) != request.ntasks) {
    return ::testing::AssertionFailure()
           << "planned " << plan.tasks.size() << " tasks, asked " << request.ntasks;
  }
  const auto core_of = core_of_pu(t);
  std::set<int> usable_cores;
  allowed.minus(reserved).for_each([&](int pu) { usable_cores.insert(core_of.at(pu)); });

  // token -> node GPU; by default each vendor numbers its own GPUs, so the key adds the vendor.
  std::map<std::string, int> tokens;
  auto token_key = [&](const std::string& token, Vendor vendor) {
    return request.gpus ? token : std::string(vendor_name(vendor)) + "/" + token;
  };
  if (request.gpus) {
    for (const StepGpu& g : *request.gpus)
      tokens[g.token] = g.node_index;
  } else {
    std::map<Vendor, int> per_vendor;
    for (const Gpu& g : t.gpus)
      tokens[token_key(std::to_string(per_vendor[g.vendor]++), g.vendor)] = g.index;
  }
  std::map<int, int> tasks_per_gpu;
  bool one_gpu_each = true;
  for (const TaskPlan& task : plan.tasks) {
    if (task.cpus.empty())
      return ::testing::AssertionFailure() << "rank " << task.rank << " has no CPUs";
    if (!task.cpus.is_subset_of(allowed.minus(reserved))) {
      return ::testing::AssertionFailure()
             << "rank " << task.rank << " CPUs " << task.cpus.to_list()
             << " leave the step's usable CPUs";
    }
    if (!tokens.empty() && task.gpus.empty()) {
      return ::testing::AssertionFailure() << "rank " << task.rank << " has no GPU";
    }
    one_gpu_each = one_gpu_each && task.gpus.size() == 1;
    for (const TaskGpu& gpu : task.gpus) {
      std::string base =
          gpu.token.substr(0, gpu.tile_index >= 0 ? gpu.token.rfind('.') : std::string::npos);
      // Tiled cards under Level Zero's FLAT hierarchy: tile t of card c is device c*T+t, and
      // a whole card lists its T tiles.
      const int tiles = t.gpus[gpu.node_index].tiles;
      const bool flat_numbers =
          !gpu.token.empty() && gpu.token.find_first_not_of("0123456789,") == std::string::npos;
      if (tiles > 1 && request.ze_hierarchy == ZeHierarchy::kFlat && flat_numbers) {
        const int first = std::stoi(gpu.token.substr(0, gpu.token.find(',')));
        const int card = first / tiles;
        std::string expected;
        if (gpu.tile_index >= 0) {
          expected = std::to_string(card * tiles + gpu.tile_index);
        } else {
          for (int t = 0; t < tiles; ++t)
            expected += (t ? "," : "") + std::to_string(card * tiles + t);
        }
        if (gpu.token != expected || (gpu.tile_index >= 0 && first % tiles != gpu.tile_index)) {
          return ::testing::AssertionFailure() << "rank " << task.rank << " token " << gpu.token
                                               << " is not a FLAT device of one card";
        }
        base = std::to_string(card);
      }
      auto it = tokens.find(token_key(base, t.gpus[gpu.node_index].vendor));
      if (it == tokens.end() || it->second != gpu.node_index) {
        return ::testing::AssertionFailure()
               << "rank " << task.rank << " token " << gpu.token
               << " is not the step's token for GPU " << gpu.node_index;
      }
      ++tasks_per_gpu[gpu.node_index];
    }
    if (task.nic_index >= static_cast<int>(t.nics.size()) ||
        (task.nic_index < 0 && !t.nics.empty())) {
      return ::testing::AssertionFailure() << "rank " << task.rank << " NIC " << task.nic_index;
    }
    if (!task.gpus.empty() && task.nic_index >= 0) {
      const CpuSet& gpu_domain = t.gpus[task.gpus[0].node_index].locality.cpus;
      bool any_local = false;
      for (const Nic& nic : t.nics)
        any_local |= nic.locality.cpus.intersects(gpu_domain);
      if (any_local && !t.nics[task.nic_index].locality.cpus.intersects(gpu_domain)) {
        return ::testing::AssertionFailure()
               << "rank " << task.rank << " got remote NIC " << t.nics[task.nic_index].name
               << " though a local one exists";
      }
    }
  }
  if (one_gpu_each && !tasks_per_gpu.empty() && request.tasks_per_gpu == 0 &&
      request.gpus_per_task <= 1) {
    int lo = request.ntasks, hi = 0;
    for (const auto& [gpu, n] : tasks_per_gpu) {
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    if (static_cast<int>(tasks_per_gpu.size()) < std::min<int>(tokens.size(), request.ntasks) ||
        hi - lo > 1) {
      return ::testing::AssertionFailure() << "GPUs unevenly shared: " << tasks_per_gpu.size()
                                           << " GPUs used, " << lo << ".." << hi << " tasks each";
    }
  }
  if (request.ntasks <= static_cast<int>(usable_cores.size())) {
    if (auto shared = no_core_shared(t, plan); !shared) return shared;
  } else {
    bool warned = false;
    for (const std::string& w : plan.warnings)
      warned |= w.find("share cores") != std::string::npos;
    if (!warned) return ::testing::AssertionFailure() << "cores shared without a warning";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace gpubind::testing
