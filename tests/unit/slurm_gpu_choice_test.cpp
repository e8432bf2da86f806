// Slurm's own per-task GPU choice (--gpu-bind, --gpus-per-task): read from the task's
// environment, computed for the whole step where the binding allows it, and kept in the binding.
#include "gpubind/client/slurm_gpu_choice.h"
#include "../support/env_map.h"
#include "gpubind/client/launch.h"

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

// Under ConstrainDevices map_gpu and mask_gpu ids count the job's GPUs from 0 (srun(1)): a job
// of node GPUs 1-3 with map_gpu:1,2 gives its tasks node GPUs 2 and 3.
TEST(SlurmGpuMap, UnderConstrainDevicesIdsCountTheJobsGpus) {
  const std::vector<int> step{1, 2, 3};
  EXPECT_EQ(slurm_gpu_map("map_gpu:1,2", step, 2, {1, 2, 3}), (Map{{2}, {3}}));
  EXPECT_EQ(slurm_gpu_map("mask_gpu:0x1,0x6", step, 2, {1, 2, 3}), (Map{{1}, {2, 3}}));
  EXPECT_FALSE(slurm_gpu_map("map_gpu:3", step, 1, {1, 2, 3})) << "no fourth GPU in the job";
  // Told from the step's list numbered from 0 while SLURM_STEP_GPUS names other GPUs.
  EXPECT_EQ(relative_gpu_ids(task_env({{"SLURM_STEP_GPUS", "1,2,3"},
                                       {"SLURM_JOB_GPUS", "1,2,3"},
                                       {"CUDA_VISIBLE_DEVICES", "0,1,2"}})),
            (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(
      relative_gpu_ids(task_env({{"SLURM_STEP_GPUS", "1,2,3"}, {"CUDA_VISIBLE_DEVICES", "1,2,3"}}))
          .empty())
      << "node indices: no ConstrainDevices";
  EXPECT_TRUE(
      relative_gpu_ids(task_env({{"SLURM_STEP_GPUS", "0,1"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}))
          .empty())
      << "both numberings agree";
  // The request carries the job's GPUs, not the ids.
  ExplicitBinding user;
  user.gpu = "map_gpu:1,2";
  const StepFacts facts = step_facts(task_env({{"SLURM_STEP_GPUS", "1,2,3"},
                                               {"SLURM_JOB_GPUS", "1,2,3"},
                                               {"ROCR_VISIBLE_DEVICES", "0,1,2"}}),
                                     user, false);
  StepRequest request;
  request.ntasks = 2;
  request.allowed_cpus = "0-3";
  request.gpus = {{1, "0"}, {2, "1"}, {3, "2"}};
  add_facts(facts, request);
  ASSERT_EQ(request.fixed.size(), 2u);
  EXPECT_EQ(request.fixed[0].gpus, std::vector<int>{1}) << "node GPU 2, the step's second";
  EXPECT_EQ(request.fixed[1].gpus, std::vector<int>{2});
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
  return slurm_task_gpus(env, step, local_id, local_tasks, StepPlan{}, CpuSet{});
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
  // Under ConstrainDevices the task's own list names the step's first GPUs: rank 0 of
  // map_gpu:1,0 lists "0" and holds GPU 1. Slurm's binding names it.
  choice = choice_by_text(
      task_env({{"SLURM_STEP_GPUS", "0"}, {"SLURMD_TRES_BIND", "gpu:map_gpu:1,0"}}), step, 0, 2);
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, std::vector<int>{1});
  // A count that disagrees with the binding is not identified.
  choice =
      choice_by_text(task_env({{"SLURM_STEP_GPUS", "0"}, {"SLURMD_TRES_BIND", "gpu:per_task:2"}}),
                     {0, 1, 2, 3}, 1, 2);
  ASSERT_TRUE(choice);
  EXPECT_FALSE(choice->identified);
}

// Two domains, CPUs 0-7 holding GPUs 0 and 1, CPUs 8-15 GPUs 2 and 3, as gpu_places say; one
// planned task per GPU in its domain.
StepPlan four_task_plan() {
  StepPlan plan;
  const char* cpus[] = {"0-3", "4-7", "8-11", "12-15"};
  for (int gpu = 0; gpu < 4; ++gpu) {
    plan.gpu_places.push_back({gpu, gpu < 2 ? "0-7" : "8-15"});
    TaskBinding task;
    task.rank = gpu;
    task.cpus = cpus[gpu];
    task.gpus.push_back({std::to_string(gpu), "", "", gpu});
    task.tokens = std::to_string(gpu);
    task.env = {{"ROCR_VISIBLE_DEVICES", task.tokens, false}, {"GPUBIND_NIC", "hsn0", false}};
    plan.tasks.push_back(task);
  }
  return plan;
}

const std::vector<int> kFourGpus{0, 1, 2, 3};

CpuSet cpus(const std::string& list) {
  return *CpuSet::parse_list(list);
}

// --gpus-per-task=1 on GPUs 0-3: under ConstrainDevices each task's list is "0" (its own
// numbering, its cgroup holding its GPU alone); without it node indices; with
// --gres-flags=allow-task-sharing (24.05.2 and later) indices within the job. Task 1 is the first
// whose GPU is not the step's first: it tells, and says it.
TEST(GpuIsolation, OnlyDevicesNumberedFromZeroForAnotherGpuShowIt) {
  const StepPlan plan = four_task_plan();
  EXPECT_EQ(task_showing_gpu_isolation(plan, kFourGpus), 1);
  EXPECT_TRUE(gpus_isolated_per_task(
      task_env({{"CUDA_VISIBLE_DEVICES", "0"}, {"SLURM_STEP_GPUS", "0"}}), {1}, kFourGpus));
  EXPECT_FALSE(gpus_isolated_per_task(
      task_env({{"CUDA_VISIBLE_DEVICES", "1"}, {"SLURM_STEP_GPUS", "1"}}), {1}, kFourGpus))
      << "node indices (no ConstrainDevices) or allow-task-sharing's indices within the job";
  EXPECT_FALSE(gpus_isolated_per_task(task_env({{"CUDA_VISIBLE_DEVICES", "0"}}), {0}, kFourGpus))
      << "the step's first GPU reads \"0\" in every numbering";
  // A job holding GPUs 2 and 3: with allow-task-sharing task 1 reads "1" (within the job), under
  // ConstrainDevices alone "0".
  EXPECT_FALSE(gpus_isolated_per_task(task_env({{"CUDA_VISIBLE_DEVICES", "1"}}), {3}, {2, 3}));
  EXPECT_TRUE(gpus_isolated_per_task(task_env({{"CUDA_VISIBLE_DEVICES", "0"}}), {3}, {2, 3}));
  // Two GPUs per task: task 1 holds 2 and 3, listed "0,1" only under ConstrainDevices.
  EXPECT_TRUE(
      gpus_isolated_per_task(task_env({{"ROCR_VISIBLE_DEVICES", "0,1"}}), {2, 3}, kFourGpus));
  EXPECT_FALSE(
      gpus_isolated_per_task(task_env({{"ROCR_VISIBLE_DEVICES", "2,3"}}), {2, 3}, kFourGpus));
  // One task, or every task on the step's first GPUs: nobody can tell, nobody says it.
  StepPlan one = plan;
  one.tasks.resize(1);
  EXPECT_EQ(task_showing_gpu_isolation(one, kFourGpus), -1);
}

TEST(GpusNearCpus, TheStepsGpusWhoseDomainHoldsOneOfTheCpus) {
  const StepPlan plan = four_task_plan();
  EXPECT_EQ(gpus_near_cpus(plan, kFourGpus, cpus("2")), (std::vector<int>{0, 1}));
  EXPECT_EQ(gpus_near_cpus(plan, kFourGpus, cpus("12-13")), (std::vector<int>{2, 3}));
  EXPECT_EQ(gpus_near_cpus(plan, kFourGpus, cpus("7-8")), kFourGpus) << "CPUs of both domains";
  EXPECT_EQ(gpus_near_cpus(plan, {0, 2}, cpus("9")), std::vector<int>{2}) << "the step's only";
  EXPECT_EQ(gpus_near_cpus(plan, {0, 1}, cpus("9")), std::vector<int>{}) << "none near";
  StepPlan old_daemon = plan;
  old_daemon.gpu_places.clear();
  EXPECT_FALSE(gpus_near_cpus(old_daemon, kFourGpus, cpus("2"))) << "no places: not told";
}

std::optional<SlurmTaskGpus> by_cpus(const std::string& listed, const std::string& binding,
                                     int local_id, const std::string& task_cpus,
                                     const std::vector<int>& step = kFourGpus) {
  return slurm_task_gpus(task_env({{"SLURM_STEP_GPUS", listed}, {"SLURMD_TRES_BIND", binding}}),
                         step, local_id, 2, four_task_plan(), cpus(task_cpus));
}

TEST(SlurmTaskGpus, ClosestIsWhatTheTaskListNamesElseFoundByItsCpus) {
  auto choice = by_cpus("2,3", "gres/gpu:closest", 1, "8");
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, (std::vector<int>{2, 3})) << "node indices: taken as they are";
  // Under ConstrainDevices: task 1 on CPU 8 lists the step's first two and holds GPUs 2 and 3.
  choice = by_cpus("0,1", "gpu:closest", 1, "8");
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, (std::vector<int>{2, 3}));
  // No GPU near: Slurm gives the step's first.
  choice = by_cpus("0", "gpu:closest", 1, "9", {0, 1});
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->gpus, std::vector<int>{0});
  // One listed, two near: closest would have given both; not told.
  choice = by_cpus("0", "gpu:closest", 1, "8", {0, 2, 3});
  ASSERT_TRUE(choice);
  EXPECT_FALSE(choice->identified);
}

