// Slurm's own per-task GPU choice (--gpu-bind, --gpus-per-task): read from the task's
// environment, computed for the whole step where the binding allows it, and kept in the binding.
#include "gpubind/client/slurm_gpu_choice.h"
#include "../support/env_map.h"

#include <gtest/gtest.h>

#include <map>

namespace gpubind::client {
namespace {

EnvLookup task_env(test_support::EnvMap vars) {
  return test_support::env_lookup(std::move(vars));
}

using Map = std::vector<std::vector<int>>;

TEST(SlurmGpuMap, MapMaskAndPerTask) {
  const std::vector<int> step{0, 1, 2, 3};
  EXPECT_EQ(slurm_gpu_map("map_gpu:1,0", step, 4), (Map{{1}, {0}, {1}, {0}})) << "reused in turn";
  EXPECT_EQ(slurm_gpu_map("map_gpu:3*2,0", step, 3), (Map{{3}, {3}, {0}})) << "*N repeats";
  EXPECT_EQ(slurm_gpu_map("mask_gpu:0x3,0xc", step, 2), (Map{{0, 1}, {2, 3}}));
  EXPECT_EQ(slurm_gpu_map("mask_gpu:5", step, 1), (Map{{0, 2}})) << "hex without 0x";
  EXPECT_EQ(slurm_gpu_map("per_task:2", step, 2), (Map{{0, 1}, {2, 3}}));
  EXPECT_EQ(slurm_gpu_map("per_task:1", std::vector<int>{4, 6}, 3), (Map{{4}, {6}, {4}}));
  // Masks and maps only count the step's GPUs.
  EXPECT_EQ(slurm_gpu_map("mask_gpu:0xf", std::vector<int>{2, 3}, 1), (Map{{2, 3}}));
}

TEST(SlurmGpuMap, WhatCannotBeComputedHereIsNotGuessed) {
  const std::vector<int> step{0, 1};
  EXPECT_FALSE(slurm_gpu_map("closest", step, 2));
  EXPECT_FALSE(slurm_gpu_map("single:2", step, 2));
  EXPECT_FALSE(slurm_gpu_map("map_gpu:5", step, 1)) << "outside the step: Slurm's own fallback";
  EXPECT_FALSE(slurm_gpu_map("map_gpu:x", step, 1));
  EXPECT_FALSE(slurm_gpu_map("map_gpu:1*0", step, 1));
  EXPECT_FALSE(slurm_gpu_map("per_task:0", step, 1));
  EXPECT_FALSE(slurm_gpu_map("", step, 1));
}

// slurm_task_gpus for bindings the text decides: no plan or CPUs needed.
std::optional<SlurmTaskGpus> choice_by_text(const EnvLookup& env, const std::vector<int>& step,
                                            int local_id, int local_tasks) {
  return slurm_task_gpus(env, step, local_id, local_tasks, StepPlan{}, "");
}

TEST(SlurmTaskGpus, OnlyWhereSlurmNarrowedTheTask) {
  const std::vector<int> step{0, 1};
  EXPECT_FALSE(choice_by_text(task_env({{"SLURM_STEP_GPUS", "0,1"}}), step, 0, 2))
      << "the step's GPUs: no per-task choice";
  EXPECT_FALSE(choice_by_text(task_env({{"SLURM_STEP_GPUS", "1,0"}}), step, 0, 2)) << "as a set";
  EXPECT_FALSE(choice_by_text(task_env({}), step, 0, 2));
  EXPECT_FALSE(choice_by_text(task_env({{"SLURM_STEP_GPUS", "1"}}), {}, 0, 2)) << "no GPUs asked";

  auto choice = choice_by_text(
      task_env({{"SLURM_STEP_GPUS", "1"}, {"SLURMD_TRES_BIND", "gpu:verbose,map_gpu:1,0,1"}}), step,
      2, 3);
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, std::vector<int>{1});
  EXPECT_EQ(choice->binding, "map_gpu:1,0,1");
  EXPECT_EQ(choice->same_before, 1) << "task 0 has GPU 1 too";
  EXPECT_EQ(choice->same_total, 2);

