// What the plugin applies from an answer: only what stays inside the step, and only variables
// binding is about (the env-name rules, the answer check, the site's additions).
#include "gpubind/client/answer_check.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "gpubind/api/convert.h"
#include "gpubind/client/options.h"
#include "gpubind/env_names.h"
#include "gpubind/node.h"
#include "gpubind/protocol/client.h"

namespace gpubind::client {
namespace {

TEST(EnvNames, NamesThatChangeWhatRunsAreNeverBindingVariables) {
  for (const char* name :
       {"LD_PRELOAD", "LD_LIBRARY_PATH", "PATH", "BASH_ENV", "ENV", "PYTHONPATH", "PYTHONSTARTUP",
        "PERL5LIB", "NODE_OPTIONS", "GLIBC_TUNABLES", "OMP_TOOL_LIBRARIES", "CUDA_INJECTION64_PATH",
        "NCCL_NET_PLUGIN", "SLURM_JOB_ID", "ZE_ENABLE_VALIDATION_LAYER"}) {
    EXPECT_TRUE(changes_what_runs(name)) << name;
    EXPECT_FALSE(is_binding_variable(name, {"LD_*", "PATH", "SLURM_JOB_ID", "*"})) << name;
  }
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
                           "MPICH_OFI_NIC_POLICY", "NCCL_IB_HCA", "UCX_NET_DEVICES",
                           "OMP_NUM_THREADS", "OMP_PLACES", "GPUBIND_CPUS", "FI_PROVIDER"}) {
    EXPECT_FALSE(changes_what_runs(name)) << name;
    EXPECT_TRUE(is_binding_variable(name)) << name;
  }
  EXPECT_FALSE(is_binding_variable("FI_CXI_DEFAULT_VNI"));
  EXPECT_TRUE(is_binding_variable("FI_CXI_DEFAULT_VNI", {"FI_CXI_*"})) << "a site's prefix";
  EXPECT_TRUE(is_binding_variable("MY_SITE_VAR", {"MY_SITE_VAR"})) << "a site's name";
}

// APPTAINERENV_NAME is NAME inside the container: judged as NAME; the runtimes' own settings
// (APPTAINER_BIND...) change what runs.
TEST(EnvNames, AContainerRuntimesTwinIsJudgedAsItsVariable) {
  EXPECT_TRUE(is_binding_variable("APPTAINERENV_CUDA_VISIBLE_DEVICES"));
  EXPECT_TRUE(is_binding_variable("SINGULARITYENV_GPUBIND_CPUS"));
  EXPECT_EQ(container_twin_of("APPTAINERENV_OMP_NUM_THREADS"), "OMP_NUM_THREADS");
  EXPECT_EQ(container_twin_of("OMP_NUM_THREADS"), "");
  for (const char* name : {"APPTAINERENV_LD_PRELOAD", "SINGULARITYENV_PATH", "APPTAINER_BIND",
                           "SINGULARITY_CONTAINER", "APPTAINERENV_SLURM_JOB_ID"}) {
    EXPECT_TRUE(changes_what_runs(name)) << name;
    EXPECT_FALSE(is_binding_variable(name, {"*"})) << name;
  }
  EXPECT_FALSE(is_binding_variable("APPTAINERENV_FI_CXI_DEFAULT_VNI"));
  EXPECT_TRUE(is_binding_variable("APPTAINERENV_FI_CXI_DEFAULT_VNI", {"FI_CXI_*"}));
}