TEST(SlurmTaskGpus, SingleIsItsOneNearGpuOnly) {
  auto choice = by_cpus("0", "gpu:single:1", 1, "8", {0, 2});
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->identified);
  EXPECT_EQ(choice->gpus, std::vector<int>{2});
  choice = by_cpus("0", "gpu:single:1", 1, "8");
  ASSERT_TRUE(choice);
  EXPECT_FALSE(choice->identified) << "two near: which one Slurm gave differs between releases";
}

// The launch side decides nothing: it applies the planned task where the task's own facts agree
// with the plan, else keeps Slurm's binding and says why.
TEST(DecideLaunch, AppliesThePlannedTaskWhereSlurmsChoiceAgrees) {
  const StepPlan plan = four_task_plan();
  StepFacts facts;
  facts.gpu_binding = "closest";
  const TaskLaunch task{2, 4, cpus("8-11")};
  auto decision = decide_launch(
      plan, facts, kFourGpus,
      task_env({{"SLURM_STEP_GPUS", "2"}, {"SLURMD_TRES_BIND", "gpu:closest"}}), task, false);
  EXPECT_TRUE(decision.apply) << "closest named GPU 2, which the plan gives local task 2";
  // Under ConstrainDevices (the step's first GPU listed), found by its CPUs: near GPUs 2 and 3,
  // closest gives both, the plan one.
  EXPECT_FALSE(
      decide_launch(plan, facts, kFourGpus,
                    task_env({{"SLURM_STEP_GPUS", "0,1"}, {"SLURMD_TRES_BIND", "gpu:closest"}}),
                    task, false)
          .apply);
  decision = decide_launch(
      plan, facts, kFourGpus,
      task_env({{"SLURM_STEP_GPUS", "2"}, {"SLURMD_TRES_BIND", "gpu:map_gpu:0,1,2,3"}}), task,
      false);
  ASSERT_TRUE(decision.apply) << decision.why;
  EXPECT_EQ(decision.planned, 2);
  EXPECT_TRUE(decision.slurm_chose_gpus);
  EXPECT_FALSE(decision.options.set_gpu_visibility) << "Slurm's visibility stays";
  EXPECT_FALSE(decision.options.align_other_visibility);
}

