// The example site policies in packaging/policies load and give each site's documented binding
// on the matching fixture node.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "../support/invariants.h"
#include "gpubind/node.h"
#include "gpubind/policy_loader.h"

namespace gpubind {
namespace {

Node site(const std::string& policy, const std::string& fixture) {
  auto node = load_node({std::string(GPUBIND_POLICIES) + "/" + policy + ".conf",
                         std::string(GPUBIND_FIXTURES) + "/" + fixture + ".xml"});
  EXPECT_TRUE(node) << node.error().message;
  return node ? std::move(*node) : Node{};
}

std::string env_value(const TaskPlan& task, const std::string& name) {
  return std::string(task.env.value_of(name).value_or("<unset>"));
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
  EXPECT_EQ(p.tasks[0].gpus[0].node_index, 4);
  EXPECT_EQ(p.tasks[6].gpus[0].node_index, 0);
}

TEST(SitePolicies, AuroraKeepsCores0And52AndGivesTiles) {
  const Plan p = plan(site("aurora", "aurora-pvc"), 12);
  for (const TaskPlan& task : p.tasks) {
    for (int cpu : {0, 52, 104, 156})
      EXPECT_FALSE(task.cpus.test(cpu)) << task.rank;
  }
  // Level Zero's default hierarchy is FLAT: tile 1 of card 5 is device 11.
  EXPECT_EQ(p.tasks[1].gpus[0].token, "1");
  EXPECT_EQ(p.tasks[11].gpus[0].token, "11");
}

TEST(SitePolicies, PerlmutterRankZeroSitsOnNumaThree) {
  const Plan p = plan(site("perlmutter", "a100-pcionly"), 4);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(p.tasks[r].numa_node, 3 - r);
}

// The Slingshot examples give NCCL/RCCL every Slingshot interface of the node, one list in every
// task, only if unset (HPE's, LUMI's and OLCF's setting), and keep Cray MPICH's per-rank mapping.
void expect_node_wide_socket_interfaces(const std::string& policy, const std::string& fixture) {
  const Node node = site(policy, fixture);
  Node with_defaults = node;
  with_defaults.policy.nic_env = SitePolicy::default_nic_env();
  std::string every_nic;
  for (const Nic& nic : node.topology.nics)
    every_nic += (every_nic.empty() ? "" : ",") + nic.netdev;
  EXPECT_EQ(every_nic, "hsn0,hsn1,hsn2,hsn3") << policy;
  for (int ntasks : {1, 2, 8}) {
    const Plan p = plan(node, ntasks), defaults = plan(with_defaults, ntasks);
    ASSERT_EQ(p.tasks.size(), defaults.tasks.size());
    for (size_t t = 0; t < p.tasks.size(); ++t) {
      const TaskPlan& task = p.tasks[t];
      EXPECT_EQ(env_value(task, "NCCL_SOCKET_IFNAME"), every_nic) << policy << " rank " << t;
      for (const char* mpich : {"MPICH_OFI_NIC_POLICY", "MPICH_OFI_NIC_MAPPING"}) {
        EXPECT_EQ(env_value(task, mpich), env_value(defaults.tasks[t], mpich)) << policy;
      }
      for (const EnvVar var : task.env) {
        if (var.name == "NCCL_SOCKET_IFNAME" || var.name.starts_with("MPICH_OFI_NIC")) {
          EXPECT_TRUE(var.only_if_unset) << policy << " " << var.name;
        }
      }
    }
  }
}

TEST(SitePolicies, SlingshotSitesGiveNcclEveryInterfaceOfTheNode) {
  expect_node_wide_socket_interfaces("lumi-g", "lumi-g");
  expect_node_wide_socket_interfaces("frontier", "lumi-g");
  expect_node_wide_socket_interfaces("perlmutter", "a100-pcionly");
}

TEST(SitePolicies, DgxUsesOnlyTheComputeHcas) {
  const Node node = site("dgx-h100", "dgx-h100");
  EXPECT_EQ(node.topology.nics.size(), 8u) << "storage ports are not job NICs";
  for (int ntasks : {1, 4, 8}) {
    const Plan p = plan(node, ntasks);
    for (const TaskPlan& task : p.tasks) {
      const Nic& nic = node.topology.nics[task.nic_index];
      if (ntasks == 8) {
        EXPECT_EQ(nic.rdma, "mlx5_" + std::to_string(task.rank));
      }
      // NCCL: one exact list of the compute HCAs, the same in every task; UCX: the task's own.
      EXPECT_EQ(env_value(task, "NCCL_IB_HCA"),
                "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7");
      std::string ucx;
      for (int n : task.nic_indices)
        ucx += (ucx.empty() ? "" : ",") + node.topology.nics[n].rdma + ":1";
      EXPECT_EQ(env_value(task, "UCX_NET_DEVICES"), ucx);
      for (const EnvVar var : task.env) {
        if (var.name == "NCCL_IB_HCA" || var.name == "UCX_NET_DEVICES") {
          EXPECT_TRUE(var.only_if_unset) << var.name;
        }
      }
    }
  }
}

bool same_templates(const std::vector<EnvTemplate>& a, const std::vector<EnvTemplate>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].value != b[i].value || a[i].when != b[i].when ||
        a[i].only_if_unset != b[i].only_if_unset) {
      return false;
    }
  }
  return true;
}

void expect_defaults(const SitePolicy& policy) {
  const SitePolicy defaults;
  EXPECT_EQ(policy.reserved_cpus.to_list(), defaults.reserved_cpus.to_list());
  EXPECT_EQ(policy.reserve_first_core_per_l3, defaults.reserve_first_core_per_l3);
  EXPECT_EQ(policy.nic_patterns, defaults.nic_patterns);
  EXPECT_EQ(policy.smt, defaults.smt);
  EXPECT_EQ(policy.order, defaults.order);
  EXPECT_EQ(policy.gpu_order, defaults.gpu_order);
  EXPECT_TRUE(same_templates(policy.gpu_env, defaults.gpu_env));
  EXPECT_TRUE(same_templates(policy.nic_env, defaults.nic_env));
  EXPECT_TRUE(same_templates(policy.omp_env, defaults.omp_env));
  EXPECT_EQ(policy.omp_places, defaults.omp_places);
  EXPECT_EQ(policy.topology_file, defaults.topology_file);
}

// /etc/gpubind/policy.conf as packaged: an admin who uncomments any of its settings keeps the
// built-in default that line claims to show.
TEST(SitePolicies, ThePackagedPolicyFileShowsTheDefaults) {
  std::ifstream in(std::string(GPUBIND_POLICIES) + "/../etc/policy.conf");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto as_shipped = parse_policy(text.str(), "policy.conf");
  ASSERT_TRUE(as_shipped) << as_shipped.error().message;
  expect_defaults(*as_shipped);

  const std::regex setting_line(R"(#[a-z_]+(: | \{).*)");
  std::string uncommented, line;
  for (std::istringstream lines(text.str()); std::getline(lines, line);) {
    uncommented += (std::regex_match(line, setting_line) ? line.substr(1) : line) + "\n";
  }
  ASSERT_NE(uncommented, text.str());
  auto every_line_on = parse_policy(uncommented, "policy.conf");
  ASSERT_TRUE(every_line_on) << every_line_on.error().message;
  expect_defaults(*every_line_on);
}

}  // namespace
}  // namespace gpubind