  // Under ConstrainDevices the task's own list names the step's first GPUs: rank 0 of
  // map_gpu:1,0 lists "0" and holds GPU 1. Slurm's binding names it.
  choice = choice_by_text(
      task_env({{"SLURM_STEP_GPUS", "0"}, {"SLURMD_TRES_BIND", "gpu:map_gpu:1,0"}}), step, 0, 2);
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, std::vector<int>{1});
  // per_task:2, rank 1 of 2 on 4 GPUs lists "0,1" and holds GPUs 2 and 3.
  choice =
      choice_by_text(task_env({{"SLURM_STEP_GPUS", "0,1"}, {"SLURMD_TRES_BIND", "gpu:per_task:2"}}),
                     std::vector<int>{0, 1, 2, 3}, 1, 2);
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->gpus, (std::vector<int>{2, 3}));
  // closest and single depend on the task's CPUs: without a plan placing the GPUs, not
  // identified.
  choice = choice_by_text(task_env({{"SLURM_STEP_GPUS", "0"}, {"SLURMD_TRES_BIND", "gpu:closest"}}),
                          step, 0, 2);
  ASSERT_TRUE(choice);
  EXPECT_FALSE(choice->identified);
  EXPECT_TRUE(choice->among.empty());
  EXPECT_EQ(choice->same_total, -1);
  // A count that disagrees with the binding is not trusted either.
  choice = choice_by_text(
      task_env({{"SLURM_STEP_GPUS", "0"}, {"SLURMD_TRES_BIND", "gpu:mask_gpu:0x3"}}), step, 0, 1);
  ASSERT_TRUE(choice);
  EXPECT_FALSE(choice->identified);
}

// A plan of four tasks on two GPUs (tokens "0", "1"), two tasks each, NVIDIA.
StepPlan two_gpu_plan() {
  StepPlan plan;
  plan.source = "daemon";
  const char* cpus[] = {"0-3", "4-7", "8-11", "12-15"};
  for (int rank = 0; rank < 4; ++rank) {
    TaskBinding task;
    task.rank = rank;
    task.cpus = cpus[rank];
    const std::string token = rank < 2 ? "0" : "1";
    const std::string pci = rank < 2 ? "0000:40:00.0" : "0000:c1:00.0";
    task.tokens = token;
    task.vendor = "nvidia";
    task.numa_index = rank < 2 ? 0 : 1;
    task.nic_names = rank < 2 ? "hsn0" : "hsn1";
    task.gpus = {{token, pci, "NUMA " + std::to_string(rank < 2 ? 0 : 1)}};
    task.env = {
        {"CUDA_VISIBLE_DEVICES", token, false}, {"OMP_NUM_THREADS", "4", true},
        {"NCCL_IB_HCA", task.nic_names, false}, {"GPUBIND_LOCAL_RANK", std::to_string(rank), false},
        {"GPUBIND_CPUS", task.cpus, false},     {"GPUBIND_GPUS", token, false},
        {"GPUBIND_GPU_PCI", pci, false}};
    plan.tasks.push_back(task);
  }
  return plan;
}

const std::vector<std::pair<int, std::string>> kTable{{0, "0"}, {1, "1"}};

std::map<std::string, std::string> env_map(const TaskBinding& task) {
  std::map<std::string, std::string> out;
  for (const TaskEnv& var : task.env)
    out[var.name] = var.value;
  return out;
}

TEST(KeepSlurmGpus, EachTaskTakesAPlannedTaskOfItsOwnGpu) {
  const StepPlan plan = two_gpu_plan();
  // map_gpu:1,0,1,0: tasks 0 and 2 on GPU 1, tasks 1 and 3 on GPU 0.
  std::vector<std::string> cpus;
  for (int local = 0; local < 4; ++local) {
    SlurmTaskGpus choice{{local % 2 == 0 ? 1 : 0}, true, "map_gpu:1,0", local / 2, 2, {}};
    const KeptBinding kept = keep_slurm_gpus(plan, kTable, choice, local, "0");
    EXPECT_FALSE(kept.cores_may_be_shared);
    cpus.push_back(kept.task.cpus);
    const auto env = env_map(kept.task);
    EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u) << "Slurm's value stays";
    EXPECT_EQ(env.at("GPUBIND_GPUS"), "0") << "the task's own token (its cgroup numbers it 0)";
    EXPECT_EQ(env.at("GPUBIND_GPU_PCI"), local % 2 == 0 ? "0000:c1:00.0" : "0000:40:00.0");
    EXPECT_EQ(env.at("GPUBIND_LOCAL_RANK"), std::to_string(local));
    EXPECT_EQ(env.at("GPUBIND_CPUS"), kept.task.cpus);
    EXPECT_EQ(env.at("NCCL_IB_HCA"), local % 2 == 0 ? "hsn1" : "hsn0") << "the NIC near its GPU";
    EXPECT_EQ(kept.task.numa_index, local % 2 == 0 ? 1 : 0);
    EXPECT_EQ(kept.task.rank, local);
    EXPECT_EQ(kept.basis, KeptBinding::Basis::kSameGpus);
    EXPECT_EQ(kept.planned_rank, (local % 2 == 0 ? 2 : 0) + local / 2) << "the k-th of its GPU's";
  }
  EXPECT_EQ(cpus, (std::vector<std::string>{"8-11", "0-3", "12-15", "4-7"}))
      << "the cores of its own GPU, none shared";
}

