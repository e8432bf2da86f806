// Test helpers for plan requests that travel (protobuf to the daemon, step text to the daemon's
// compact path or the fallback): one request with every field set away from its default, and a
// field-by-field comparison of what came back.
#pragma once

#include <gtest/gtest.h>

#include "gpubind/planner.h"

namespace gpubind::testing {

inline PlanRequest request_with_every_field() {
  PlanRequest r;
  r.ntasks = 4;
  r.allowed_cpus = *CpuSet::parse_list("8-15,72-79");
  r.allowed_cores = *CpuSet::parse_list("4-7");
  r.gpus = std::vector<StepGpu>{{3, "GPU-x"}, {1, "GPU-y"}};
  r.cpus_per_task = 3;
  r.gpus_per_task = 1;
  r.tasks_per_gpu = 2;
  r.order = Order::kCpu;
  r.smt = 1;
  r.gpu_env = true;
  r.nic_env = false;
  r.omp_places = true;
  r.ze_hierarchy = ZeHierarchy::kComposite;
  r.unplaced_gpus = {"MIG-a", "MIG-b"};  // travels; the planner would refuse it beside `gpus`
  r.fixed = {{{1}, CpuSet::range(8, 9)},
             {{0}, CpuSet::range(10, 11)},
             {{1}, CpuSet::range(12, 13)},
             {{0}, CpuSet::range(14, 15)}};
  r.inherited_hip_visible_devices.emplace("1,0");
  r.cpus_bound_at_launch = true;
  r.gpus_named_by_slurm = true;
  r.slurm_gpu_rule = SlurmGpuRule::kClosest;
  r.task_command = "apptainer";
  return r;
}

inline void expect_same_request(const PlanRequest& back, const PlanRequest& sent) {
  EXPECT_EQ(back.ntasks, sent.ntasks);
  ASSERT_EQ(back.allowed_cpus.has_value(), sent.allowed_cpus.has_value());
  if (sent.allowed_cpus) {
    EXPECT_EQ(back.allowed_cpus->to_list(), sent.allowed_cpus->to_list());
  }
  ASSERT_EQ(back.allowed_cores.has_value(), sent.allowed_cores.has_value());
  if (sent.allowed_cores) {
    EXPECT_EQ(back.allowed_cores->to_list(), sent.allowed_cores->to_list());
  }
  ASSERT_EQ(back.gpus.has_value(), sent.gpus.has_value()) << "no GPU list means every GPU";
  if (sent.gpus) {
    ASSERT_EQ(back.gpus->size(), sent.gpus->size());
    for (size_t i = 0; i < sent.gpus->size(); ++i) {
      EXPECT_EQ((*back.gpus)[i].node_index, (*sent.gpus)[i].node_index);
      EXPECT_EQ((*back.gpus)[i].token, (*sent.gpus)[i].token);
      EXPECT_EQ((*back.gpus)[i].pci, (*sent.gpus)[i].pci);
    }
  }
  EXPECT_EQ(back.cpus_per_task, sent.cpus_per_task);
  EXPECT_EQ(back.gpus_per_task, sent.gpus_per_task);
  EXPECT_EQ(back.tasks_per_gpu, sent.tasks_per_gpu);
  EXPECT_EQ(back.order, sent.order);
  EXPECT_EQ(back.smt, sent.smt);
  EXPECT_EQ(back.gpu_env, sent.gpu_env);
  EXPECT_EQ(back.nic_env, sent.nic_env);
  EXPECT_EQ(back.omp_places.value_or(false), sent.omp_places.value_or(false));
  EXPECT_EQ(back.ze_hierarchy, sent.ze_hierarchy);
  EXPECT_EQ(back.unplaced_gpus, sent.unplaced_gpus);
  ASSERT_EQ(back.fixed.size(), sent.fixed.size());
  for (size_t i = 0; i < sent.fixed.size(); ++i) {
    EXPECT_EQ(back.fixed[i].gpus, sent.fixed[i].gpus) << "task " << i;
    EXPECT_EQ(back.fixed[i].cpus, sent.fixed[i].cpus) << "task " << i;
  }
  EXPECT_EQ(back.inherited_hip_visible_devices, sent.inherited_hip_visible_devices);
  EXPECT_EQ(back.cpus_bound_at_launch, sent.cpus_bound_at_launch);
  EXPECT_EQ(back.gpus_named_by_slurm, sent.gpus_named_by_slurm);
  EXPECT_EQ(back.slurm_gpu_rule, sent.slurm_gpu_rule);
  EXPECT_EQ(back.task_command, sent.task_command);
}

// The plan, failing the test (and giving an empty plan) where the planner refuses.
inline Plan plan_or_fail(const Topology& t, const SitePolicy& policy, const PlanRequest& request) {
  auto plan = make_plan(t, policy, request);
  if (!plan) {
    ADD_FAILURE() << plan.error().message;
    return {};
  }
  return std::move(*plan);
}

// A variable of a task's plan, "<unset>" where the plan sets none.
inline std::string env_of(const TaskPlan& task, const std::string& name) {
  return std::string(task.env.value_of(name).value_or("<unset>"));
}

}  // namespace gpubind::testing