// closest where Slurm gave the task every step GPU (all near): nothing to check, and Slurm's
// GPU variables stay its own (the plan's other vendors' variables are not aligned to the plan).
TEST(DecideLaunch, UnderClosestSlurmsGpuVariablesStayEvenUnnarrowed) {
  StepFacts facts;
  facts.gpu_binding = "closest";
  const auto decision =
      decide_launch(four_task_plan(), facts, kFourGpus,
                    task_env({{"SLURM_STEP_GPUS", "0,1,2,3"}, {"SLURMD_TRES_BIND", "gpu:closest"}}),
                    TaskLaunch{2, 4, cpus("8-11")}, false);
  ASSERT_TRUE(decision.apply);
  EXPECT_FALSE(decision.options.set_gpu_visibility);
  EXPECT_FALSE(decision.options.align_other_visibility);
  StepFacts none;
  none.slurm_gpu_vars = true;  // --gpu-bind=none
  EXPECT_FALSE(decide_launch(four_task_plan(), none, kFourGpus, task_env({}),
                             TaskLaunch{0, 4, cpus("0-3")}, false)
                   .options.align_other_visibility);
}

TEST(DecideLaunch, KeepsSlurmsBindingWhereTheFactsDisagreeAndSaysWhy) {
  const StepPlan plan = four_task_plan();
  StepFacts facts;
  // Slurm gave local task 0 GPU 3; the plan has GPU 0 for it.
  auto decision = decide_launch(
      plan, facts, kFourGpus,
      task_env({{"SLURM_STEP_GPUS", "3"}, {"SLURMD_TRES_BIND", "gpu:map_gpu:3,2,1,0"}}),
      TaskLaunch{0, 4, cpus("0-3")}, false);
  EXPECT_FALSE(decision.apply);
  EXPECT_NE(decision.why.find("Slurm gave it GPUs 3"), std::string::npos) << decision.why;
  // The user's CPU list, planned as CPUs 0-3, but Slurm bound CPU 5.
  facts.user.cpu = "map_cpu:5";
  facts.slurm_cpus = facts.cpus_listed = true;
  decision =
      decide_launch(plan, facts, kFourGpus, task_env({}), TaskLaunch{0, 4, cpus("5")}, false);
  EXPECT_FALSE(decision.apply);
  EXPECT_NE(decision.why.find("CPUs 5"), std::string::npos) << decision.why;
  decision =
      decide_launch(plan, facts, kFourGpus, task_env({}), TaskLaunch{0, 4, cpus("0-3")}, false);
  EXPECT_TRUE(decision.apply) << decision.why;
  EXPECT_FALSE(decision.options.bind_cpus) << "already bound as planned";
  // No plan entry for the task.
  EXPECT_FALSE(
      decide_launch(plan, StepFacts{}, kFourGpus, task_env({}), TaskLaunch{7, 8, {}}, false).apply);
}