TEST(KeepSlurmGpus, MoreTasksOnAGpuThanPlannedShareItsCoresAndSaySo) {
  const StepPlan plan = two_gpu_plan();
  SlurmTaskGpus choice{{0}, true, "map_gpu:0", 2, 4, {}};  // every task on GPU 0
  KeptBinding kept = keep_slurm_gpus(plan, kTable, choice, 2, "0");
  EXPECT_TRUE(kept.cores_may_be_shared);
  EXPECT_EQ(kept.task.cpus, "0-3");
  // Not counted: still the GPU's cores, said to be possibly shared.
  kept = keep_slurm_gpus(plan, kTable, SlurmTaskGpus{{1}, true, "map_gpu:1", -1, -1, {}}, 1, "1");
  EXPECT_TRUE(kept.cores_may_be_shared);
  EXPECT_TRUE(kept.task.cpus == "8-11" || kept.task.cpus == "12-15");
}

TEST(KeepSlurmGpus, GpusNoPlannedTaskHoldsTakeTheCoresOfThoseThatHoldOne) {
  const StepPlan plan = two_gpu_plan();
  const KeptBinding kept = keep_slurm_gpus(
      plan, kTable, SlurmTaskGpus{{0, 1}, true, "mask_gpu:0x3", 0, 4, {}}, 0, "0,1");
  EXPECT_TRUE(kept.cores_may_be_shared);
  EXPECT_EQ(kept.task.cpus, "0-15");
  EXPECT_EQ(kept.basis, KeptBinding::Basis::kSomeOfItsGpus);
  EXPECT_EQ(kept.planned_rank, 0);
  EXPECT_EQ(env_map(kept.task).at("GPUBIND_GPU_PCI"), "0000:40:00.0,0000:c1:00.0");
  EXPECT_EQ(describe_gpus(kept.task.gpus), "0 (0000:40:00.0, NUMA 0) 1 (0000:c1:00.0, NUMA 1)")
      << "each GPU as the plan's verbose line describes it";
}

// A node of two L3 domains, CPUs 0-7 and 8-15, GPUs 0 and 1 in the first, 2 and 3 in the
// second, as the plan names them. Each planned task: its CPUs, its GPUs, the L3 it was placed in.
struct PlannedTask {
  std::string cpus;
  std::vector<int> gpus;
  int l3;
};

StepPlan domain_plan(const std::vector<PlannedTask>& tasks) {
  const char* pci[] = {"0000:40:00.0", "0000:42:00.0", "0001:41:00.0", "0001:43:00.0"};
  StepPlan plan;
  for (size_t rank = 0; rank < tasks.size(); ++rank) {
    TaskBinding task;
    task.rank = static_cast<int>(rank);
    task.cpus = tasks[rank].cpus;
    task.l3_index = task.numa_index = tasks[rank].l3;
    task.nic_names = tasks[rank].l3 == 0 ? "hsn0" : "hsn1";
    std::string tokens, pcis;
    for (int gpu : tasks[rank].gpus) {
      task.gpus.push_back({std::to_string(gpu), pci[gpu], gpu < 2 ? "L3 0" : "L3 1", gpu});
      tokens += (tokens.empty() ? "" : ",") + std::to_string(gpu);
      pcis += (pcis.empty() ? "" : ",") + std::string(pci[gpu]);
    }
    task.tokens = tokens;
    task.env = {{"ROCR_VISIBLE_DEVICES", tokens, false},
                {"GPUBIND_NIC", task.nic_names, false},
                {"OMP_NUM_THREADS", "4", true},
                {"GPUBIND_GPUS", tokens, false},
                {"GPUBIND_GPU_PCI", pcis, false}};
    plan.tasks.push_back(task);
  }
  return plan;
}

// One GPU per task, each in its own GPU's L3.
StepPlan four_task_plan() {
  return domain_plan({{"0-3", {0}, 0}, {"4-7", {1}, 0}, {"8-11", {2}, 1}, {"12-15", {3}, 1}});
}

