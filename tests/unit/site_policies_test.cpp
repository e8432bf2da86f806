// The example site policies in packaging/policies load and give each site's documented binding
// on the matching fixture node.
#include <gtest/gtest.h>

#include "../support/invariants.h"
#include "gpubind/node.h"

namespace gpubind {
namespace {

Node site(const std::string& policy, const std::string& fixture) {
  auto node = load_node({std::string(GPUBIND_POLICIES) + "/" + policy + ".conf",
                         std::string(GPUBIND_FIXTURES) + "/" + fixture + ".xml"});
  EXPECT_TRUE(node) << node.error().message;
  return node ? std::move(*node) : Node{};
}

Plan plan(const Node& node, int ntasks) {
  PlanRequest request;
  request.ntasks = ntasks;
  auto planned = make_plan(node.topology, node.policy, request);
  EXPECT_TRUE(planned) << planned.error().message;
  if (planned) {
    EXPECT_TRUE(testing::plan_invariants(node.topology, node.policy, request, *planned));
  }
  return planned ? *planned : Plan{};
}

TEST(SitePolicies, LumiG) {
  const Plan p = plan(site("lumi-g", "lumi-g"), 8);
  EXPECT_EQ(p.tasks[0].cpus.to_mask(), "0xfe000000000000");
  EXPECT_EQ(p.tasks[4].cpus.to_mask(), "0xfe");
}

TEST(SitePolicies, FrontierFollowsCoreOrder) {
  const Plan p = plan(site("frontier", "lumi-g"), 8);
  EXPECT_EQ(p.tasks[0].cpus.to_list(), "1-7");
  EXPECT_EQ(p.tasks[0].gpus[0].gpu, 4);
  EXPECT_EQ(p.tasks[6].gpus[0].gpu, 0);
}

TEST(SitePolicies, AuroraKeepsCores0And52AndGivesTiles) {
  const Plan p = plan(site("aurora", "aurora-pvc"), 12);
  for (const TaskPlan& task : p.tasks) {
    for (int cpu : {0, 52, 104, 156})
      EXPECT_FALSE(task.cpus.test(cpu)) << task.rank;
  }
  EXPECT_EQ(p.tasks[1].gpus[0].token, "0.1");
  EXPECT_EQ(p.tasks[11].gpus[0].token, "5.1");
}

TEST(SitePolicies, PerlmutterRankZeroSitsOnNumaThree) {
  const Plan p = plan(site("perlmutter", "a100-pcionly"), 4);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(p.tasks[r].numa, 3 - r);
}

TEST(SitePolicies, DgxUsesOnlyTheComputeHcas) {
  const Node node = site("dgx-h100", "dgx-h100");
  EXPECT_EQ(node.topology.nics.size(), 8u) << "storage ports are not job NICs";
  const Plan p = plan(node, 8);
  for (int r = 0; r < 8; ++r) {
    const Nic& nic = node.topology.nics[p.tasks[r].nic];
    EXPECT_EQ(nic.rdma, "mlx5_" + std::to_string(r));
    bool hca = false;
    for (const EnvVar& var : p.tasks[r].env)
      hca |= var.name == "NCCL_IB_HCA" && var.value == nic.rdma;
    EXPECT_TRUE(hca) << r;
  }
}

}  // namespace
}  // namespace gpubind
