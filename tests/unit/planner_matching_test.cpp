// The planner's rules for which GPUs and spare cores a task gets when the node's GPU order,
// domain sizes or spare cores are uneven (docs/planning.md, rules 2, 5 and 8). Each test builds
// its node in memory so that the rule, not one dump, is what is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "../support/invariants.h"
#include "gpubind/bench/synthetic_topology.h"
#include "gpubind/planner.h"

namespace gpubind {
namespace {

struct NodeShape {
  int packages, numa_per_package, l3_per_numa, cores_per_l3, threads_per_core;
};

// A synthetic node whose GPUs (one NIC each) sit on the NUMA nodes listed, in that GPU order.
Topology node_with_gpus_on(const NodeShape& node, const std::vector<int>& gpu_numas) {
  bench::SyntheticShape shape;
  shape.packages = node.packages;
  shape.numa_per_package = node.numa_per_package;
  shape.l3_per_numa = node.l3_per_numa;
  shape.cores_per_l3 = node.cores_per_l3;
  shape.threads_per_core = node.threads_per_core;
  shape.gpus_per_numa = 1;
  const Topology full = bench::synthetic_topology(shape);
  Topology t = full;
  t.gpus.clear();
  t.nics.clear();
  for (int numa : gpu_numas) {
    Gpu gpu = full.gpus[numa];
    gpu.index = static_cast<int>(t.gpus.size());
    gpu.pci_bus_id = "0000:" + std::to_string(10 + gpu.index) + ":00.0";
    t.gpus.push_back(gpu);
    Nic nic = full.nics[numa];
    nic.index = static_cast<int>(t.nics.size());
    t.nics.push_back(nic);
  }
  return t;
}

Plan plan_of(const Topology& t, const SitePolicy& policy, PlanRequest request) {
  auto plan = make_plan(t, policy, request);
  if (!plan) {
    ADD_FAILURE() << plan.error().message;
    return {};
  }
  EXPECT_TRUE(testing::plan_invariants(t, policy, request, *plan));
  return std::move(*plan);
}

PlanRequest step(int ntasks, Order order = Order::kGpu) {
  PlanRequest request;
  request.ntasks = ntasks;
  request.order = order;
  return request;
}

// The NUMA node holding most of a task's CPUs.
int home_numa(const Topology& t, const TaskPlan& task) {
  int best = -1, most = 0;
  for (int numa = 0; numa < t.numa_count; ++numa) {
    const int here = (task.cpus & t.numa_pus(numa)).count();
    if (here > most) {
      best = numa;
      most = here;
    }
  }
  return best;
}

int package_of_numa(const Topology& t, int numa) {
  for (const Core& core : t.cores) {
    if (core.numa_index == numa) return core.package_index;
  }
  return -1;
}

// JUWELS Booster's shape: two packages of four 6-core NUMA nodes, the GPUs on NUMA nodes 3, 1,
// 7, 5 in GPU order. order=cpu puts one task on each NUMA node; the task on a GPU's NUMA node
// gets that GPU (rank by rank, rank 0 would take GPU 0 first and leave rank 3 a far one), the
// others one of their own package's, two tasks per GPU.
TEST(PlannerOrderCpu, TasksOnAGpusNumaNodeGetThatGpuFirst) {
  const Topology t = node_with_gpus_on({2, 4, 1, 6, 2}, {3, 1, 7, 5});
  const Plan plan = plan_of(t, SitePolicy(), step(8, Order::kCpu));
  std::map<int, int> load;
  for (const TaskPlan& task : plan.tasks) {
    ASSERT_EQ(task.gpus.size(), 1u);
    const Gpu& gpu = t.gpus[task.gpus[0].node_index];
    const int numa = home_numa(t, task);
    EXPECT_EQ(numa, task.rank) << "order=cpu: rank r on NUMA node r";
    if (numa % 2 == 1) {
      EXPECT_EQ(gpu.locality.numa_index, numa) << "rank " << task.rank << " holds a GPU";
    } else {
      EXPECT_EQ(gpu.locality.package_index, package_of_numa(t, numa))
          << "rank " << task.rank << ": a GPU of its own package";
    }
    ++load[gpu.index];
  }
  for (const auto& [gpu, tasks] : load)
    EXPECT_EQ(tasks, 2) << "GPU " << gpu;
}

// Fewer tasks than GPUs under order=cpu: each task's GPUs are those its cores hold, whatever
// the GPUs' order.
TEST(PlannerOrderCpu, MultiGpuTasksTakeTheirOwnNumaNodesGpus) {
  const Topology t = node_with_gpus_on({1, 2, 2, 4, 1}, {1, 0, 1, 0});
  const Plan plan = plan_of(t, SitePolicy(), step(2, Order::kCpu));
  for (const TaskPlan& task : plan.tasks) {
    ASSERT_EQ(task.gpus.size(), 2u);
    for (const TaskGpu& gpu : task.gpus)
      EXPECT_EQ(t.gpus[gpu.node_index].locality.numa_index, task.rank) << "rank " << task.rank;
  }
}

// Corona's shape with the first core of each L3 reserved: two NUMA nodes of eight 2-core L3s
// and four GPUs each. 24 tasks by core order would put the 8 two-core tasks on NUMA node 0 and
// 16 one-core tasks on NUMA node 1; each node gets 12, three per GPU, each task on its GPU's
// node.
TEST(PlannerOrderCpu, EachNumaNodeGetsItsShareOfTheTasks) {
  const Topology t = node_with_gpus_on({2, 1, 8, 3, 2}, {0, 0, 0, 0, 1, 1, 1, 1});
  SitePolicy policy;
  policy.reserve_first_core_per_l3 = true;
  const Plan plan = plan_of(t, policy, step(24, Order::kCpu));
  std::map<int, int> tasks_on;
  for (const TaskPlan& task : plan.tasks) {
    const int numa = home_numa(t, task);
    ++tasks_on[numa];
    ASSERT_EQ(task.gpus.size(), 1u);
    EXPECT_EQ(t.gpus[task.gpus[0].node_index].locality.numa_index, numa)
        << "rank " << task.rank << " (CPUs " << task.cpus.to_list() << ")";
  }
  EXPECT_EQ(tasks_on[0], 12);
  EXPECT_EQ(tasks_on[1], 12);
}

// Sierra's shape: two 22-core NUMA nodes of 2-core L3s. 8 tasks by core order would give a
// 6-core task cores of both nodes; dealt by NUMA node the counts stay within one (6,6,5,5 on
// each) and no task straddles.
TEST(PlannerOrderCpu, NoTaskAcrossNumaNodesWhereDealingKeepsTheBalance) {
  const Topology t = node_with_gpus_on({2, 1, 11, 2, 4}, {0, 0, 1, 1});
  const Plan plan = plan_of(t, SitePolicy(), step(8, Order::kCpu));
  int fewest = 1 << 30, most = 0;
  for (const TaskPlan& task : plan.tasks) {
    const int numa = home_numa(t, task);
    EXPECT_TRUE(task.cpus.is_subset_of(t.numa_pus(numa)))
        << "rank " << task.rank << " (CPUs " << task.cpus.to_list() << ")";
    EXPECT_EQ(numa, task.rank / 4);
    fewest = std::min(fewest, task.ncores);
    most = std::max(most, task.ncores);
  }
  EXPECT_LE(most - fewest, 1);
}

// More tasks than cores under order=cpu: the tasks that must share a core spread over the node,
// so each NUMA node keeps as many tasks as its GPUs take (two per GPU), none far from its GPU.
TEST(PlannerOrderCpu, TasksSharingCoresSpreadOverTheNode) {
  const Topology t = node_with_gpus_on({2, 1, 1, 4, 1}, {0, 0, 1, 1});
  const Plan plan = plan_of(t, SitePolicy(), step(12, Order::kCpu));
  for (const TaskPlan& task : plan.tasks) {
    ASSERT_EQ(task.gpus.size(), 1u);
    EXPECT_TRUE(task.cpus.is_subset_of(t.gpus[task.gpus[0].node_index].locality.cpus))
        << "rank " << task.rank << " (CPUs " << task.cpus.to_list() << ")";
  }
}

// Fewer tasks than GPUs under order=cpu: every GPU goes to a task (12 GPUs for 8 tasks: four
// take two), each from the task's own NUMA node.
TEST(PlannerOrderCpu, EveryGpuIsUsedWhenTasksAreFewer) {
  const Topology t = node_with_gpus_on({4, 1, 3, 8, 1}, {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3});
  const Plan plan = plan_of(t, SitePolicy(), step(8, Order::kCpu));
  std::vector<int> holders(12, 0);
  for (const TaskPlan& task : plan.tasks) {
    for (const TaskGpu& gpu : task.gpus) {
      ++holders[gpu.node_index];
      EXPECT_EQ(t.gpus[gpu.node_index].locality.numa_index, home_numa(t, task));
    }
  }
  EXPECT_EQ(holders, std::vector<int>(12, 1));
}

// One task per usable core on two 23-core domains of four GPUs each (AWS g4dn.metal with the
// first core of each L3 reserved): the GPUs that take a sixth task are spread so that each
// domain carries 23 tasks, and every task has its core in its GPU's domain.
TEST(PlannerGpus, LargerGpuSharesGoWhereTheDomainHasCores) {
  const Topology t = node_with_gpus_on({2, 1, 1, 24, 2}, {0, 0, 0, 0, 1, 1, 1, 1});
  SitePolicy policy;
  policy.reserve_first_core_per_l3 = true;
  const Plan plan = plan_of(t, policy, step(46));
  std::vector<int> per_gpu(8, 0);
  int previous = 0;
  for (const TaskPlan& task : plan.tasks) {
    ASSERT_EQ(task.gpus.size(), 1u);
    const int g = task.gpus[0].node_index;
    EXPECT_GE(g, previous) << "consecutive ranks share a GPU";
    previous = g;
    ++per_gpu[g];
    EXPECT_TRUE(task.cpus.is_subset_of(t.gpus[g].locality.cpus))
        << "rank " << task.rank << " (CPUs " << task.cpus.to_list() << ") away from GPU " << g;
  }
  EXPECT_EQ(per_gpu, (std::vector<int>{6, 6, 6, 5, 6, 6, 6, 5}));
  EXPECT_TRUE(plan.warnings.size() == 1 && plan.warnings[0].find("share GPU") != std::string::npos)
      << "no task far from its GPU";
}

// Dell XE8640's shape: two packages of four NUMA nodes, a GPU on NUMA nodes 3, 1, 7, 5. With 12
// tasks each package's six tasks share its two spare NUMA nodes: no task reaches across to the
// other package, and the cores stay within one of each other.
TEST(PlannerSpareCores, SparesGoNearestFirstAcrossAllTasks) {
  const Topology t = node_with_gpus_on({2, 4, 1, 14, 2}, {3, 1, 7, 5});
  const Plan plan = plan_of(t, SitePolicy(), step(12));
  int fewest = 1 << 30, most = 0;
  for (const TaskPlan& task : plan.tasks) {
    const int package = t.gpus[task.gpus[0].node_index].locality.package_index;
    const CpuSet own_package = t.numa_pus(4 * package) | t.numa_pus(4 * package + 1) |
                               t.numa_pus(4 * package + 2) | t.numa_pus(4 * package + 3);
    EXPECT_TRUE(task.cpus.is_subset_of(own_package))
        << "rank " << task.rank << " (CPUs " << task.cpus.to_list() << ") crosses packages";
    fewest = std::min(fewest, task.ncores);
    most = std::max(most, task.ncores);
  }
  EXPECT_LE(most - fewest, 1);
}

// Spares next to one GPU's tasks only: the tasks near them take the larger shares, but no task
// more than one core above another.
TEST(PlannerSpareCores, NearbySparesNeverUnbalanceTheShares) {
  const Topology t = node_with_gpus_on({1, 4, 2, 4, 1}, {0, 2});
  for (int ntasks : {3, 5, 6, 7}) {
    const Plan plan = plan_of(t, SitePolicy(), step(ntasks));
    std::vector<int> cores;
    for (const TaskPlan& task : plan.tasks)
      cores.push_back(task.ncores);
    const auto [fewest, most] = std::minmax_element(cores.begin(), cores.end());
    EXPECT_LE(*most - *fewest, 1) << ntasks << " tasks";
  }
}

}  // namespace
}  // namespace gpubind