const std::vector<int> kFourGpus{0, 1, 2, 3};
const std::vector<std::pair<int, std::string>> kFourTable{{0, "0"}, {1, "1"}, {2, "2"}, {3, "3"}};

TEST(GpusNearCpus, TheStepsGpusWhoseDomainHoldsOneOfTheCpus) {
  const StepPlan plan = four_task_plan();
  EXPECT_EQ(gpus_near_cpus(plan, kFourGpus, "2"), (std::vector<int>{0, 1}));
  EXPECT_EQ(gpus_near_cpus(plan, kFourGpus, "12-13"), (std::vector<int>{2, 3}));
  EXPECT_EQ(gpus_near_cpus(plan, kFourGpus, "7-8"), kFourGpus) << "CPUs of both domains";
  EXPECT_EQ(gpus_near_cpus(plan, {0, 2}, "9"), std::vector<int>{2}) << "the step's GPUs only";
  EXPECT_EQ(gpus_near_cpus(plan, {0, 1}, "9"), std::vector<int>{}) << "none near: a known answer";
  EXPECT_FALSE(gpus_near_cpus(plan, kFourGpus, "40")) << "a CPU the plan does not place";
  EXPECT_FALSE(gpus_near_cpus(domain_plan({{"0-3", {0}, 0}}), {0, 2}, "0"))
      << "a step GPU the plan does not place";
  // A task the plan could not place in its GPU's L3 lies in the L3 it was placed in.
  const StepPlan spilled = domain_plan({{"0-7", {0}, 0}, {"8-15", {1}, 1}});
  EXPECT_EQ(gpus_near_cpus(spilled, {0, 1}, "9"), std::vector<int>{});
  EXPECT_EQ(gpus_near_cpus(spilled, {0, 1}, "3"), (std::vector<int>{0, 1}));
}

// A closest or single task of a step on kFourGpus: its SLURM_STEP_GPUS, binding, Slurm's
// masks for the node's tasks.
std::optional<SlurmTaskGpus> by_cpus(const StepPlan& plan, const std::string& listed,
                                     const std::string& binding, int local_id,
                                     const std::string& cpus, const std::string& masks = "",
                                     const std::vector<int>& step = kFourGpus) {
  test_support::EnvMap vars{{"SLURM_STEP_GPUS", listed}, {"SLURMD_TRES_BIND", binding}};
  if (!masks.empty()) {
    vars["SLURM_CPU_BIND_TYPE"] = "mask_cpu:";
    vars["SLURM_CPU_BIND_LIST"] = masks;
  }
  return slurm_task_gpus(task_env(vars), step, local_id, 2, plan, cpus);
}

TEST(SlurmTaskGpus, ClosestWithoutConstrainDevicesIsWhatTheTaskListNames) {
  // Slurm's list names node GPUs when it names any but the step's first: it is taken as it is.
  const auto choice = by_cpus(four_task_plan(), "2,3", "gres/gpu:closest", 1, "8");
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(choice->binding, "closest");
  EXPECT_EQ(choice->same_total, -1) << "no masks of the other tasks";
}

TEST(SlurmTaskGpus, ClosestUnderConstrainDevicesIsFoundByTheTasksCpus) {
  // Task 1, bound to CPU 8, holds GPUs 2 and 3; its list names the step's first two GPUs.
  auto choice = by_cpus(four_task_plan(), "0,1", "gpu:closest", 1, "8", "0x1,0x100");
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(choice->same_before, 0);
  EXPECT_EQ(choice->same_total, 1) << "task 0, on CPU 0, holds GPUs 0 and 1";
  // Task 0 lists the same, and holds them.
  choice = by_cpus(four_task_plan(), "0,1", "gpu:closest", 0, "0", "0x1,0x100");
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->gpus, (std::vector<int>{0, 1}));
  // One GPU per domain in the step (0 and 2): task 1 lists "0" and holds GPU 2.
  choice = by_cpus(four_task_plan(), "0", "gpu:verbose,closest", 1, "8-9", "0x3,0x300", {0, 2});
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->gpus, std::vector<int>{2});
  EXPECT_EQ(choice->same_total, 1);
  // Both tasks in the first domain: both hold GPU 0, the second one counted after the first.
  choice = by_cpus(four_task_plan(), "0", "gpu:closest", 1, "1", "0x1,0x2", {0, 2});
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->gpus, std::vector<int>{0});
  EXPECT_EQ(choice->same_before, 1);
  EXPECT_EQ(choice->same_total, 2);
  // Tasks given other counts of GPUs are counted apart: task 0 holds GPUs 0 and 1, task 1 GPU 2.
  choice = by_cpus(four_task_plan(), "0", "gpu:closest", 1, "8", "0x1,0x100", {0, 1, 2});
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->gpus, std::vector<int>{2});
  EXPECT_EQ(choice->same_before, 0);
  EXPECT_EQ(choice->same_total, 1);
  // No GPU near the task's CPUs: Slurm gives the step's first.
  choice = by_cpus(four_task_plan(), "0", "gpu:closest", 1, "9", "", {0, 1});
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, std::vector<int>{0});
}

