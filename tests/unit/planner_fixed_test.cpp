// The planner as the only decider where Slurm or the user fixed part of a task's binding
// (PlanRequest::fixed, inherited_hip_visible_devices): what was fixed is kept, the rest is
// placed around it, and every variable names what each task really runs on.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "../support/fixtures.h"
#include "../support/requests.h"
#include "gpubind/planner.h"
#include "gpubind/policy_loader.h"

namespace gpubind {
namespace {

using testing::env_of;
using testing::fixture;
using testing::lumi_policy;
using testing::plan_or_fail;

// Each task's GPUs fixed: task i gets the step GPU positions `map[i % map.size()]`.
PlanRequest with_fixed_gpus(int ntasks, const std::vector<std::vector<int>>& map) {
  PlanRequest request;
  request.ntasks = ntasks;
  request.fixed.resize(ntasks);
  for (int task = 0; task < ntasks; ++task)
    request.fixed[task].gpus = map[task % map.size()];
  return request;
}

// Cray MPICH's MPICH_OFI_NIC_MAPPING ("0:6-7; 1:4-5") as local rank -> NIC number.
std::map<int, int> nic_of_rank(const std::string& mapping) {
  std::map<int, int> owner;
  size_t begin = 0;
  while (begin < mapping.size()) {
    size_t end = mapping.find(';', begin);
    if (end == std::string::npos) end = mapping.size();
    const std::string part = mapping.substr(begin, end - begin);
    const size_t colon = part.find(':');
    const int nic = std::stoi(part.substr(0, colon));
    const auto ranks = CpuSet::parse_list(part.substr(colon + 1));
    for (int rank : ranks->to_vector())
      owner[rank] = nic;
    begin = end + 1;
  }
  return owner;
}

TEST(PlannerFixed, SlurmsReversedMapGpuOnLumiGivesEachRankItsOwnGpusNicInEveryVariable) {
  const Topology& lumi = fixture("lumi-g");
  const Plan plan = plan_or_fail(lumi, lumi_policy(),
                                 with_fixed_gpus(8, {{7}, {6}, {5}, {4}, {3}, {2}, {1}, {0}}));
  ASSERT_EQ(plan.tasks.size(), 8u);
  CpuSet seen;
  for (const TaskPlan& task : plan.tasks) {
    ASSERT_EQ(task.gpus.size(), 1u);
    const Gpu& gpu = lumi.gpus[task.gpus[0].node_index];
    EXPECT_EQ(task.gpus[0].node_index, 7 - task.rank);
    EXPECT_TRUE(task.cpus.minus(gpu.locality.cpus).empty()) << "rank " << task.rank;
    EXPECT_FALSE(task.cpus.intersects(seen)) << "rank " << task.rank;
    seen |= task.cpus;
    // The NIC of the GPU it really holds, in GPUBIND_NIC and in Cray MPICH's mapping.
    EXPECT_EQ(env_of(task, "GPUBIND_NIC"), lumi.nics[task.nic_index].name);
    const auto owner = nic_of_rank(env_of(task, "MPICH_OFI_NIC_MAPPING"));
    EXPECT_EQ(owner.at(task.rank), task.nic_index) << env_of(task, "MPICH_OFI_NIC_MAPPING");
    EXPECT_EQ(env_of(task, "GPUBIND_CPUS"), task.cpus.to_list());
    EXPECT_EQ(env_of(task, "OMP_NUM_THREADS"), std::to_string(task.cpus.count()));
    // Slurm named the task's GPU to it, in its own numbering: the plan names none.
    EXPECT_EQ(env_of(task, "ROCR_VISIBLE_DEVICES"), "<unset>");
  }
  EXPECT_TRUE(plan.facts_kept);
  EXPECT_TRUE(plan.warnings.empty()) << plan.warnings[0];
}

TEST(PlannerFixed, AuroraOneCclWorkerCpusAreEachTasksOwnUnderSlurmsMapGpu) {
  auto policy = load_policy_file(std::string(GPUBIND_POLICIES) + "/aurora.conf");
  ASSERT_TRUE(policy) << policy.error().message;
  const Plan plan = plan_or_fail(fixture("aurora-pvc"), *policy,
                                 with_fixed_gpus(6, {{5}, {4}, {3}, {2}, {1}, {0}}));
  for (const TaskPlan& task : plan.tasks) {
    const std::string affinity = env_of(task, "CCL_WORKER_AFFINITY");
    ASSERT_NE(affinity, "<unset>");
    // Entry r is local rank r's worker CPU: inside that rank's own CPUs.
    std::vector<int> entries;
    for (size_t at = 0; at <= affinity.size();) {
      const size_t comma = std::min(affinity.find(',', at), affinity.size());
      entries.push_back(std::stoi(affinity.substr(at, comma - at)));
      at = comma + 1;
    }
    ASSERT_EQ(entries.size(), 6u);
    for (const TaskPlan& owner : plan.tasks)
      EXPECT_TRUE(owner.cpus.test(entries[owner.rank])) << affinity << " rank " << owner.rank;
    EXPECT_EQ(task.gpus[0].node_index, 5 - task.rank);
  }
}

TEST(PlannerFixed, TasksSlurmPutOnOneGpuSplitItsDomainAsAPlannedSharedGpu) {
  const Topology& lumi = fixture("lumi-g");
  const Plan plan = plan_or_fail(lumi, lumi_policy(), with_fixed_gpus(2, {{0}, {0}}));
  // The same two tasks planned on a step of that one GPU.
  PlanRequest shared;
  shared.ntasks = 2;
  shared.gpus = std::vector<StepGpu>{{0, "0"}};
  const Plan planned = plan_or_fail(lumi, lumi_policy(), shared);
  ASSERT_EQ(plan.tasks.size(), 2u);
  const CpuSet& domain = lumi.gpus[0].locality.cpus;
  EXPECT_FALSE(plan.tasks[0].cpus.intersects(plan.tasks[1].cpus));
  for (int task = 0; task < 2; ++task) {
    EXPECT_TRUE(plan.tasks[task].cpus.intersects(domain)) << plan.tasks[task].cpus.to_list();
    EXPECT_EQ(plan.tasks[task].cpus, planned.tasks[task].cpus) << "task " << task;
  }
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("2 tasks share GPU"), std::string::npos) << plan.warnings[0];
}

TEST(PlannerFixed, FixedCpusAreKeptAndTheGpusFollowThem) {
  const Topology& lumi = fixture("lumi-g");
  // Two tasks bound by an explicit list, task 0 in L3 6, task 1 in L3 0 (its first core, which
  // the policy reserves, included: the user bound it there).
  PlanRequest request;
  request.ntasks = 2;
  request.fixed.resize(2);
  request.fixed[0].cpus = CpuSet::range(49, 55);
  request.fixed[1].cpus = CpuSet::range(0, 7);
  const Plan plan = plan_or_fail(lumi, lumi_policy(), request);
  ASSERT_EQ(plan.tasks.size(), 2u);
  EXPECT_EQ(plan.tasks[0].cpus.to_list(), "49-55");
  EXPECT_EQ(plan.tasks[1].cpus.to_list(), "0-7");
  for (const TaskPlan& task : plan.tasks) {
    ASSERT_FALSE(task.gpus.empty());
    EXPECT_TRUE(task.cpus.intersects(lumi.gpus[task.gpus[0].node_index].locality.cpus))
        << "rank " << task.rank << " on GPU " << task.gpus[0].node_index;
    EXPECT_EQ(env_of(task, "GPUBIND_CPUS"), task.cpus.to_list());
  }
}

// --cpu-bind=mask_cpu lists with --gpu-bind=closest: Slurm gives each task every GPU whose domain
// holds one of its CPUs; the plan follows the same rule, so its GPUs are Slurm's.
TEST(PlannerFixed, SlurmsClosestOverFixedCpusGivesEachTaskTheGpusSlurmGives) {
  const Topology& lumi = fixture("lumi-g");
  PlanRequest request;
  request.ntasks = 2;
  request.fixed.resize(2);
  const CpuSet l3_of_gpu3 = lumi.gpus[3].locality.cpus;
  request.fixed[0].cpus = CpuSet::of({l3_of_gpu3.to_vector()[1]});
  request.fixed[1].cpus = CpuSet::of({lumi.gpus[0].locality.cpus.to_vector()[1]});
  request.slurm_gpu_rule = SlurmGpuRule::kClosest;
  Plan plan = plan_or_fail(lumi, lumi_policy(), request);
  ASSERT_EQ(plan.tasks.size(), 2u);
  for (const TaskPlan& task : plan.tasks) {
    std::vector<int> near;  // Slurm's closest, by the GPUs' domains
    for (const Gpu& gpu : lumi.gpus)
      if (gpu.locality.cpus.intersects(task.cpus)) near.push_back(gpu.index);
    std::vector<int> got;
    for (const TaskGpu& gpu : task.gpus)
      got.push_back(gpu.node_index);
    EXPECT_EQ(got, near) << "rank " << task.rank;
  }
  EXPECT_EQ(plan.tasks[0].gpus[0].node_index, 3);
  // single, one GPU near each task: that one.
  request.slurm_gpu_rule = SlurmGpuRule::kSingle;
  plan = plan_or_fail(lumi, lumi_policy(), request);
  ASSERT_EQ(plan.tasks[0].gpus.size(), 1u);
  EXPECT_EQ(plan.tasks[0].gpus[0].node_index, 3);
  EXPECT_EQ(plan.tasks[1].gpus[0].node_index, 0);
}

TEST(PlannerFixed, ATaskBoundToSecondThreadsGetsTheGpuOfTheirCores) {
  const Topology& lumi = fixture("lumi-g");  // CPUs 64-127 are the second threads of 0-63
  PlanRequest request;
  request.ntasks = 1;
  request.fixed.resize(1);
  request.fixed[0].cpus = CpuSet::range(113, 115);  // second threads of cores 49-51, L3 6
  const Plan plan = plan_or_fail(lumi, lumi_policy(), request);  // smt=1 keeps them from tasks
  ASSERT_EQ(plan.tasks.size(), 1u);
  ASSERT_FALSE(plan.tasks[0].gpus.empty());
  EXPECT_TRUE(lumi.gpus[plan.tasks[0].gpus[0].node_index].locality.cpus.test(113))
      << "GPU " << plan.tasks[0].gpus[0].node_index;
  EXPECT_EQ(plan.tasks[0].cpus.to_list(), "113-115");
  EXPECT_GE(plan.tasks[0].numa_node, 0);
}

TEST(PlannerFixed, TheFarGpuWarningNamesTheTaskThatIsFar) {
  const Topology& lumi = fixture("lumi-g");
  // Local task 1's fixed CPUs lie in another L3 than its fixed GPU; task 0's in its GPU's.
  PlanRequest request = with_fixed_gpus(2, {{0}, {1}});
  const CpuSet near0 = lumi.gpus[0].locality.cpus;
  const CpuSet near1 = lumi.gpus[1].locality.cpus;
  request.fixed[0].cpus = CpuSet::of({near0.to_vector()[1]});
  CpuSet far;
  for (int cpu : lumi.all_pus().to_vector())
    if (!near0.test(cpu) && !near1.test(cpu)) far.set(cpu);
  request.fixed[1].cpus = CpuSet::of({far.to_vector()[1]});
  const Plan plan = plan_or_fail(lumi, lumi_policy(), request);
  ASSERT_FALSE(plan.warnings.empty());
  EXPECT_NE(plan.warnings[0].find("local task 1"), std::string::npos) << plan.warnings[0];
  EXPECT_EQ(plan.warnings[0].find("local task 0"), std::string::npos) << plan.warnings[0];
}

TEST(PlannerFixed, WhatCannotBeKeptIsRefusedNamingTheFault) {
  const Topology& lumi = fixture("lumi-g");
  PlanRequest some = with_fixed_gpus(2, {{0}, {1}});
  some.fixed[1].gpus.clear();
  auto plan = make_plan(lumi, lumi_policy(), some);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("every task or for none"), std::string::npos);
  plan = make_plan(lumi, lumi_policy(), with_fixed_gpus(1, {{8}}));
  ASSERT_FALSE(plan);
  EXPECT_TRUE(plan.error().node_mismatch) << plan.error().message;
  PlanRequest outside;
  outside.ntasks = 1;
  outside.allowed_cpus = CpuSet::range(0, 7);
  outside.fixed.resize(1);
  outside.fixed[0].cpus = CpuSet::range(64, 65);
  plan = make_plan(lumi, lumi_policy(), outside);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("outside the step's CPUs"), std::string::npos);
  PlanRequest counted;
  counted.ntasks = 3;
  counted.fixed.resize(2);
  EXPECT_FALSE(make_plan(lumi, lumi_policy(), counted));
}

