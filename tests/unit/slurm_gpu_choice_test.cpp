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

TEST(SlurmTaskGpus, OnlyWhereSlurmNarrowedTheTask) {
  const std::vector<int> step{0, 1};
  EXPECT_FALSE(slurm_task_gpus(task_env({{"SLURM_STEP_GPUS", "0,1"}}), step, 0, 2))
      << "the step's GPUs: no per-task choice";
  EXPECT_FALSE(slurm_task_gpus(task_env({{"SLURM_STEP_GPUS", "1,0"}}), step, 0, 2)) << "as a set";
  EXPECT_FALSE(slurm_task_gpus(task_env({}), step, 0, 2));
  EXPECT_FALSE(slurm_task_gpus(task_env({{"SLURM_STEP_GPUS", "1"}}), {}, 0, 2)) << "no GPUs asked";

  auto choice = slurm_task_gpus(
      task_env({{"SLURM_STEP_GPUS", "1"}, {"SLURMD_TRES_BIND", "gpu:verbose,map_gpu:1,0,1"}}), step,
      2, 3);
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, std::vector<int>{1});
  EXPECT_EQ(choice->binding, "map_gpu:1,0,1");
  EXPECT_EQ(choice->same_before, 1) << "task 0 has GPU 1 too";
  EXPECT_EQ(choice->same_total, 2);

  // Under ConstrainDevices the task's own list numbers its devices from 0: rank 0 of
  // map_gpu:1,0 lists "0" and holds GPU 1. Slurm's binding names it.
  choice = slurm_task_gpus(
      task_env({{"SLURM_STEP_GPUS", "0"}, {"SLURMD_TRES_BIND", "gpu:map_gpu:1,0"}}), step, 0, 2);
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, std::vector<int>{1});
  // per_task:2, rank 1 of 2 on 4 GPUs lists "0,1" and holds GPUs 2 and 3.
  choice = slurm_task_gpus(
      task_env({{"SLURM_STEP_GPUS", "0,1"}, {"SLURMD_TRES_BIND", "gpu:per_task:2"}}),
      std::vector<int>{0, 1, 2, 3}, 1, 2);
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->gpus, (std::vector<int>{2, 3}));
  // closest and single depend on CPU affinities: not identified, whatever the list says.
  choice = slurm_task_gpus(
      task_env({{"SLURM_STEP_GPUS", "0"}, {"SLURMD_TRES_BIND", "gpu:closest"}}), step, 0, 2);
  ASSERT_TRUE(choice);
  EXPECT_FALSE(choice->identified);
  EXPECT_EQ(choice->same_total, -1);
  // A count that disagrees with the binding is not trusted either.
  choice = slurm_task_gpus(
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
    SlurmTaskGpus choice{{local % 2 == 0 ? 1 : 0}, true, "map_gpu:1,0", local / 2, 2};
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
  }
  EXPECT_EQ(cpus, (std::vector<std::string>{"8-11", "0-3", "12-15", "4-7"}))
      << "the cores of its own GPU, none shared";
}

TEST(KeepSlurmGpus, MoreTasksOnAGpuThanPlannedShareItsCoresAndSaySo) {
  const StepPlan plan = two_gpu_plan();
  SlurmTaskGpus choice{{0}, true, "map_gpu:0", 2, 4};  // every task on GPU 0
  KeptBinding kept = keep_slurm_gpus(plan, kTable, choice, 2, "0");
  EXPECT_TRUE(kept.cores_may_be_shared);
  EXPECT_EQ(kept.task.cpus, "0-3");
  // Not counted (closest, single): still the GPU's cores, said to be possibly shared.
  kept = keep_slurm_gpus(plan, kTable, SlurmTaskGpus{{1}, false, "closest", -1, -1}, 1, "1");
  EXPECT_TRUE(kept.cores_may_be_shared);
  EXPECT_TRUE(kept.task.cpus == "8-11" || kept.task.cpus == "12-15");
}

TEST(KeepSlurmGpus, GpusNoPlannedTaskHoldsTakeTheCoresOfThoseThatHoldOne) {
  const StepPlan plan = two_gpu_plan();
  const KeptBinding kept =
      keep_slurm_gpus(plan, kTable, SlurmTaskGpus{{0, 1}, true, "mask_gpu:0x3", 0, 4}, 0, "0,1");
  EXPECT_TRUE(kept.cores_may_be_shared);
  EXPECT_EQ(kept.task.cpus, "0-15");
  EXPECT_EQ(env_map(kept.task).at("GPUBIND_GPU_PCI"), "0000:40:00.0,0000:c1:00.0");
  EXPECT_EQ(describe_gpus(kept.task.gpus), "0 (0000:40:00.0, NUMA 0) 1 (0000:c1:00.0, NUMA 1)")
      << "each GPU as the plan's verbose line describes it";
}

}  // namespace
}  // namespace gpubind::client