TEST(SlurmTaskGpus, WhatTheCpusDoNotDecideIsNotGuessed) {
  // Slurm listed one GPU, two are near: closest would have given both.
  auto choice = by_cpus(four_task_plan(), "0", "gpu:closest", 1, "8", "", {0, 2, 3});
  ASSERT_TRUE(choice);
  EXPECT_FALSE(choice->identified);
  EXPECT_TRUE(choice->among.empty());
  // Masks that disagree with the task's own CPUs leave the counts unknown.
  choice = by_cpus(four_task_plan(), "0,1", "gpu:closest", 1, "8", "0x1,0x2");
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->same_total, -1);
  // A CPU the plan does not place.
  choice = by_cpus(four_task_plan(), "0", "gpu:closest", 1, "40", "", {0, 2});
  ASSERT_TRUE(choice);
  EXPECT_FALSE(choice->identified);
}

TEST(SlurmTaskGpus, SingleIsItsOneNearGpuElseTheGpusItLiesAmong) {
  // One GPU near: that one.
  auto choice = by_cpus(four_task_plan(), "0", "gpu:single:1", 1, "8", "0x1,0x100", {0, 2});
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, std::vector<int>{2});
  // Two near (GPUs 2 and 3): Slurm's pick among them differs between releases; the domain is
  // known, the GPU is not.
  choice = by_cpus(four_task_plan(), "0", "gpu:single:1", 1, "8", "0x1,0x100");
  ASSERT_TRUE(choice);
  EXPECT_FALSE(choice->identified);
  EXPECT_EQ(choice->among, (std::vector<int>{2, 3}));
  EXPECT_EQ(choice->same_before, 0);
  EXPECT_EQ(choice->same_total, 1);
  // Unless Slurm's list names the GPU (without ConstrainDevices).
  choice = by_cpus(four_task_plan(), "3", "gpu:single:1", 1, "8", "0x1,0x100");
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, std::vector<int>{3});
  // None near: which GPU Slurm gives depends on the release.
  choice = by_cpus(four_task_plan(), "0", "gpu:single:1", 1, "9", "", {0, 1});
  ASSERT_TRUE(choice);
  EXPECT_FALSE(choice->identified);
  EXPECT_TRUE(choice->among.empty());
}