TEST(PlannerFixed, CpusBoundAtLaunchLeaveEveryCpuDerivedVariableUnset) {
  auto policy = load_policy_file(std::string(GPUBIND_POLICIES) + "/aurora.conf");
  ASSERT_TRUE(policy);
  policy->gpu_env.push_back({"SITE_CPUS", "cpus={cpus}", "", false});  // a site's own template
  PlanRequest request;
  request.ntasks = 6;
  request.cpus_bound_at_launch = true;  // --cpu-bind=cores: Slurm binds each task as it starts
  const Plan plan = plan_or_fail(fixture("aurora-pvc"), *policy, request);
  for (const TaskPlan& task : plan.tasks) {
    for (const char* name :
         {"OMP_NUM_THREADS", "CCL_WORKER_AFFINITY", "SITE_CPUS", "GPUBIND_CPUS", "GPUBIND_NUMA"})
      EXPECT_EQ(env_of(task, name), "<unset>") << name << ", rank " << task.rank;
    EXPECT_EQ(task.numa_node, -1) << "no memory preference for CPUs it will not have";
    EXPECT_NE(env_of(task, "ZE_AFFINITY_MASK"), "<unset>") << "its GPU and NIC still set";
    EXPECT_NE(env_of(task, "GPUBIND_NIC"), "<unset>");
  }
  request.cpus_bound_at_launch = false;
  EXPECT_NE(env_of(plan_or_fail(fixture("aurora-pvc"), *policy, request).tasks[0], "SITE_CPUS"),
            "<unset>");
}