TEST(StepFacts, SlurmsGpuBindingAndTheUsersCpuListGoInTheRequest) {
  ExplicitBinding user;
  user.gpu = "map_gpu:2,0";
  user.cpu = "mask_cpu:0x2,0x1";
  const StepFacts facts = step_facts(task_env({}), user, false);
  EXPECT_EQ(facts.gpu_binding, "map_gpu:2,0") << "the user's own --gpu-bind before the tasks";
  StepRequest request;
  request.ntasks = 2;
  request.allowed_cpus = "0-3";
  request.gpus = {{0, "0"}, {1, "1"}, {2, "2"}, {3, "3"}};
  EXPECT_EQ(add_facts(facts, request), "");
  ASSERT_EQ(request.fixed.size(), 2u);
  EXPECT_EQ(request.fixed[0].gpus, std::vector<int>{2}) << "positions in the step's list";
  EXPECT_EQ(request.fixed[1].gpus, std::vector<int>{0});
  EXPECT_EQ(request.fixed[0].cpus, "1");
  EXPECT_EQ(request.fixed[1].cpus, "0");
  // --gpus-per-task implies per_task; the site's override keeps the CPUs gpubind's.
  const StepFacts per_task = step_facts(task_env({{"SLURM_GPUS_PER_TASK", "2"}}), user, true);
  EXPECT_FALSE(per_task.slurm_cpus);
  EXPECT_EQ(step_facts(task_env({{"SLURM_GPUS_PER_TASK", "2"}}), {}, false).gpu_binding,
            "per_task:2");
  // closest with an explicit CPU list: the planner follows Slurm's rule over those CPUs.
  StepRequest listed = request;
  listed.fixed.clear();
  StepFacts closest_listed = facts;
  closest_listed.gpu_binding = "closest";
  add_facts(closest_listed, listed);
  EXPECT_EQ(listed.slurm_gpu_rule, "closest");
  ASSERT_EQ(listed.fixed.size(), 2u);
  EXPECT_TRUE(listed.fixed[0].gpus.empty()) << "which GPUs is the planner's to work out";
  // closest: GPU variables stay Slurm's, nothing fixed here.
  StepRequest closest = request;
  closest.fixed.clear();
  StepFacts by_cpu;
  by_cpu.gpu_binding = "closest";
  add_facts(by_cpu, closest);
  EXPECT_TRUE(closest.gpus_named_by_slurm) << "Slurm's variables name each task's GPUs";
  EXPECT_FALSE(closest.no_gpu_env) << "the plan's other GPU variables still set";
  EXPECT_TRUE(closest.fixed.empty());
}

TEST(CpuBindLists, ListsSayEachTasksCpusOthersDoNot) {
  auto lists = cpu_bind_lists("mask_cpu:0x3,0xc", 3);
  ASSERT_TRUE(lists);
  EXPECT_EQ((*lists)[2].to_list(), "0-1") << "reused in turn";
  EXPECT_EQ((*cpu_bind_lists("map_cpu:5,4", 2))[1].to_list(), "4");
  EXPECT_FALSE(cpu_bind_lists("none", 2)) << "every task the step's CPUs: none its own";
  EXPECT_FALSE(cpu_bind_lists("cores", 2));
  EXPECT_FALSE(cpu_bind_lists("mask_cpu:zz", 2));
}

}  // namespace
}  // namespace gpubind::client