TEST(SiteArgs, DaemonUserAndAllowedVariables) {
  auto site = parse_site_args({"daemon_user=gpubindd", "env_allow=FI_CXI_*,MY_VAR"});
  ASSERT_TRUE(site) << site.error().message;
  EXPECT_EQ(site->daemon_user, "gpubindd");
  EXPECT_EQ(site->env_allow, (std::vector<std::string>{"FI_CXI_*", "MY_VAR"}));
  EXPECT_EQ(parse_site_args({})->daemon_user, "gpubind");
  auto refused = parse_site_args({"env_allow=NCCL_IB_HCA,LD_PRELOAD"});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("'LD_PRELOAD' changes what a task runs"),
            std::string::npos);
  EXPECT_FALSE(parse_site_args({"env_allow=SLURM_*"}));
  EXPECT_FALSE(parse_site_args({"env_allow=A B"}));
  EXPECT_FALSE(parse_site_args({"daemon_user="}));
}

// A step of two tasks on CPUs 0-7 with node GPUs 4 and 5, which the step names "0" and "1".
StepRequest two_task_step() {
  StepRequest request;
  request.ntasks = 2;
  request.allowed_cpus = "0-7";
  request.gpus_given = true;
  request.gpus = {{4, "0"}, {5, "1"}};
  return request;
}

StepPlan honest_plan() {
  StepPlan plan;
  for (int rank = 0; rank < 2; ++rank) {
    TaskBinding task;
    task.rank = rank;
    task.cpus = rank == 0 ? "0-3" : "4-7";
    task.vendor = "amd";
    task.tokens = std::to_string(rank);
    task.gpus = {{task.tokens, "0000:c1:00.0", "L3 6", 4 + rank}};
    task.env = {{"ROCR_VISIBLE_DEVICES", task.tokens, false},
                {"OMP_NUM_THREADS", "4", true},
                {"MPICH_OFI_NIC_POLICY", "USER", true},
                {"GPUBIND_CPUS", task.cpus, false}};
    plan.tasks.push_back(task);
  }
  return plan;
}

::testing::AssertionResult refused(const StepPlan& plan, const std::string& why,
                                   const std::vector<std::string>& site = {}) {
  auto checked = check_answer(two_task_step(), plan, site);
  if (checked) return ::testing::AssertionFailure() << "accepted";
  if (checked.error().message.find(why) == std::string::npos)
    return ::testing::AssertionFailure()
           << "'" << checked.error().message << "' lacks '" << why << "'";
  return ::testing::AssertionSuccess();
}

TEST(AnswerCheck, AnHonestPlanPasses) {
  auto checked = check_answer(two_task_step(), honest_plan(), {});
  EXPECT_TRUE(checked) << checked.error().message;
}

// What the fake daemon of the security review answered, one change at a time.
TEST(AnswerCheck, WhatAHostileDaemonAnswersIsRefusedByName) {
  StepPlan plan = honest_plan();
  plan.tasks.pop_back();
  EXPECT_TRUE(refused(plan, "1 tasks planned for a step of 2"));

  plan = honest_plan();
  plan.tasks[1].rank = 0;
  EXPECT_TRUE(refused(plan, "task 1 is planned as rank 0"));

  plan = honest_plan();
  plan.tasks[0].cpus = "0-8";
  EXPECT_TRUE(refused(plan, "task 0: CPUs 0-8 are not all the step's (0-7)"));

  plan = honest_plan();
  plan.tasks[0].cpus = "";
  EXPECT_TRUE(refused(plan, "are not a CPU list"));

  plan = honest_plan();
  plan.tasks[0].gpus[0].node_index = 3;
  EXPECT_TRUE(refused(plan, "GPU 3 is not one of the step's"));

  plan = honest_plan();
  plan.tasks[0].gpus[0].token = "GPU-x";
  EXPECT_TRUE(refused(plan, "GPU 4 is named 'GPU-x', not as the step names it ('0')"));

  plan = honest_plan();
  plan.tasks[0].gpus[0].token = plan.tasks[0].tokens = "3";
  plan.tasks[0].env[0].value = "3";
  EXPECT_TRUE(refused(plan, "GPU 4 is named '3', not as the step names it ('0')"))
      << "tile numbers are Level Zero's alone";

  plan = honest_plan();
  plan.tasks[0].env[0].value = "3";
  EXPECT_TRUE(refused(plan, "ROCR_VISIBLE_DEVICES=3 is not the task's GPUs (0)"));

  for (const char* name : {"LD_PRELOAD", "BASH_ENV", "PATH", "PYTHONPATH", "SLURM_JOB_ID"}) {
    plan = honest_plan();
    plan.tasks[1].env.push_back({name, "/tmp/evil", false});
    EXPECT_TRUE(refused(
        plan, std::string("task 1: variable ") + name + " changes what the task runs", {"*"}));
  }

  plan = honest_plan();
  plan.tasks[0].env.push_back({"FI_CXI_DEFAULT_VNI", "7", false});
  EXPECT_TRUE(refused(plan, "variable FI_CXI_DEFAULT_VNI is not one binding sets"));
  EXPECT_TRUE(check_answer(two_task_step(), plan, {"FI_CXI_*"})) << "the site allows it";
}