// PyTorch-ROCm's rule (pytorch#142292): HIP_VISIBLE_DEVICES may name no more devices than
// ROCR_VISIBLE_DEVICES leaves, each an index into that list.
bool valid_for_pytorch(const std::string& hip, const std::string& rocr) {
  auto count = [](const std::string& list) {
    return list.empty() ? 0 : static_cast<int>(std::count(list.begin(), list.end(), ',')) + 1;
  };
  if (count(hip) > count(rocr)) return false;
  for (size_t at = 0; at < hip.size();) {
    const size_t comma = std::min(hip.find(',', at), hip.size());
    if (std::stoi(hip.substr(at, comma - at)) >= count(rocr)) return false;
    at = comma + 1;
  }
  return true;
}

TEST(PlannerFixed, AnInheritedHipListIsRewrittenAsPositionsInEachTasksRocrList) {
  PlanRequest request;
  request.ntasks = 8;
  request.inherited_hip_visible_devices.emplace("0,1,2,3,4,5,6,7");  // LUMI's Ray idiom
  const Plan plan = plan_or_fail(fixture("lumi-g"), lumi_policy(), request);
  for (const TaskPlan& task : plan.tasks) {
    const std::string rocr = env_of(task, "ROCR_VISIBLE_DEVICES");
    const std::string hip = env_of(task, "HIP_VISIBLE_DEVICES");
    EXPECT_EQ(hip, "0") << "rank " << task.rank;
    EXPECT_TRUE(valid_for_pytorch(hip, rocr)) << hip << " against " << rocr;
  }
  // HIP_VISIBLE_DEVICES=1 over a step of two GPUs: the task holding the step's second GPU sees it
  // as its device 0; the other holds none of what the user named, and is told so.
  PlanRequest two;
  two.ntasks = 2;
  two.gpus = std::vector<StepGpu>{{0, "0"}, {1, "1"}};
  two.inherited_hip_visible_devices.emplace("1");
  const Plan narrowed = plan_or_fail(fixture("lumi-g"), lumi_policy(), two);
  EXPECT_EQ(env_of(narrowed.tasks[0], "HIP_VISIBLE_DEVICES"), "");
  EXPECT_EQ(env_of(narrowed.tasks[1], "HIP_VISIBLE_DEVICES"), "0");
  ASSERT_FALSE(narrowed.warnings.empty());
  EXPECT_NE(narrowed.warnings.back().find("local task 0"), std::string::npos)
      << narrowed.warnings.back();
  EXPECT_NE(narrowed.warnings.back().find("HIP_VISIBLE_DEVICES=1"), std::string::npos);
}

