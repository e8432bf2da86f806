// The launch client's two shared steps: the request built once from a step's shape (for a Slurm
// step and for a launcher's workers alike), and a task's binding applied to the process.
#include <gtest/gtest.h>

#include <map>

#include "../support/env_map.h"
#include "gpubind/affinity.h"
#include "gpubind/client/apply.h"
#include "gpubind/client/request.h"

namespace gpubind::client {
namespace {

using Env = test_support::EnvMap;

EnvLookup lookup(const Env& env) {
  return test_support::env_lookup(env);
}

// A task's environment held in a map, with the calls it received.
class MapEnvironment final : public TaskEnvironment {
 public:
  explicit MapEnvironment(Env vars) : vars(std::move(vars)) {}
  std::optional<std::string> get(const std::string& name) const override {
    const auto found = vars.find(name);
    if (found == vars.end()) return std::nullopt;
    return found->second;
  }
  bool set(const std::string& name, const std::string& value) override {
    if (refuse == name) return false;
    vars[name] = value;
    return true;
  }
  void unset(const std::string& name) override { vars.erase(name); }

  Env vars;
  std::string refuse;  // a variable set() fails for
};

UserFlags flags_of(const std::string& text) {
  auto flags = parse_user_flags(text);
  EXPECT_TRUE(flags) << flags.error().message;
  return flags ? *flags : UserFlags{};
}

TEST(Request, TheShapeAndFlagsMakeTheSameFieldsForEveryClient) {
  StepShape shape;
  shape.job_id = 7;
  shape.step_id = 3;
  shape.ntasks = 4;
  shape.cpus = *CpuSet::parse_list("0-7");
  shape.allowed_cores = "0-3";
  const Env env = {{"ZE_FLAT_DEVICE_HIERARCHY", "COMPOSITE"}};
  const StepRequest request =
      make_request(shape, flags_of("order=cpu,no-nic-env,omp,no-gpu-env"), lookup(env));
  EXPECT_EQ(request.job_id, 7u);
  EXPECT_EQ(request.step_id, 3u);
  EXPECT_EQ(request.ntasks, 4);
  EXPECT_EQ(request.allowed_cpus, "0-7");
  EXPECT_EQ(request.allowed_cores, "0-3");
  EXPECT_EQ(request.order, "cpu");
  EXPECT_EQ(request.smt, -1) << "no choice: the policy's";
  EXPECT_TRUE(request.no_gpu_env);
  EXPECT_TRUE(request.no_nic_env);
  EXPECT_TRUE(request.omp);
  EXPECT_EQ(request.ze_hierarchy, "composite");
}

TEST(Request, TheUsersSmtWinsOverTheStepsThreadChoice) {
  StepShape shape;
  shape.threads_per_core = 1;
  EXPECT_EQ(make_request(shape, flags_of(""), lookup({})).smt, 1);
  EXPECT_EQ(make_request(shape, flags_of("smt=2"), lookup({})).smt, 2);
}

TEST(Request, ASlurmStepReadsItsGpusCountsAndThreadsFromItsEnvironment) {
  const Env env = {{"SLURM_STEP_GPUS", "2,3"},        {"CUDA_VISIBLE_DEVICES", "0,1"},
                   {"SLURM_THREADS_PER_CORE", "1"},   {"SLURM_CPUS_PER_TASK", "8"},
                   {"SLURM_GPUS_PER_TASK", "a100:1"}, {"SLURM_NTASKS_PER_GPU", "1"}};
  StepShape shape;
  shape.ntasks = 2;
  const BuiltRequest built = slurm_step_request(shape, lookup(env), flags_of(""), SiteArgs{});
  const StepRequest& request = built.request;
  EXPECT_TRUE(request.gpus_given);
  EXPECT_EQ(request.gpus, (std::vector<std::pair<int, std::string>>{{2, "0"}, {3, "1"}}));
  EXPECT_EQ(request.smt, 1) << "the step's --threads-per-core";
  EXPECT_EQ(request.cpus_per_task, 8);
  EXPECT_EQ(request.gpus_per_task, 1);
  EXPECT_EQ(request.tasks_per_gpu, 1);
  EXPECT_TRUE(built.warning.empty());
}

TEST(Request, EveryNodeGpuOnlyWhereTheSiteSaysSlurmDoesNotManageGpus) {
  SiteArgs site;
  EXPECT_TRUE(slurm_step_request({}, lookup({}), flags_of(""), site).request.gpus_given);
  site.gpus_without_gres_node = true;
  EXPECT_FALSE(slurm_step_request({}, lookup({}), flags_of(""), site).request.gpus_given);
  EXPECT_TRUE(slurm_step_request({}, lookup({{"SLURM_JOB_GPUS", "0"}}), flags_of(""), site)
                  .request.gpus_given)
      << "Slurm said something about GPUs";
}

TEST(Request, ALaunchersWorkersShareOutItsCpusWithoutSlurmsPerTaskCounts) {
  LocalRank place;
  place.rank = 1;
  place.size = 4;
  const Env env = {{"SLURM_JOB_ID", "12"},
                   {"SLURM_THREADS_PER_CORE", "1"},
                   {"SLURM_CPUS_PER_TASK", "8"},
                   {"CUDA_VISIBLE_DEVICES", "0,1"},
                   {"SLURM_STEP_GPUS", "4,5"}};
  const BuiltRequest built =
      launcher_step_request(place, *CpuSet::parse_list("0-15"), lookup(env), flags_of(""));
  const StepRequest& request = built.request;
  EXPECT_EQ(request.job_id, 12u);
  EXPECT_EQ(request.ntasks, 4) << "every worker of the node";
  EXPECT_EQ(request.allowed_cpus, "0-15");
  EXPECT_EQ(request.smt, -1) << "the Slurm task's thread choice is not the workers'";
  EXPECT_EQ(request.cpus_per_task, 0);
  EXPECT_EQ(request.gpus, (std::vector<std::pair<int, std::string>>{{4, "0"}, {5, "1"}}));
  EXPECT_FALSE(built.gpu_source.empty());
}

TaskBinding task_on_own_cpus() {
  TaskBinding task;
  task.cpus = current_affinity().to_list();
  task.vendor = "amd";
  task.tokens = "1";
  task.gpus = {{.token = "1", .pci = "0000:c1:00.0", .locality = "L3 1", .node_index = 1}};
  task.env = {{"ROCR_VISIBLE_DEVICES", "1", false},
              {"OMP_NUM_THREADS", "4", false},
              {"NCCL_SOCKET_IFNAME", "hsn0", true}};
  return task;
}

TEST(ApplyBinding, SetsTheVariablesRecordsThemAndKeepsTheUsersWhereOnlyIfUnset) {
  MapEnvironment env(Env{{"NCCL_SOCKET_IFNAME", "mine"}});
  ASSERT_TRUE(apply_binding(task_on_own_cpus(), env, {.align_other_visibility = false}));
  EXPECT_EQ(env.vars["ROCR_VISIBLE_DEVICES"], "1");
  EXPECT_EQ(env.vars["OMP_NUM_THREADS"], "4");
  EXPECT_EQ(env.vars["NCCL_SOCKET_IFNAME"], "mine");
  const auto record = env.vars.find(kSetRecordVar);
  ASSERT_NE(record, env.vars.end());
  EXPECT_NE(record->second.find("OMP_NUM_THREADS:"), std::string::npos);
  EXPECT_EQ(record->second.find("NCCL_SOCKET_IFNAME"), std::string::npos) << "not set: not ours";
}

// Where Slurm names the task's GPUs, the variables Slurm sets stay its own; an inherited HIP list
// the plan rewrote (Slurm never sets HIP's) is still applied.
TEST(ApplyBinding, SlurmsVisibilityStaysTheRewrittenHipListIsApplied) {
  MapEnvironment env(Env{{"ROCR_VISIBLE_DEVICES", "0"}, {"HIP_VISIBLE_DEVICES", "0,1,2,3"}});
  TaskBinding task = task_on_own_cpus();
  task.env.push_back({"HIP_VISIBLE_DEVICES", "0", false});
  ASSERT_TRUE(
      apply_binding(task, env, {.align_other_visibility = false, .set_gpu_visibility = false}));
  EXPECT_EQ(env.vars["ROCR_VISIBLE_DEVICES"], "0") << "Slurm's";
  EXPECT_EQ(env.vars["HIP_VISIBLE_DEVICES"], "0");
}

TEST(ApplyBinding, AVariableThatCannotBeSetIsNotRecorded) {
  MapEnvironment env(Env{});
  env.refuse = "OMP_NUM_THREADS";
  ASSERT_TRUE(apply_binding(task_on_own_cpus(), env, {}));
  EXPECT_EQ(env.vars[kSetRecordVar].find("OMP_NUM_THREADS"), std::string::npos);
}

TEST(ApplyBinding, OtherVisibilityVariablesFollowThePrimaryOnlyWhenAsked) {
  const Env slurm = {{"CUDA_VISIBLE_DEVICES", "0,1"}, {"ROCR_VISIBLE_DEVICES", "0,1"}};
  MapEnvironment aligned(slurm), left(slurm);
  ASSERT_TRUE(apply_binding(task_on_own_cpus(), aligned, {.align_other_visibility = true}));
  ASSERT_TRUE(apply_binding(task_on_own_cpus(), left, {.align_other_visibility = false}));
  EXPECT_EQ(aligned.vars["CUDA_VISIBLE_DEVICES"], "0") << "HIP counts within ROCm's narrowed list";
  EXPECT_EQ(left.vars["CUDA_VISIBLE_DEVICES"], "0,1");
}

// Slurm never sets HIP_VISIBLE_DEVICES: one in the task is the user's, and stays theirs unless
// the site's policy sets it.
TEST(ApplyBinding, AUsersHipVisibleDevicesIsLeftAlone) {
  MapEnvironment env(Env{{"HIP_VISIBLE_DEVICES", "1"}, {"ROCR_VISIBLE_DEVICES", "0,1"}});
  ASSERT_TRUE(apply_binding(task_on_own_cpus(), env, {.align_other_visibility = true}));
  EXPECT_EQ(env.vars["HIP_VISIBLE_DEVICES"], "1");
}

// A variable the plan sets is the plan's: a vendor the task has no GPU of keeps its emptied
// list, not the task's tokens.
TEST(ApplyBinding, WhatThePlanSetsIsNotRealigned) {
  TaskBinding task = task_on_own_cpus();
  task.env.push_back({"CUDA_VISIBLE_DEVICES", "", false});
  MapEnvironment env(Env{{"CUDA_VISIBLE_DEVICES", "0,1"}, {"ROCR_VISIBLE_DEVICES", "0,1"}});
  ASSERT_TRUE(apply_binding(task, env, {.align_other_visibility = true}));
  EXPECT_EQ(env.vars["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env.vars["ROCR_VISIBLE_DEVICES"], "1");
}

TEST(ApplyBinding, WhatAnOuterBindingLeftIsClearedOnlyWhenAsked) {
  const Env outer = {{"GPUBIND_BOUND", "1"}};
  MapEnvironment cleared(outer), kept(outer);
  ASSERT_TRUE(apply_binding(task_on_own_cpus(), cleared, {.clear_stale = true}));
  ASSERT_TRUE(apply_binding(task_on_own_cpus(), kept, {.clear_stale = false}));
  EXPECT_FALSE(cleared.vars.contains("GPUBIND_BOUND"));
  EXPECT_TRUE(kept.vars.contains("GPUBIND_BOUND"));
}

TEST(ApplyBinding, CpusThatCannotBeSetChangeNothing) {
  const Env before = {{"GPUBIND_BOUND", "1"}, {"OMP_NUM_THREADS", "9"}};
  TaskBinding task = task_on_own_cpus();
  for (const std::string& cpus : {std::string("not-a-list"), std::string("4095")}) {
    task.cpus = cpus;
    MapEnvironment env(before);
    const auto applied = apply_binding(task, env, {.clear_stale = true});
    EXPECT_FALSE(applied) << cpus;
    EXPECT_EQ(env.vars, before) << cpus << ": nothing half-applied";
  }
}

TEST(ApplyBinding, ASlurmCpuBindingIsLeftAsItIs) {
  const CpuSet before = current_affinity();
  TaskBinding task = task_on_own_cpus();
  task.cpus = "4095";  // would fail if it were set
  MapEnvironment env(Env{});
  EXPECT_TRUE(apply_binding(task, env, {.bind_cpus = false}));
  EXPECT_EQ(current_affinity(), before);
  EXPECT_EQ(env.vars["ROCR_VISIBLE_DEVICES"], "1");
}

}  // namespace
}  // namespace gpubind::client
