// Environment rendering on its own: hand-built task plans in, each task's variables out.
#include "plan/env_render.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "../support/fixtures.h"
#include "gpubind/env_names.h"

namespace gpubind {
namespace {

using Vars = std::map<std::string, std::string>;

Vars vars_of(const TaskPlan& task) {
  Vars vars;
  for (const EnvVar var : task.env)
    vars.emplace(std::string(var.name), std::string(var.value));
  return vars;
}

Nic slingshot(int index, const std::string& netdev, const std::string& rdma) {
  Nic nic;
  nic.index = index;
  nic.name = netdev;
  nic.netdev = netdev;
  nic.rdma = rdma;
  nic.kind = NicKind::kSlingshot;
  return nic;
}

// Two Slingshot NICs; the node has no cxi1, so Cray MPICH numbers cxi2 as its NIC 1.
Topology two_nic_node() {
  Topology topology;
  topology.nics = {slingshot(0, "hsn0", "cxi0"), slingshot(1, "hsn2", "cxi2")};
  return topology;
}

TaskGpu amd_gpu(int index, const std::string& pci) {
  return {index, index, -1, std::to_string(index), pci, Vendor::kAmd};
}

// Rank 0: CPUs 0-3, GPU 0, NIC hsn0, NUMA 0. Rank 1: CPUs 4-7, GPUs 1 and 2, NIC hsn2, NUMA 1.
std::vector<TaskPlan> two_tasks() {
  std::vector<TaskPlan> tasks(2);
  tasks[0].rank = 0;
  tasks[0].cpus = CpuSet::range(0, 3);
  tasks[0].ncores = 4;
  tasks[0].gpus.push_back(amd_gpu(0, "0000:c1:00.0"));
  tasks[0].nic_index = 0;
  tasks[0].nic_indices = {0};
  tasks[0].numa_node = 0;
  tasks[1].rank = 1;
  tasks[1].cpus = CpuSet::range(4, 7);
  tasks[1].ncores = 4;
  tasks[1].gpus.push_back(amd_gpu(1, "0000:c6:00.0"));
  tasks[1].gpus.push_back(amd_gpu(2, "0000:c9:00.0"));
  tasks[1].nic_index = 1;
  tasks[1].nic_indices = {1};
  tasks[1].numa_node = 1;
  return tasks;
}

TEST(EnvRender, DefaultPolicyGivesEachTaskItsGpusNicAndThreads) {
  std::vector<TaskPlan> tasks = two_tasks();
  std::vector<std::string> warnings;
  render_env(two_nic_node(), SitePolicy(), PlanRequest(), tasks, warnings);
  EXPECT_EQ(vars_of(tasks[0]), (Vars{{"ROCR_VISIBLE_DEVICES", "0"},
                                     {"MPICH_OFI_NIC_POLICY", "USER"},
                                     {"MPICH_OFI_NIC_MAPPING", "0:0; 1:1"},
                                     {"OMP_NUM_THREADS", "4"},
                                     {"GPUBIND_BOUND", "1"},
                                     {"GPUBIND_LOCAL_RANK", "0"},
                                     {"GPUBIND_CPUS", "0-3"},
                                     {"GPUBIND_GPUS", "0"},
                                     {"GPUBIND_GPU_PCI", "0000:c1:00.0"},
                                     {"GPUBIND_NIC", "hsn0"},
                                     {"GPUBIND_NUMA", "0"}}));
  // Two GPUs: a worker per GPU, each with half the task's CPUs.
  EXPECT_EQ(vars_of(tasks[1]), (Vars{{"ROCR_VISIBLE_DEVICES", "1,2"},
                                     {"MPICH_OFI_NIC_POLICY", "USER"},
                                     {"MPICH_OFI_NIC_MAPPING", "0:0; 1:1"},
                                     {"OMP_NUM_THREADS", "2"},
                                     {"GPUBIND_BOUND", "1"},
                                     {"GPUBIND_LOCAL_RANK", "1"},
                                     {"GPUBIND_CPUS", "4-7"},
                                     {"GPUBIND_GPUS", "1,2"},
                                     {"GPUBIND_GPU_PCI", "0000:c6:00.0,0000:c9:00.0"},
                                     {"GPUBIND_NIC", "hsn2"},
                                     {"GPUBIND_NUMA", "1"}}));
}

TEST(EnvRender, TemplatesKeepTheirOrderAndOnlyIfUnsetFlag) {
  std::vector<TaskPlan> tasks = two_tasks();
  std::vector<std::string> warnings;
  render_env(two_nic_node(), SitePolicy(), PlanRequest(), tasks, warnings);
  std::vector<std::pair<std::string, bool>> order;
  for (const EnvVar var : tasks[0].env)
    order.emplace_back(std::string(var.name), var.only_if_unset);
  ASSERT_GE(order.size(), 5u);
  EXPECT_EQ(order[0], (std::pair<std::string, bool>{"ROCR_VISIBLE_DEVICES", false}));
  EXPECT_EQ(order[1], (std::pair<std::string, bool>{"MPICH_OFI_NIC_POLICY", true}));
  EXPECT_EQ(order[2], (std::pair<std::string, bool>{"MPICH_OFI_NIC_MAPPING", true}));
  EXPECT_EQ(order[3], (std::pair<std::string, bool>{"OMP_NUM_THREADS", true}));
  EXPECT_EQ(order[4], (std::pair<std::string, bool>{"GPUBIND_BOUND", false}));
}

TEST(EnvRender, PlaceholdersTakeEachTasksAndTheNodesValues) {
  SitePolicy policy;
  policy.gpu_env = {
      {"VENDOR_ONLY", "{gpus}", "nvidia", false},
      {"TASK", "{local_rank}/{ntasks} {cpu_mask} {ncpus} {ngpus} numa{numa}", "", false}};
  policy.nic_env = {
      {"NIC", "{nic}:{nic_netdev}:{nic_rdma}:{nic_index} of {node_nics_rdma}", "slingshot", false}};
  policy.omp_env = {{"CCL", "{ccl_worker_affinity}", "", false}};
  std::vector<TaskPlan> tasks = two_tasks();
  std::vector<std::string> warnings;
  render_env(two_nic_node(), policy, PlanRequest(), tasks, warnings);
  const Vars first = vars_of(tasks[0]), second = vars_of(tasks[1]);
  EXPECT_EQ(first.count("VENDOR_ONLY"), 0u) << "an nvidia template on an AMD task";
  EXPECT_EQ(first.at("TASK"), "0/2 0xf 4 1 numa0");
  EXPECT_EQ(second.at("TASK"), "1/2 0xf0 4 2 numa1");
  EXPECT_EQ(first.at("NIC"), "hsn0:hsn0:cxi0:0 of cxi0,cxi2");
  EXPECT_EQ(second.at("NIC"), "hsn2:hsn2:cxi2:2 of cxi0,cxi2");
  // One oneCCL worker per process (the step's tasks), each on the last CPU of its own task.
  EXPECT_EQ(first.at("CCL"), "3,7");
  EXPECT_EQ(second.at("CCL"), "3,7");
}

// UCX names an RDMA device's port ("mlx4_0:2"): the one discovery found active, not always 1; a
// NIC without RDMA device by its interface.
TEST(EnvRender, UcxDevicesNameEachRdmaDevicesOwnPort) {
  Topology topology;
  topology.nics.resize(3);
  for (int i = 0; i < 3; ++i)
    topology.nics[i].index = i;
  topology.nics[0].rdma = "mlx4_0";
  topology.nics[0].rdma_port = 2;
  topology.nics[1].rdma = "mlx5_0";
  topology.nics[2].netdev = "eth1";
  SitePolicy policy;
  policy.nic_env = {{"UCX_NET_DEVICES", "{nics_ucx}", "", false}};
  std::vector<TaskPlan> tasks(1);
  tasks[0].cpus = CpuSet::range(0, 3);
  tasks[0].nic_index = 0;
  tasks[0].nic_indices = {0, 1, 2};
  std::vector<std::string> warnings;
  render_env(topology, policy, PlanRequest(), tasks, warnings);
  EXPECT_EQ(vars_of(tasks[0]).at("UCX_NET_DEVICES"), "mlx4_0:2,mlx5_0:1,eth1");
}

TEST(EnvRender, RequestTurnsGroupsOffAndOmpPlacesOn) {
  PlanRequest request;
  request.gpu_env = false;
  request.nic_env = false;
  request.omp_places = true;
  std::vector<TaskPlan> tasks = two_tasks();
  std::vector<std::string> warnings;
  render_env(two_nic_node(), SitePolicy(), request, tasks, warnings);
  const Vars vars = vars_of(tasks[1]);
  EXPECT_EQ(vars.count("ROCR_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(vars.count("MPICH_OFI_NIC_POLICY"), 0u);
  EXPECT_EQ(vars.at("OMP_PLACES"), "cores");
  EXPECT_EQ(vars.at("OMP_PROC_BIND"), "close");
  // gpubind's own variables do not depend on the groups.
  EXPECT_EQ(vars.at("GPUBIND_GPUS"), "1,2");
  EXPECT_EQ(vars.at("GPUBIND_NIC"), "hsn2");
}

TEST(EnvRender, TaskWithoutGpusOrNicGetsOnlyItsCpus) {
  std::vector<TaskPlan> tasks(1);
  tasks[0].cpus = CpuSet::range(0, 1);
  std::vector<std::string> warnings;
  render_env(Topology(), SitePolicy(), PlanRequest(), tasks, warnings);
  EXPECT_EQ(vars_of(tasks[0]), (Vars{{"OMP_NUM_THREADS", "2"},
                                     {"GPUBIND_BOUND", "1"},
                                     {"GPUBIND_LOCAL_RANK", "0"},
                                     {"GPUBIND_CPUS", "0-1"}}));
}

// A task started through Apptainer (or Singularity) gets each variable the plan sets whatever the
// task's own environment holds twice: as itself and as the runtime's twin, which --cleanenv keeps.
// One a user's own value wins over (only_if_unset) has no twin; another program gets none.
TEST(EnvRender, ApptainerTasksGetEachUnconditionalVariableAsATwin) {
  std::vector<std::string> warnings;
  for (const auto& [command, prefix] :
       {std::pair{"apptainer", "APPTAINERENV_"}, std::pair{"singularity", "SINGULARITYENV_"}}) {
    PlanRequest request;
    request.omp_places = true;
    request.task_command = command;
    std::vector<TaskPlan> tasks = two_tasks();
    render_env(two_nic_node(), SitePolicy(), request, tasks, warnings);
    size_t twins = 0;
    for (const EnvVar var : tasks[1].env) {
      const std::string twin = prefix + std::string(var.name);
      if (std::string(var.name).rfind(prefix, 0) == 0) continue;
      const Vars vars = vars_of(tasks[1]);
      if (var.only_if_unset) {
        EXPECT_EQ(vars.count(twin), 0u) << twin;
      } else {
        ASSERT_EQ(vars.count(twin), 1u) << twin;
        EXPECT_EQ(vars.at(twin), std::string(var.value)) << twin;
        ++twins;
      }
    }
    EXPECT_GE(twins, 5u) << command;
    EXPECT_EQ(vars_of(tasks[1]).at(std::string(prefix) + "ROCR_VISIBLE_DEVICES"), "1,2");
  }
  PlanRequest python;
  python.task_command = "python3";
  std::vector<TaskPlan> tasks = two_tasks();
  render_env(two_nic_node(), SitePolicy(), python, tasks, warnings);
  for (const EnvVar var : tasks[0].env)
    EXPECT_TRUE(container_twin_of(var.name).empty()) << var.name;
}

// make_plan's environment is render_env's over its own task plans.
TEST(EnvRender, MakePlanRendersWhatRenderEnvRenders) {
  const Topology& topology = testing::fixture("lumi-g");
  const SitePolicy policy = testing::lumi_policy();
  PlanRequest request;
  request.ntasks = 16;
  auto plan = make_plan(topology, policy, request);
  ASSERT_TRUE(plan) << plan.error().message;
  std::vector<TaskPlan> tasks = plan->tasks;
  for (TaskPlan& task : tasks)
    task.env = EnvList();
  std::vector<std::string> warnings;
  render_env(topology, policy, request, tasks, warnings);
  for (size_t i = 0; i < tasks.size(); ++i) {
    EXPECT_FALSE(vars_of(tasks[i]).empty());
    EXPECT_EQ(vars_of(tasks[i]), vars_of(plan->tasks[i])) << "rank " << i;
  }
}

}  // namespace
}  // namespace gpubind