// A step given every GPU of the node (gpus_without_gres=node) names them by number within their
// vendor: on a node of one NVIDIA GPU (0) and AMD GPUs (1-4), AMD GPU 1 is "0".
TEST(AnswerCheck, AStepOfTheWholeNodeNamesGpusWithinTheirVendor) {
  StepRequest request = two_task_step();
  request.gpus_given = false;
  request.gpus.clear();
  StepPlan plan = honest_plan();
  for (int rank = 0; rank < 2; ++rank) {
    TaskBinding& task = plan.tasks[rank];
    task.tokens = std::to_string(rank);
    task.gpus = {{task.tokens, "", "", 1 + rank}};
    task.env[0].value = task.tokens;
  }
  auto checked = check_answer(request, plan, {});
  EXPECT_TRUE(checked) << checked.error().message;
  plan.tasks[1].gpus[0].token = plan.tasks[1].tokens = plan.tasks[1].env[0].value = "7";
  EXPECT_FALSE(check_answer(request, plan, {})) << "no GPU 2 of a vendor is its eighth";
}

TEST(AnswerCheck, TilesAndMigInstancesAreTheStepsGpus) {
  StepRequest request = two_task_step();
  StepPlan plan = honest_plan();
  for (TaskBinding& task : plan.tasks)
    task.vendor = "intel";
  // Level Zero composite: a tile of the step's card; flat: tile numbers.
  plan.tasks[0].gpus[0].token = "0.1";
  plan.tasks[1].gpus[0].token = "2,3";
  for (TaskBinding& task : plan.tasks) {
    task.tokens = task.gpus[0].token;
    task.env = {{"ZE_AFFINITY_MASK", task.tokens, false}};
  }
  auto checked = check_answer(request, plan, {});
  EXPECT_TRUE(checked) << checked.error().message;
  plan.tasks[0].gpus[0].token = "1.0";  // a tile of another card
  plan.tasks[0].tokens = "1.0";
  plan.tasks[0].env = {{"ZE_AFFINITY_MASK", "1.0", false}};
  EXPECT_FALSE(check_answer(request, plan, {}));
  plan.tasks[0].gpus[0].token = "0.1";
  plan.tasks[0].tokens = "0.1";
  plan.tasks[0].env = {{"CUDA_VISIBLE_DEVICES", "0.1", false}};
  EXPECT_FALSE(check_answer(request, plan, {})) << "tiles are Level Zero's alone";

  // Flat tile numbers are Level Zero's: not under the composite hierarchy, not on other vendors,
  // never empty.
  plan = honest_plan();
  for (TaskBinding& task : plan.tasks) {
    task.vendor = "intel";
    task.gpus[0].token = task.tokens = "5";
    task.env = {{"ZE_AFFINITY_MASK", "5", false}};
  }
  EXPECT_TRUE(check_answer(request, plan, {}));
  request.ze_hierarchy = "composite";
  EXPECT_FALSE(check_answer(request, plan, {}));
  request.ze_hierarchy = "";
  for (TaskBinding& task : plan.tasks)
    task.vendor = "amd";
  EXPECT_FALSE(check_answer(request, plan, {}));
  for (TaskBinding& task : plan.tasks) {
    task.vendor = "intel";
    task.gpus[0].token = task.tokens = ",";
    task.env = {{"ZE_AFFINITY_MASK", ",", false}};
  }
  EXPECT_FALSE(check_answer(request, plan, {}));

  request.gpus_given = true;
  request.gpus.clear();
  request.unplaced_gpus = {"MIG-a", "MIG-b"};
  plan = honest_plan();
  for (int rank = 0; rank < 2; ++rank) {
    TaskBinding& task = plan.tasks[rank];
    task.vendor = "nvidia";
    task.tokens = rank == 0 ? "MIG-a" : "MIG-c";
    task.gpus = {{task.tokens, "", "", -1}};
    task.env = {{"CUDA_VISIBLE_DEVICES", task.tokens, false}};
  }
  checked = check_answer(request, plan, {});
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().message.find("task 1: GPU 'MIG-c' is not one of the step's"),
            std::string::npos);
}