TEST(KeepSlurmGpus, ATaskKnownByItsDomainGetsItsCoresAndNicButNoGpuName) {
  const StepPlan plan = domain_plan({{"0-7", {0, 1}, 0}, {"8-15", {2, 3}, 1}});
  SlurmTaskGpus choice{{0}, false, "single:1", 0, 1, {2, 3}};
  const KeptBinding kept = keep_slurm_gpus(plan, kFourTable, choice, 1, "0");
  EXPECT_FALSE(kept.cores_may_be_shared);
  EXPECT_EQ(kept.task.cpus, "8-15");
  EXPECT_EQ(kept.task.nic_names, "hsn1");
  const auto env = env_map(kept.task);
  EXPECT_EQ(env.at("GPUBIND_GPUS"), "0") << "Slurm's token";
  EXPECT_EQ(env.count("GPUBIND_GPU_PCI"), 0u) << "which of the two it is, is not known";
  EXPECT_EQ(env.count("ROCR_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(env.at("GPUBIND_NIC"), "hsn1");
  EXPECT_EQ(describe_gpus(kept.task.gpus), "0") << "no bus id for an unknown GPU";
}

TEST(KeepSlurmGpus, PlannedTasksOutsideTheGpusL3LendNoCores) {
  // GPUs 0 and 1 in the first L3; the plan could place only GPU 0's task there.
  const StepPlan plan = domain_plan({{"0-7", {0}, 0}, {"8-15", {1}, 1}});
  const KeptBinding kept =
      keep_slurm_gpus(plan, kFourTable, SlurmTaskGpus{{0, 1}, true, "closest", 0, 1, {}}, 0, "0,1");
  EXPECT_EQ(kept.task.cpus, "0-7");
  EXPECT_EQ(env_map(kept.task).at("GPUBIND_GPU_PCI"), "0000:40:00.0,0000:42:00.0");
}

// A node of one NVIDIA and one AMD GPU: the plan numbers each vendor's GPUs from 0, so both
// tasks' tokens are "0"; their node indices tell them apart.
TEST(KeepSlurmGpus, GpusAreMatchedByNodeIndexNotByTokensNumberedPerVendor) {
  StepPlan plan;
  const char* pci[] = {"0000:01:00.0", "0000:0a:00.0"};
  for (int rank = 0; rank < 2; ++rank) {
    TaskBinding task;
    task.rank = rank;
    task.cpus = rank == 0 ? "0-3" : "4-7";
    task.tokens = "0";
    task.vendor = rank == 0 ? "nvidia" : "amd";
    task.gpus = {{"0", pci[rank], "L3 0", rank}};
    task.env = {{"GPUBIND_GPU_PCI", pci[rank], false}};
    plan.tasks.push_back(task);
  }
  const std::vector<std::pair<int, std::string>> table{{0, "0"}, {1, "1"}};
  // map_gpu:1,0: task 0 gets the AMD GPU (node 1), task 1 the NVIDIA one.
  for (int local = 0; local < 2; ++local) {
    const int gpu = 1 - local;
    const KeptBinding kept = keep_slurm_gpus(
        plan, table, SlurmTaskGpus{{gpu}, true, "map_gpu:1,0", 0, 1, {}}, local, "0");
    EXPECT_EQ(kept.basis, KeptBinding::Basis::kSameGpus) << local;
    EXPECT_EQ(kept.planned_rank, gpu);
    EXPECT_EQ(kept.task.cpus, gpu == 0 ? "0-3" : "4-7");
    EXPECT_EQ(env_map(kept.task).at("GPUBIND_GPU_PCI"), pci[gpu]);
  }
}

// Level Zero's FLAT hierarchy: each task holds one tile of card 0 or 1 (tokens "0".."3"); Slurm
// gives whole cards, and each task Slurm gave a card takes a planned task of one of its tiles.
TEST(KeepSlurmGpus, ATasksCardIsMatchedByThePlannedTasksOfItsTiles) {
  StepPlan plan;
  for (int rank = 0; rank < 4; ++rank) {
    TaskBinding task;
    task.rank = rank;
    task.cpus = std::to_string(rank * 4) + "-" + std::to_string(rank * 4 + 3);
    task.tokens = std::to_string(rank);
    task.gpus = {
        {std::to_string(rank), rank < 2 ? "0000:18:00.0" : "0000:42:00.0", "NUMA 0", rank / 2}};
    plan.tasks.push_back(task);
  }
  const std::vector<std::pair<int, std::string>> cards{{0, "0"}, {1, "1"}};
  // map_gpu:1,1,0,0: tasks 0 and 1 on card 1, tasks 2 and 3 on card 0.
  std::vector<std::string> cpus;
  for (int local = 0; local < 4; ++local) {
    const int card = local < 2 ? 1 : 0;
    const KeptBinding kept = keep_slurm_gpus(
        plan, cards, SlurmTaskGpus{{card}, true, "map_gpu:1,1,0,0", local % 2, 2, {}}, local,
        std::to_string(card));
    EXPECT_EQ(kept.basis, KeptBinding::Basis::kSameGpus) << local;
    EXPECT_FALSE(kept.cores_may_be_shared) << local;
    cpus.push_back(kept.task.cpus);
  }
  EXPECT_EQ(cpus, (std::vector<std::string>{"8-11", "12-15", "0-3", "4-7"}));
}

TEST(KeepSlurmGpus, GpusNoPlannedTaskHoldsAtAllKeepTheTasksOwnCores) {
  const StepPlan plan = two_gpu_plan();
  const KeptBinding kept =
      keep_slurm_gpus(plan, kTable, SlurmTaskGpus{{5}, true, "map_gpu:5", 0, 1, {}}, 3, "5");
  EXPECT_EQ(kept.basis, KeptBinding::Basis::kOwnTask);
  EXPECT_EQ(kept.planned_rank, 3);
  EXPECT_EQ(kept.task.cpus, "12-15");
  EXPECT_TRUE(kept.cores_may_be_shared);
}

}  // namespace
}  // namespace gpubind::client