TEST(PlannerFixed, ANonIntelTaskSeesNoIntelGpuThroughAnIndexNoDeviceHas) {
  Topology node = fixture("aurora-pvc");
  node.gpus[0].vendor = Vendor::kNvidia;  // a node of both vendors
  node.gpus[0].tiles = 0;
  auto policy = load_policy_file(std::string(GPUBIND_POLICIES) + "/aurora.conf");
  ASSERT_TRUE(policy);
  policy->gpu_env.push_back({"CUDA_VISIBLE_DEVICES", "{gpus}", "nvidia", false});
  PlanRequest request;
  request.ntasks = 6;
  const Plan plan = plan_or_fail(node, *policy, request);
  int intel_devices = 0;
  for (const Gpu& gpu : node.gpus)
    if (gpu.vendor == Vendor::kIntel) intel_devices += std::max(gpu.tiles, 1);
  bool seen = false;
  for (const TaskPlan& task : plan.tasks) {
    if (task.gpus.empty() || task.gpus[0].vendor != Vendor::kNvidia) continue;
    seen = true;
    // Level Zero reads an empty mask as no mask: the task would see every Intel GPU.
    EXPECT_EQ(env_of(task, "ZE_AFFINITY_MASK"), std::to_string(intel_devices));
  }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace gpubind