// The daemon's plan for a step, through the wire both ways, as the plugin checks it.
Status daemon_answer_checks(const Node& node, const StepRequest& step) {
  auto bytes = protocol::encode_request(step);
  if (!bytes) return bytes.error();
  v1::PlanRequest proto;
  if (!proto.ParseFromString(*bytes)) return make_error("unreadable request");
  auto request = api::request_from_proto(proto);
  if (!request) return request.error();
  auto plan = make_plan(node.topology, node.policy, *request);
  if (!plan) return plan.error();
  auto decoded = protocol::decode_plan(api::serialize_plan(*plan, &node.topology, {}));
  if (!decoded) return decoded.error();
  return check_answer(step, *decoded, {});
}

// Tokens the step gave alone (UUIDs, MIG instances) that the planner placed on a GPU.
TEST(AnswerCheck, PlacedUuidsAndMigInstancesPass) {
  auto node = load_node({std::nullopt, std::string(GPUBIND_FIXTURES) + "/dgx-h100.xml"});
  ASSERT_TRUE(node) << node.error().message;
  for (Gpu& gpu : node->topology.gpus)
    gpu.uuid = "GPU-0000000" + std::to_string(gpu.index) + "-aaaa-bbbb-cccc-dddddddddddd";
  StepRequest step;
  step.ntasks = 2;
  step.gpus_given = true;
  step.unplaced_gpus = {node->topology.gpus[5].uuid, node->topology.gpus[2].uuid};
  auto checked = daemon_answer_checks(*node, step);
  EXPECT_TRUE(checked) << checked.error().message;
  node->topology.gpus[3].mig_instances = 2;
  step.unplaced_gpus = {"MIG-11111111-2222-3333-4444-555555555555",
                        "MIG-66666666-7777-8888-9999-000000000000"};
  checked = daemon_answer_checks(*node, step);
  EXPECT_TRUE(checked) << checked.error().message;
}

// On a node with GPUs of two vendors each vendor's variable holds its own numbers.
TEST(AnswerCheck, EachVendorsOwnNumbersPass) {
  auto node = load_node({std::nullopt, std::string(GPUBIND_FIXTURES) + "/workstation-mixed.xml"});
  ASSERT_TRUE(node) << node.error().message;
  for (int ntasks : {1, 2}) {
    StepRequest step;
    step.ntasks = ntasks;
    step.gpus_given = true;
    step.gpus = {{0, "0"}, {1, "1"}};
    auto checked = daemon_answer_checks(*node, step);
    EXPECT_TRUE(checked) << ntasks << " tasks: " << checked.error().message;
  }
}

}  // namespace
}  // namespace gpubind::client

namespace gpubind::client {
namespace {

// gpubind's own plans are never refused: every shipped site policy on its node and on the other
// fixtures, for steps of one task per GPU, fewer tasks, more tasks, and tiled GPUs both ways,
// through the daemon's encoding and the plugin's decoding.
TEST(AnswerCheck, PlansOfEveryShippedPolicyPass) {
  const char* policies[] = {"lumi-g", "frontier", "perlmutter", "aurora", "dgx-h100"};
  const char* fixtures[] = {"lumi-g",     "dgx-h100",     "aurora-pvc",
                            "mi300a-tpx", "a100-pcionly", "workstation-mixed"};
  int checked = 0;
  for (const char* policy : policies) {
    for (const char* fixture : fixtures) {
      auto node = load_node({std::string(GPUBIND_POLICIES) + "/" + policy + ".conf",
                             std::string(GPUBIND_FIXTURES) + "/" + fixture + ".xml"});
      ASSERT_TRUE(node) << policy << " on " << fixture << ": " << node.error().message;
      const int gpus = static_cast<int>(node->topology.gpus.size());
      for (int ntasks : {1, std::max(1, gpus / 2), std::max(1, gpus), 2 * std::max(1, gpus)}) {
        for (const char* hierarchy : {"", "composite"}) {
          StepRequest step;
          step.ntasks = ntasks;
          step.gpus_given = true;
          for (int g = 0; g < gpus; ++g)
            step.gpus.push_back({g, std::to_string(g)});
          step.ze_hierarchy = hierarchy;
          step.allowed_cpus = node->topology.all_pus().to_list();
          auto bytes = protocol::encode_request(step);
          ASSERT_TRUE(bytes);
          v1::PlanRequest proto;
          ASSERT_TRUE(proto.ParseFromString(*bytes));
          auto request = api::request_from_proto(proto);
          ASSERT_TRUE(request) << request.error().message;
          auto plan = make_plan(node->topology, node->policy, *request);
          if (!plan) continue;  // a shape the planner refuses: nothing to apply
          auto decoded = protocol::decode_plan(api::serialize_plan(*plan, &node->topology, {}));
          ASSERT_TRUE(decoded);
          auto verdict = check_answer(step, *decoded, {});
          EXPECT_TRUE(verdict) << policy << " on " << fixture << ", " << ntasks << " tasks "
                               << hierarchy << ": " << verdict.error().message;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 150);
}

// A node of Intel and NVIDIA GPUs: the NVIDIA tasks see no Intel GPU through an index no device
// has (an empty ZE_AFFINITY_MASK would show them all), and the plugin lets that through; the
// plans of Slurm's per-task binding too.
TEST(AnswerCheck, AnotherVendorsGpusHiddenTheirRuntimesWayPass) {
  auto node = load_node({std::string(GPUBIND_POLICIES) + "/aurora.conf",
                         std::string(GPUBIND_FIXTURES) + "/aurora-pvc.xml"});
  ASSERT_TRUE(node) << node.error().message;
  node->topology.gpus[0].vendor = Vendor::kNvidia;
  node->topology.gpus[0].tiles = 0;  // a whole NVIDIA GPU
  node->policy.gpu_env.push_back({"CUDA_VISIBLE_DEVICES", "{gpus}", "nvidia", false});
  for (bool fixed : {false, true}) {
    StepRequest step;
    step.ntasks = 6;
    step.gpus_given = true;
    for (int g = 0; g < 6; ++g)
      step.gpus.push_back({g, std::to_string(g)});
    step.allowed_cpus = node->topology.all_pus().to_list();
    if (fixed) step.fixed = {{{5}, ""}, {{4}, ""}, {{3}, ""}, {{2}, ""}, {{1}, ""}, {{0}, ""}};
    auto verdict = daemon_answer_checks(*node, step);
    EXPECT_TRUE(verdict) << (fixed ? "fixed: " : "") << verdict.error().message;
  }
}

}  // namespace
}  // namespace gpubind::client
