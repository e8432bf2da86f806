#include "gpubind/planner.h"

#include "gpubind/env.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>

#include "../support/fixtures.h"
#include "../support/invariants.h"
#include "../support/requests.h"
#include "gpubind/bench/synthetic_topology.h"

namespace gpubind {
namespace {

using testing::env_of;
using testing::fixture;
using testing::lumi_policy;
using testing::plan_or_fail;

PlanRequest tasks(int n) {
  PlanRequest request;
  request.ntasks = n;
  return request;
}

std::optional<EnvVar> find_env(const TaskPlan& task, const std::string& name) {
  for (const EnvVar var : task.env) {
    if (var.name == name) return var;
  }
  return std::nullopt;
}

std::set<int> l3s_of(const Topology& t, const CpuSet& cpus) {
  std::set<int> l3s;
  for (const Core& core : t.cores) {
    for (int pu : core.pus) {
      if (cpus.test(pu)) l3s.insert(core.l3_index);
    }
  }
  return l3s;
}

// --- LUMI-G: the site-published binding -------------------------------------------------------

TEST(PlannerLumi, EightRanksMatchTheSitePublishedMasks) {
  const Plan plan = plan_or_fail(fixture("lumi-g"), lumi_policy(), tasks(8));
  const char* masks[] = {
      "0xfe000000000000", "0xfe00000000000000", "0xfe0000",      "0xfe000000", "0xfe",
      "0xfe00",           "0xfe00000000",       "0xfe0000000000"};
  ASSERT_EQ(plan.tasks.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    const TaskPlan& task = plan.tasks[r];
    EXPECT_EQ(task.cpus.to_mask(), masks[r]) << "rank " << r;
    ASSERT_EQ(task.gpus.size(), 1u);
    EXPECT_EQ(task.gpus[0].node_index, r) << "rank i -> GCD i";
    EXPECT_EQ(env_of(task, "ROCR_VISIBLE_DEVICES"), std::to_string(r));
    EXPECT_EQ(task.ncores, 7);
  }
  EXPECT_EQ(plan.tasks[0].cpus.to_list(), "49-55");
  EXPECT_EQ(plan.tasks[0].numa_node, 3);
  EXPECT_EQ(plan.tasks[0].l3_index, 6);
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(PlannerLumi, NicIsThePairsSlingshotNic) {
  const Topology& t = fixture("lumi-g");
  const Plan plan = plan_or_fail(t, lumi_policy(), tasks(8));
  for (int r = 0; r < 8; ++r) {
    ASSERT_GE(plan.tasks[r].nic_index, 0);
    EXPECT_EQ(t.nics[plan.tasks[r].nic_index].name, "hsn" + std::to_string(r / 2)) << "rank " << r;
    // NCCL's bootstrap interface is not a per-task choice on Slingshot.
    EXPECT_EQ(env_of(plan.tasks[r], "NCCL_SOCKET_IFNAME"), "<unset>");
    EXPECT_EQ(env_of(plan.tasks[r], "MPICH_OFI_NIC_POLICY"), "USER");
    EXPECT_EQ(env_of(plan.tasks[r], "MPICH_OFI_NIC_MAPPING"), "0:0-1; 1:2-3; 2:4-5; 3:6-7");
    // A module's or user's own NIC policy wins.
    EXPECT_TRUE(find_env(plan.tasks[r], "MPICH_OFI_NIC_POLICY")->only_if_unset);
    EXPECT_TRUE(find_env(plan.tasks[r], "MPICH_OFI_NIC_MAPPING")->only_if_unset);
  }
}

// Plain Ethernet NICs: NCCL's socket interfaces are the node's (the same in every task), UCX
// gets the task's own.
TEST(PlannerLumi, EthernetNicsGiveOneNodeWideSocketList) {
  Topology t = fixture("lumi-g");
  for (Nic& nic : t.nics) {
    nic.kind = NicKind::kEthernet;
    nic.rdma.clear();
  }
  const Plan plan = plan_or_fail(t, lumi_policy(), tasks(8));
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(env_of(plan.tasks[r], "NCCL_SOCKET_IFNAME"), "hsn0,hsn1,hsn2,hsn3");
    EXPECT_TRUE(find_env(plan.tasks[r], "NCCL_SOCKET_IFNAME")->only_if_unset);
    EXPECT_EQ(env_of(plan.tasks[r], "UCX_NET_DEVICES"), "hsn" + std::to_string(r / 2));
    EXPECT_EQ(env_of(plan.tasks[r], "MPICH_OFI_NIC_POLICY"), "<unset>");
  }
}

// Cray MPICH numbers the NICs it finds from 0: with cxi1 gone, cxi2 is its NIC 1.
TEST(PlannerLumi, NicMappingCountsTheNicsMpichFinds) {
  Topology t = fixture("lumi-g");
  t.nics.erase(t.nics.begin() + 1);
  for (size_t i = 0; i < t.nics.size(); ++i)
    t.nics[i].index = static_cast<int>(i);
  const Plan plan = plan_or_fail(t, lumi_policy(), tasks(8));
  EXPECT_EQ(t.nics[plan.tasks[7].nic_index].name, "hsn3");
  EXPECT_EQ(t.nics[plan.tasks[5].nic_index].name, "hsn2");
  // hsn0/cxi0 is 0, hsn2/cxi2 is 1, hsn3/cxi3 is 2; GCDs 2 and 3 lost their NIC and divide the
  // three equally near ones in GPU order.
  EXPECT_EQ(env_of(plan.tasks[0], "MPICH_OFI_NIC_MAPPING"), "0:0-2; 1:3-5; 2:6-7");
}

TEST(PlannerLumi, ReservedCoresAreNeverGiven) {
  const Topology& t = fixture("lumi-g");
  const CpuSet reserved = reserved_cpus(t, lumi_policy());
  EXPECT_EQ(reserved.to_list(), "0,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120");
  for (int n : {1, 3, 8, 16, 24, 56}) {
    const Plan plan = plan_or_fail(t, lumi_policy(), tasks(n));
    for (const TaskPlan& task : plan.tasks) {
      EXPECT_FALSE(task.cpus.intersects(reserved)) << n << " tasks, rank " << task.rank;
      EXPECT_FALSE(task.cpus.empty());
    }
  }
}

TEST(PlannerLumi, ConsecutiveRanksShareAGpuAndSplitItsCcd) {
  const Topology& t = fixture("lumi-g");
  const Plan plan = plan_or_fail(t, lumi_policy(), tasks(16));
  for (int r = 0; r < 16; ++r) {
    ASSERT_EQ(plan.tasks[r].gpus.size(), 1u);
    EXPECT_EQ(plan.tasks[r].gpus[0].node_index, r / 2) << "rank " << r;
    EXPECT_TRUE(plan.tasks[r].cpus.is_subset_of(t.gpus[r / 2].locality.cpus)) << "rank " << r;
  }
  EXPECT_EQ(plan.tasks[0].cpus.to_list(), "49-52");
  EXPECT_EQ(plan.tasks[1].cpus.to_list(), "53-55");
}

TEST(PlannerLumi, TwentyFourTasksSplitEachCcdUnevenlyInsteadOfStraddling) {
  const Topology& t = fixture("lumi-g");
  for (Order order : {Order::kGpu, Order::kCpu}) {
    PlanRequest request = tasks(24);
    request.order = order;
    const Plan plan = plan_or_fail(t, lumi_policy(), request);
    std::map<int, std::vector<int>> sizes_by_l3;
    for (const TaskPlan& task : plan.tasks) {
      const auto l3s = l3s_of(t, task.cpus);
      ASSERT_EQ(l3s.size(), 1u) << "rank " << task.rank
                                << " straddles L3s: " << task.cpus.to_list();
      sizes_by_l3[*l3s.begin()].push_back(task.cpus.count());
    }
    ASSERT_EQ(sizes_by_l3.size(), 8u);
    for (const auto& [l3, sizes] : sizes_by_l3) {
      EXPECT_EQ(sizes, (std::vector<int>{3, 2, 2}))
          << "L3 " << l3 << " order " << order_name(order);
    }
  }
}

TEST(PlannerLumi, OrderCpuFollowsCoresAndPicksTheLocalGpu) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(8);
  request.order = Order::kCpu;
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  // Frontier/mpibind convention: rank 0 on cores 1-7 with the GCD attached to CCD 0 (GCD 4).
  const int gcd_of_ccd[] = {4, 5, 2, 3, 6, 7, 0, 1};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(plan.tasks[r].cpus.to_list(),
              std::to_string(8 * r + 1) + "-" + std::to_string(8 * r + 7));
    ASSERT_EQ(plan.tasks[r].gpus.size(), 1u);
    EXPECT_EQ(plan.tasks[r].gpus[0].node_index, gcd_of_ccd[r]) << "rank " << r;
  }
}

TEST(PlannerLumi, FewerTasksThanGpusGetGpusThatSitTogether) {
  const Topology& t = fixture("lumi-g");
  const Plan plan = plan_or_fail(t, lumi_policy(), tasks(4));
  for (int r = 0; r < 4; ++r) {
    const TaskPlan& task = plan.tasks[r];
    ASSERT_EQ(task.gpus.size(), 2u);
    // One MI250X = GCDs 2r and 2r+1, both in the same NUMA node.
    EXPECT_EQ(task.gpus[0].node_index, 2 * r);
    EXPECT_EQ(task.gpus[1].node_index, 2 * r + 1);
    EXPECT_EQ(env_of(task, "ROCR_VISIBLE_DEVICES"),
              std::to_string(2 * r) + "," + std::to_string(2 * r + 1));
    // Cores from both GCDs' CCDs: 14 usable cores.
    EXPECT_EQ(task.cpus.count(), 14);
    EXPECT_TRUE(
        task.cpus.is_subset_of(t.gpus[2 * r].locality.cpus | t.gpus[2 * r + 1].locality.cpus));
  }
}

TEST(PlannerLumi, ThreeTasksOnEightGpusStayClose) {
  const Topology& t = fixture("lumi-g");
  const Plan plan = plan_or_fail(t, lumi_policy(), tasks(3));
  ASSERT_EQ(plan.tasks[0].gpus.size(), 3u);
  ASSERT_EQ(plan.tasks[1].gpus.size(), 3u);
  ASSERT_EQ(plan.tasks[2].gpus.size(), 2u);
  std::set<int> seen;
  for (const TaskPlan& task : plan.tasks) {
    for (const TaskGpu& gpu : task.gpus)
      EXPECT_TRUE(seen.insert(gpu.node_index).second) << gpu.node_index;
  }
  // The task with two GPUs gets one whole MI250X.
  EXPECT_EQ(t.gpus[plan.tasks[2].gpus[0].node_index].locality.numa_index,
            t.gpus[plan.tasks[2].gpus[1].node_index].locality.numa_index);
}

TEST(PlannerLumi, MultiGpuTasksTakeTheNearestGpusNotTheNextInStepOrder) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(2);
  request.gpus = std::vector<StepGpu>{{0, "0"}, {2, "1"}, {1, "2"}, {3, "3"}};
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  EXPECT_EQ(env_of(plan.tasks[0], "ROCR_VISIBLE_DEVICES"), "0,2") << "GCDs 0 and 1: one MI250X";
  EXPECT_EQ(env_of(plan.tasks[1], "ROCR_VISIBLE_DEVICES"), "1,3") << "GCDs 2 and 3";
}

TEST(PlannerLumi, AGpuNamedByItsBusIdIsThatGpuWhateverItsIndexSays) {
  const Topology& t = fixture("lumi-g");
  const std::string bus_id = t.gpus[5].pci_bus_id;
  std::string upper, nvidia_style = "0000" + bus_id;  // NVIDIA's tools print 8 domain digits
  for (char c : bus_id)
    upper.push_back(static_cast<char>(std::toupper(c)));
  for (const std::string& written : {bus_id, upper, nvidia_style, bus_id.substr(5)}) {
    PlanRequest request = tasks(1);
    request.gpus = std::vector<StepGpu>{{0, "7", written}};
    const Plan plan = plan_or_fail(t, lumi_policy(), request);
    EXPECT_EQ(plan.tasks[0].gpus[0].node_index, 5) << written;
    EXPECT_EQ(env_of(plan.tasks[0], "ROCR_VISIBLE_DEVICES"), "7") << written;
  }
  PlanRequest unknown = tasks(1);
  unknown.gpus = std::vector<StepGpu>{{0, "0", "0000:ee:00.0"}};
  auto refused = make_plan(t, lumi_policy(), unknown);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("no GPU of this node has PCI bus id '0000:ee:00.0'"),
            std::string::npos)
      << refused.error().message;
}

TEST(PlannerLumi, StepGpuSubsetAndTokensAreRespected) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(2);
  // As in a step where Slurm's cgroup renumbered the two GPUs it gave.
  request.gpus = std::vector<StepGpu>{{2, "0"}, {3, "1"}};
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  EXPECT_EQ(plan.tasks[0].gpus[0].node_index, 2);
  EXPECT_EQ(plan.tasks[0].gpus[0].step_index, 0);
  EXPECT_EQ(env_of(plan.tasks[0], "ROCR_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(env_of(plan.tasks[1], "ROCR_VISIBLE_DEVICES"), "1");
  // Each keeps its GPU's CCD, plus half of the cores no step GPU is near.
  EXPECT_TRUE(CpuSet::parse_list("17-23")->is_subset_of(plan.tasks[0].cpus));
  EXPECT_TRUE(CpuSet::parse_list("25-31")->is_subset_of(plan.tasks[1].cpus));
  EXPECT_EQ(plan.tasks[0].ncores, 28);
  EXPECT_EQ(plan.tasks[1].ncores, 28);
}

TEST(PlannerLumi, GpuDomainOnlyLeavesSpareCoresIdle) {
  const Topology& t = fixture("lumi-g");
  SitePolicy policy = lumi_policy();
  policy.gpu_domain_only = true;
  PlanRequest request = tasks(2);
  request.gpus = std::vector<StepGpu>{{2, "0"}, {3, "1"}};
  const Plan plan = plan_or_fail(t, policy, request);
  EXPECT_EQ(plan.tasks[0].cpus.to_list(), "17-23");
  EXPECT_EQ(plan.tasks[1].cpus.to_list(), "25-31");
}

TEST(PlannerLumi, AllowedCpusOutsideTheGpuDomainSpillToTheNearestFreeCcd) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(1);
  request.gpus = std::vector<StepGpu>{{0, "0"}};              // GCD 0 sits on CCD 6 (NUMA 3)
  request.allowed_cpus = *CpuSet::parse_list("0-47,64-111");  // CCDs 0-5 only
  SitePolicy policy = lumi_policy();
  policy.gpu_domain_only = true;
  const Plan plan = plan_or_fail(t, policy, request);
  ASSERT_EQ(plan.tasks.size(), 1u);
  EXPECT_TRUE(plan.tasks[0].cpus.is_subset_of(*request.allowed_cpus));
  // It gets what its own CCD would have given (7 cores), from one CCD as close as possible.
  EXPECT_EQ(plan.tasks[0].ncores, 7);
  EXPECT_EQ(l3s_of(t, plan.tasks[0].cpus).size(), 1u) << plan.tasks[0].cpus.to_list();
  // By default the one task gets every CPU of the step.
  const Plan shared = plan_or_fail(t, lumi_policy(), request);
  EXPECT_EQ(shared.tasks[0].ncores, 6 * 7) << "CCDs 0-5 less their first cores";
  EXPECT_TRUE(shared.tasks[0].cpus.is_subset_of(*request.allowed_cpus));
}

TEST(PlannerLumi, AllowedCoresRestrictTheStepLikeSlurmsCoreIds) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(2);
  request.gpus = std::vector<StepGpu>{{4, "0"}, {5, "1"}};  // CCDs 0 and 1
  request.allowed_cores = *CpuSet::parse_list("0-3,8-11,40");
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  EXPECT_EQ(plan.tasks[0].cpus.to_list(), "1-3") << "core 0 is reserved";
  EXPECT_EQ(plan.tasks[1].cpus.to_list(), "9-11");
  request.allowed_cores = *CpuSet::parse_list("0,8,70");
  auto refused = make_plan(t, lumi_policy(), request);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("on cores 0,8,70"), std::string::npos)
      << refused.error().message;
  request.allowed_cores = *CpuSet::parse_list("1,70");
  const Plan warned = plan_or_fail(t, lumi_policy(), request);
  ASSERT_FALSE(warned.warnings.empty());
  EXPECT_NE(warned.warnings[0].find("allowed cores 70"), std::string::npos);
}

TEST(PlannerLumi, CpusPerTaskTakesCoresFromTheGpuCcd) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(8);
  request.cpus_per_task = 4;
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  EXPECT_EQ(plan.tasks[0].cpus.to_list(), "49-52");
  EXPECT_EQ(plan.tasks[4].cpus.to_list(), "1-4");
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(PlannerLumi, CpusPerTaskLargerThanACcdSpillsIntoTheNeighbour) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(2);
  request.gpus = std::vector<StepGpu>{{0, "0"}, {2, "1"}};
  request.cpus_per_task = 14;
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  // GCD 0 is on CCD 6; the nearest free cores are CCD 7 in the same NUMA node.
  EXPECT_EQ(plan.tasks[0].cpus.to_list(), "49-55,57-63");
  EXPECT_EQ(plan.tasks[1].cpus.to_list(), "17-23,25-31");
}

TEST(PlannerLumi, CpusPerTaskBeyondTheNodeIsCappedWithAWarning) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(8);
  request.cpus_per_task = 8;  // 64 cores asked, 56 usable
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("cpus-per-task 8"), std::string::npos) << plan.warnings[0];
  EXPECT_TRUE(testing::no_core_shared(t, plan));
  for (const TaskPlan& task : plan.tasks)
    EXPECT_EQ(task.ncores, 7);
}

TEST(PlannerLumi, MoreTasksThanCoresShareWithAWarning) {
  const Topology& t = fixture("lumi-g");
  const Plan plan = plan_or_fail(t, lumi_policy(), tasks(60));
  ASSERT_EQ(plan.tasks.size(), 60u);
  bool warned = false;
  for (const std::string& w : plan.warnings)
    warned |= w.find("share cores") != std::string::npos;
  EXPECT_TRUE(warned);
  for (const TaskPlan& task : plan.tasks)
    EXPECT_EQ(task.cpus.count(), 1);
}

TEST(PlannerLumi, NoCoreSharedWhileCoresSuffice) {
  const Topology& t = fixture("lumi-g");
  for (int n = 1; n <= 56; ++n) {
    for (Order order : {Order::kGpu, Order::kCpu}) {
      PlanRequest request = tasks(n);
      request.order = order;
      const Plan plan = plan_or_fail(t, lumi_policy(), request);
      EXPECT_TRUE(testing::no_core_shared(t, plan)) << n << " tasks, order " << order_name(order);
      for (const std::string& warning : plan.warnings)
        EXPECT_NE(warning.find("share GPU"), std::string::npos) << n << ": " << warning;
    }
  }
}

TEST(PlannerLumi, SmtFromPolicyOrRequest) {
  const Topology& t = fixture("lumi-g");
  SitePolicy both_threads = lumi_policy();
  both_threads.smt = 0;
  const Plan all = plan_or_fail(t, both_threads, tasks(8));
  EXPECT_EQ(all.tasks[0].cpus.to_list(), "49-55,113-119");
  EXPECT_EQ(all.tasks[0].ncores, 7);
  EXPECT_EQ(env_of(all.tasks[0], "OMP_NUM_THREADS"), "14");
  PlanRequest one = tasks(8);
  one.smt = 1;
  EXPECT_EQ(plan_or_fail(t, both_threads, one).tasks[0].cpus.to_list(), "49-55");
}

TEST(PlannerLumi, TasksPerGpu) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(8);
  request.tasks_per_gpu = 2;
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  for (int r = 0; r < 8; ++r)
    EXPECT_EQ(plan.tasks[r].gpus[0].node_index, r / 2);
  request.tasks_per_gpu = 1;
  request.ntasks = 10;
  const Plan over = plan_or_fail(t, lumi_policy(), request);
  ASSERT_EQ(over.warnings.size(), 2u);
  EXPECT_NE(over.warnings[0].find("need 10 GPUs but the step has 8"), std::string::npos);
  EXPECT_NE(over.warnings[1].find("2 tasks share GPU 0000:c1:00.0 (and 1 more GPU is shared)"),
            std::string::npos)
      << over.warnings[1];
}

TEST(PlannerLumi, GpusPerTask) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(2);
  request.gpus_per_task = 2;
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  EXPECT_EQ(env_of(plan.tasks[0], "ROCR_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(env_of(plan.tasks[1], "ROCR_VISIBLE_DEVICES"), "2,3");
  request.ntasks = 8;
  const Plan over = plan_or_fail(t, lumi_policy(), request);
  ASSERT_EQ(over.warnings.size(), 2u);
  EXPECT_NE(over.warnings[0].find("tasks share GPUs"), std::string::npos);
  EXPECT_NE(over.warnings[1].find("2 tasks share GPU"), std::string::npos);
  EXPECT_EQ(env_of(over.tasks[0], "ROCR_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(env_of(over.tasks[1], "ROCR_VISIBLE_DEVICES"), "0,1");
}

TEST(PlannerLumi, Deterministic) {
  const Topology& t = fixture("lumi-g");
  for (int n : {3, 8, 24}) {
    const std::string a = testing::fingerprint(plan_or_fail(t, lumi_policy(), tasks(n)));
    const std::string b = testing::fingerprint(plan_or_fail(t, lumi_policy(), tasks(n)));
    EXPECT_EQ(a, b);
  }
}

// --- Request errors ------------------------------------------------------------------------

TEST(PlannerErrors, BadRequestsAreRefusedWithAReason) {
  const Topology& t = fixture("lumi-g");
  auto expect_error = [&](const PlanRequest& request, const std::string& text) {
    auto plan = make_plan(t, lumi_policy(), request);
    ASSERT_FALSE(plan) << text;
    EXPECT_NE(plan.error().message.find(text), std::string::npos) << plan.error().message;
  };
  expect_error(tasks(0), "ntasks must be at least 1");
  expect_error(tasks(kMaxTasks + 1), "exceeds the limit");
  PlanRequest r = tasks(1);
  r.gpus = std::vector<StepGpu>{{8, "8"}};
  expect_error(r, "GPU 8 does not exist");
  r.gpus = std::vector<StepGpu>{{1, "0"}, {1, "1"}};
  expect_error(r, "GPU 1 is listed twice");
  r.gpus = std::vector<StepGpu>{{1, ""}};
  expect_error(r, "empty token");
  r = tasks(1);
  r.allowed_cpus = CpuSet::of({0, 8, 64});
  expect_error(r, "no usable CPUs");
  expect_error(r, "(reserved: 0,8,64)");  // only the step's reserved CPUs, not the node's 16
  // CPUs and cores that never meet (slurmstepd's affinity on a specialised core, or Slurm's
  // cores numbered otherwise): said as such, never as an empty reserved list.
  r = tasks(1);
  r.allowed_cpus = CpuSet::of({1, 2});
  r.allowed_cores = CpuSet::of({20});
  expect_error(r, "share no CPU");
  // Slurm's node line numbering otherwise (threads counted as cores after a BIOS SMT change): the
  // step's cgroup holds CPUs 1 and 2 for its one core, which this node has on cores 1 and 2.
  {
    PlanRequest smt = tasks(1);
    smt.allowed_cpus = CpuSet::of({1, 2});
    smt.allowed_cores = CpuSet::of({1});
    auto plan = make_plan(t, SitePolicy(), smt);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_EQ(plan->warnings.size(), 1u);
    EXPECT_NE(plan->warnings[0].find("include 2, which are not on its cores 1"), std::string::npos)
        << plan->warnings[0];
    smt.allowed_cpus = CpuSet::of({1, 65});  // exactly core 1's threads: nothing to say
    auto agreeing = make_plan(t, SitePolicy(), smt);
    ASSERT_TRUE(agreeing);
    EXPECT_TRUE(agreeing->warnings.empty());
  }
  auto disjoint = make_plan(t, lumi_policy(), r);
  ASSERT_FALSE(disjoint);
  EXPECT_EQ(disjoint.error().message.find("reserved"), std::string::npos)
      << disjoint.error().message;
  r = tasks(1);
  r.cpus_per_task = -1;
  expect_error(r, "cpus-per-task must not be negative");
}

// What the planner's node view lacks is told apart from a bad request: the daemon's topology may
// be stale, and the plugin then plans from the live node instead of failing the step.
TEST(PlannerErrors, StepsThatDoNotFitTheNodeViewAreNodeMismatches) {
  const Topology& t = fixture("lumi-g");
  auto error_of = [&](const PlanRequest& request) {
    auto plan = make_plan(t, lumi_policy(), request);
    EXPECT_FALSE(plan);
    return plan ? Error{} : plan.error();
  };
  PlanRequest r = tasks(1);
  r.gpus = std::vector<StepGpu>{{8, "8"}};
  EXPECT_TRUE(error_of(r).node_mismatch) << "a GPU past the node's";
  r.gpus = std::vector<StepGpu>{{0, "0", "0000:99:00.0"}};
  EXPECT_TRUE(error_of(r).node_mismatch) << "a bus id no GPU has";
  r = tasks(1);
  r.allowed_cpus = CpuSet::of({200, 201});
  const Error none = error_of(r);
  EXPECT_TRUE(none.node_mismatch) << "no CPU of the step on the node";
  EXPECT_NE(none.message.find("none of the step's CPUs (200-201)"), std::string::npos)
      << none.message;

  // The request's own faults.
  r = tasks(1);
  r.gpus = std::vector<StepGpu>{{1, "0"}, {1, "1"}};
  EXPECT_FALSE(error_of(r).node_mismatch) << "a GPU listed twice";
  r.gpus = std::vector<StepGpu>{{-1, "0"}};
  EXPECT_FALSE(error_of(r).node_mismatch) << "a negative index";
  r = tasks(1);
  r.allowed_cpus = CpuSet::of({0, 8});
  EXPECT_FALSE(error_of(r).node_mismatch) << "only reserved CPUs: the policy's, on this node";
  EXPECT_FALSE(error_of(tasks(0)).node_mismatch);
}

TEST(PlannerErrors, CpusOutsideTheTopologyAreIgnoredWithAWarning) {
  PlanRequest r = tasks(1);
  r.allowed_cpus = CpuSet::of({1, 2, 500});
  const Plan plan = plan_or_fail(fixture("lumi-g"), lumi_policy(), r);
  EXPECT_EQ(plan.tasks[0].cpus.to_list(), "1-2");
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("500"), std::string::npos);
}

// --- Other nodes ------------------------------------------------------------------------------

TEST(PlannerAurora, TasksSharingAGpuGetTilesInZeAffinityMask) {
  const Topology& t = fixture("aurora-pvc");
  SitePolicy policy;
  policy.reserved_cpus = *CpuSet::parse_list("0,52,104,156");
  PlanRequest composite = tasks(12);
  composite.ze_hierarchy = ZeHierarchy::kComposite;
  const Plan plan = plan_or_fail(t, policy, composite);
  for (int r = 0; r < 12; ++r) {
    EXPECT_EQ(env_of(plan.tasks[r], "ZE_AFFINITY_MASK"),
              std::to_string(r / 2) + "." + std::to_string(r % 2))
        << "rank " << r;
    EXPECT_EQ(plan.tasks[r].gpus[0].tile_index, r % 2);
  }
  EXPECT_FALSE(plan.tasks[0].cpus.test(0));
  EXPECT_TRUE(testing::no_core_shared(t, plan));
  // Whole GPUs when each task has its own.
  composite.ntasks = 6;
  const Plan whole = plan_or_fail(t, policy, composite);
  EXPECT_EQ(env_of(whole.tasks[4], "ZE_AFFINITY_MASK"), "4");
}

// Under FLAT (Level Zero's default) "card.tile" is not a valid mask: every tile is a device,
// numbered card by card.
TEST(PlannerAurora, FlatHierarchyNamesTilesAsDevices) {
  const Topology& t = fixture("aurora-pvc");
  const Plan tiles = plan_or_fail(t, SitePolicy(), tasks(12));
  for (int r = 0; r < 12; ++r) {
    EXPECT_EQ(env_of(tiles.tasks[r], "ZE_AFFINITY_MASK"), std::to_string(r)) << "rank " << r;
    EXPECT_EQ(tiles.tasks[r].gpus[0].tile_index, r % 2);
  }
  const Plan cards = plan_or_fail(t, SitePolicy(), tasks(6));
  EXPECT_EQ(env_of(cards.tasks[4], "ZE_AFFINITY_MASK"), "8,9");
  EXPECT_EQ(env_of(cards.tasks[4], "ZE_ENABLE_PCI_ID_DEVICE_ORDER"), "<unset>")
      << "Level Zero sorts discrete cards by PCI bus itself";
  // The step's own card numbers (Slurm's tokens) are what the tiles count from.
  PlanRequest two = tasks(2);
  two.gpus = std::vector<StepGpu>{{3, "0"}, {5, "1"}};
  const Plan step = plan_or_fail(t, SitePolicy(), two);
  EXPECT_EQ(env_of(step.tasks[1], "ZE_AFFINITY_MASK"), "2,3");
}

// oneCCL's workers (a site's choice: oneCCL aborts on a list shorter than its processes): one
// CPU per oneCCL process in local-rank order, from its own task's set, the same list in every task.
std::vector<int> ccl_list(const TaskPlan& task) {
  std::vector<int> items;
  const std::string list = env_of(task, "CCL_WORKER_AFFINITY");
  for (size_t at = 0, next; at <= list.size(); at = next + 1) {
    next = list.find(',', at);
    if (next == std::string::npos) next = list.size();
    items.push_back(std::stoi(list.substr(at, next - at)));
  }
  return items;
}

TEST(PlannerAurora, CclWorkersStayOnTheirOwnTasksCores) {
  const Topology& t = fixture("aurora-pvc");
  EXPECT_EQ(env_of(plan_or_fail(t, SitePolicy(), tasks(12)).tasks[0], "CCL_WORKER_AFFINITY"),
            "<unset>")
      << "not a default";
  SitePolicy policy;
  policy.gpu_env.push_back({"CCL_WORKER_AFFINITY", "{ccl_worker_affinity}", "intel", true});
  // A task per tile: one worker CPU per task, inside that task's set.
  const Plan per_tile = plan_or_fail(t, policy, tasks(12));
  const std::vector<int> items = ccl_list(per_tile.tasks[0]);
  ASSERT_EQ(items.size(), 12u);
  for (int r = 0; r < 12; ++r) {
    EXPECT_EQ(ccl_list(per_tile.tasks[r]), items);
    EXPECT_TRUE(per_tile.tasks[r].cpus.test(items[r])) << "rank " << r;
  }
  // A rank per whole card (two tiles under FLAT) is still one oneCCL process: 6 entries.
  EXPECT_EQ(ccl_list(plan_or_fail(t, policy, tasks(6)).tasks[0]).size(), 6u);
  // CCL_WORKER_COUNT=2: two workers per process, each on a CPU of its own task.
  PlanRequest two_workers = tasks(6);
  two_workers.ccl.worker_count = 2;
  const Plan plan = plan_or_fail(t, policy, two_workers);
  const std::vector<int> workers = ccl_list(plan.tasks[0]);
  ASSERT_EQ(workers.size(), 12u);
  EXPECT_EQ(std::set<int>(workers.begin(), workers.end()).size(), 12u);
  for (int i = 0; i < 12; ++i)
    EXPECT_TRUE(plan.tasks[i / 2].cpus.test(workers[i])) << "entry " << i;
}

TEST(PlannerAurora, CclWorkerAffinityIsLeftUnsetWhereItsCountCannotBeKnown) {
  const Topology& t = fixture("aurora-pvc");
  SitePolicy policy;
  policy.gpu_env.push_back({"CCL_WORKER_AFFINITY", "{ccl_worker_affinity}", "intel", true});
  auto unset_because = [&](PlanRequest request, const std::string& why) {
    const Plan plan = plan_or_fail(t, policy, request);
    EXPECT_EQ(env_of(plan.tasks[0], "CCL_WORKER_AFFINITY"), "<unset>") << why;
    ASSERT_EQ(plan.warnings.size(), 1u) << why;
    EXPECT_NE(plan.warnings[0].find(why), std::string::npos) << plan.warnings[0];
  };
  PlanRequest torchrun = tasks(2);
  torchrun.ccl.launcher = "torchrun";
  unset_because(torchrun, "CCL_WORKER_AFFINITY is not set: CCL_PROCESS_LAUNCHER=torchrun");
  PlanRequest none = tasks(2);
  none.ccl.launcher = "none";
  none.ccl.local_size = 4;
  unset_because(none, "CCL_LOCAL_SIZE=4 is not the step's 2 tasks");
  none.ccl.local_size = 2;
  EXPECT_EQ(ccl_list(plan_or_fail(t, policy, none).tasks[1]).size(), 2u);
  PlanRequest other = tasks(2);
  other.ccl.launcher = "mpiexec";
  unset_because(other, "CCL_PROCESS_LAUNCHER=mpiexec is not a launcher gpubind knows");
  PlanRequest pmix = tasks(2);
  pmix.ccl.launcher = "pmix";
  EXPECT_EQ(ccl_list(plan_or_fail(t, policy, pmix).tasks[0]).size(), 2u);
}

TEST(PlannerAurora, NicsAreBalancedAmongEquallyCloseOnes) {
  const Topology& t = fixture("aurora-pvc");
  const Plan plan = plan_or_fail(t, SitePolicy(), tasks(6));
  std::vector<std::string> nics;
  for (const TaskPlan& task : plan.tasks)
    nics.push_back(t.nics[task.nic_index].name);
  EXPECT_EQ(nics, (std::vector<std::string>{"hsn0", "hsn1", "hsn2", "hsn4", "hsn5", "hsn6"}));
}

TEST(PlannerDgx, NvidiaEnvAndInfinibandNicBehindTheSameSwitch) {
  const Topology& t = fixture("dgx-h100");
  const Plan plan = plan_or_fail(t, SitePolicy(), tasks(8));
  for (int r = 0; r < 8; ++r) {
    const TaskPlan& task = plan.tasks[r];
    EXPECT_EQ(env_of(task, "CUDA_VISIBLE_DEVICES"), std::to_string(r));
    EXPECT_EQ(env_of(task, "ROCR_VISIBLE_DEVICES"), "<unset>");
    EXPECT_EQ(t.nics[task.nic_index].name, "mlx5_" + std::to_string(r)) << "rank " << r;
    // NCCL picks each GPU's HCA itself and needs the same NCCL_IB_HCA in every rank.
    EXPECT_EQ(env_of(task, "NCCL_IB_HCA"), "<unset>");
    EXPECT_EQ(env_of(task, "UCX_NET_DEVICES"), "mlx5_" + std::to_string(r) + ":1");
    EXPECT_TRUE(find_env(task, "UCX_NET_DEVICES")->only_if_unset);
    EXPECT_EQ(env_of(task, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    EXPECT_TRUE(find_env(task, "CUDA_DEVICE_ORDER")->only_if_unset);
    EXPECT_EQ(env_of(task, "MPICH_OFI_NIC_POLICY"), "<unset>");
    EXPECT_EQ(task.cpus.count(), 28) << "14 cores x 2 threads of its package";
  }
}

// One task running one worker per GPU (torchrun over all 8): every GPU's HCA, each worker an
// equal share of the CPUs.
TEST(PlannerDgx, OneTaskWithAllGpusGetsEveryGpusNicAndThreadsPerGpu) {
  const Topology& t = fixture("dgx-h100");
  const Plan plan = plan_or_fail(t, SitePolicy(), tasks(1));
  const TaskPlan& task = plan.tasks[0];
  EXPECT_EQ(task.nic_indices.size(), 8u);
  EXPECT_EQ(task.nic_names, "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7");
  EXPECT_EQ(env_of(task, "GPUBIND_NIC"), task.nic_names);
  EXPECT_EQ(env_of(task, "UCX_NET_DEVICES"),
            "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  EXPECT_EQ(env_of(task, "NCCL_IB_HCA"), "<unset>");
  EXPECT_EQ(env_of(task, "OMP_NUM_THREADS"), std::to_string(task.cpus.count() / 8));
  // Two GPUs per task: both their HCAs, half the CPUs each.
  const Plan pairs = plan_or_fail(t, SitePolicy(), tasks(4));
  EXPECT_EQ(pairs.tasks[1].nic_names, "mlx5_2,mlx5_3");
  EXPECT_EQ(env_of(pairs.tasks[1], "UCX_NET_DEVICES"), "mlx5_2:1,mlx5_3:1");
  EXPECT_EQ(env_of(pairs.tasks[1], "OMP_NUM_THREADS"),
            std::to_string(pairs.tasks[1].cpus.count() / 2));
  // One GPU: all of the task's CPUs.
  const Plan single = plan_or_fail(t, SitePolicy(), tasks(8));
  EXPECT_EQ(env_of(single.tasks[3], "OMP_NUM_THREADS"),
            std::to_string(single.tasks[3].cpus.count()));
}

// MIG instances: handed out as they are, never read as GPU numbers; the plan says their GPUs'
// places are unknown.
TEST(PlannerDgx, MigInstancesAreHandedOutAsTokens) {
  const Topology& t = fixture("dgx-h100");
  PlanRequest request = tasks(2);
  request.gpus = std::vector<StepGpu>{};
  request.unplaced_gpus = {"MIG-aaaa", "MIG-bbbb"};
  const Plan plan = plan_or_fail(t, SitePolicy(), request);
  EXPECT_EQ(env_of(plan.tasks[0], "CUDA_VISIBLE_DEVICES"), "MIG-aaaa");
  EXPECT_EQ(env_of(plan.tasks[1], "CUDA_VISIBLE_DEVICES"), "MIG-bbbb");
  EXPECT_EQ(plan.tasks[1].gpus[0].node_index, -1);
  EXPECT_EQ(env_of(plan.tasks[1], "GPUBIND_GPU_PCI"), "<unset>");
  request.ntasks = 1;
  EXPECT_EQ(env_of(plan_or_fail(t, SitePolicy(), request).tasks[0], "GPUBIND_GPU_PCI"), "<unset>");
  request.ntasks = 2;
  EXPECT_TRUE(testing::no_core_shared(t, plan));
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("MIG instances"), std::string::npos);
  // One task: both; four tasks: shared in order.
  request.ntasks = 1;
  EXPECT_EQ(env_of(plan_or_fail(t, SitePolicy(), request).tasks[0], "CUDA_VISIBLE_DEVICES"),
            "MIG-aaaa,MIG-bbbb");
  request.ntasks = 4;
  const Plan four = plan_or_fail(t, SitePolicy(), request);
  EXPECT_EQ(env_of(four.tasks[1], "CUDA_VISIBLE_DEVICES"), "MIG-aaaa");
  EXPECT_EQ(env_of(four.tasks[2], "CUDA_VISIBLE_DEVICES"), "MIG-bbbb");
  // Node GPUs and unplaced tokens together are refused.
  request.gpus = std::vector<StepGpu>{{0, "0"}};
  EXPECT_FALSE(make_plan(t, SitePolicy(), request));
}

// A node-wide NIC list for sites that must name their compute HCAs: the same exact list in
// every task, whatever its GPUs.
TEST(PlannerDgx, NodeNicListIsTheSameInEveryTask) {
  const Topology& t = fixture("dgx-h100");
  SitePolicy policy;
  policy.nic_env = {{"NCCL_IB_HCA", "={node_nics_rdma}", "infiniband", true}};
  const Plan plan = plan_or_fail(t, policy, tasks(8));
  for (const TaskPlan& task : plan.tasks) {
    // Every NIC the topology holds (nic_patterns chose them when it was loaded), by ordinal.
    EXPECT_EQ(env_of(task, "NCCL_IB_HCA"),
              "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_9");
  }
}

TEST(PlannerMi300a, PartitionsOfOneApuSplitItsL3s) {
  const Topology& t = fixture("mi300a-tpx");
  const Plan plan = plan_or_fail(t, SitePolicy(), tasks(12));
  for (int r = 0; r < 12; ++r) {
    EXPECT_EQ(plan.tasks[r].gpus[0].node_index, r);
    EXPECT_EQ(l3s_of(t, plan.tasks[r].cpus), std::set<int>{r}) << "rank " << r;
    EXPECT_EQ(t.nics[plan.tasks[r].nic_index].name, "hsn" + std::to_string(r / 3));
  }
}

TEST(PlannerA100, PolicyGpuOrderChangesNumberingNotLocality) {
  Topology t = fixture("a100-pcionly");
  const Plan pci_order = plan_or_fail(t, SitePolicy(), tasks(4));
  EXPECT_EQ(pci_order.tasks[0].numa_node, 3) << "GPU 0 (bus 03) sits on NUMA 3";
  ASSERT_TRUE(apply_gpu_order(t, {"3", "2", "1", "0"}));
  const Plan reordered = plan_or_fail(t, SitePolicy(), tasks(4));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(reordered.tasks[r].numa_node, r);
    EXPECT_EQ(env_of(reordered.tasks[r], "CUDA_VISIBLE_DEVICES"), std::to_string(r));
    EXPECT_EQ(t.nics[reordered.tasks[r].nic_index].locality.numa_index, r);
  }
}

TEST(PlannerWorkstation, NoNicMeansNoNicEnv) {
  const Topology& t = fixture("workstation-mixed");
  const Plan plan = plan_or_fail(t, SitePolicy(), tasks(2));
  EXPECT_EQ(plan.tasks[0].nic_index, -1);
  EXPECT_EQ(env_of(plan.tasks[0], "CUDA_VISIBLE_DEVICES"), "0");
  // ROCm counts AMD GPUs only: the node's second GPU is its first.
  EXPECT_EQ(env_of(plan.tasks[1], "ROCR_VISIBLE_DEVICES"), "0") << "per-vendor numbering";
  EXPECT_EQ(env_of(plan.tasks[0], "NCCL_SOCKET_IFNAME"), "<unset>");
  EXPECT_EQ(env_of(plan.tasks[0], "GPUBIND_NIC"), "<unset>");
}

// Slurm numbers a node's GPUs together; each runtime counts its own vendor's only.
TEST(PlannerVendors, EachVendorsVariableHoldsItsOwnNumbersAndHidesTheOthers) {
  const Topology& t = fixture("workstation-mixed");  // GPU 0 NVIDIA, GPU 1 AMD
  PlanRequest two = tasks(2);
  two.gpus = std::vector<StepGpu>{{0, "0"}, {1, "1"}};  // Slurm's numbers
  const Plan split = plan_or_fail(t, SitePolicy(), two);
  EXPECT_EQ(env_of(split.tasks[0], "CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(env_of(split.tasks[0], "ROCR_VISIBLE_DEVICES"), "") << "no AMD GPU for this task";
  EXPECT_EQ(env_of(split.tasks[1], "ROCR_VISIBLE_DEVICES"), "0") << "ROCm's first GPU";
  EXPECT_EQ(env_of(split.tasks[1], "CUDA_VISIBLE_DEVICES"), "") << "no NVIDIA GPU leaks in";
  // HIP would read NVIDIA's CUDA_VISIBLE_DEVICES: it gets the AMD devices ROCR leaves.
  EXPECT_EQ(env_of(split.tasks[1], "HIP_VISIBLE_DEVICES"), "0");
  EXPECT_TRUE(find_env(split.tasks[1], "HIP_VISIBLE_DEVICES")->only_if_unset) << "a user's wins";
  EXPECT_EQ(env_of(split.tasks[0], "HIP_VISIBLE_DEVICES"), "<unset>");
  EXPECT_EQ(env_of(split.tasks[1], "CUDA_DEVICE_ORDER"), "<unset>") << "an NVIDIA template";

  PlanRequest one = tasks(1);
  one.gpus = two.gpus;
  const Plan both = plan_or_fail(t, SitePolicy(), one);
  EXPECT_EQ(env_of(both.tasks[0], "CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(env_of(both.tasks[0], "ROCR_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(env_of(both.tasks[0], "HIP_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(env_of(both.tasks[0], "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  EXPECT_EQ(env_of(both.tasks[0], "GPUBIND_GPU_PCI"), "0000:01:00.0,0000:0a:00.0");

  // Slurm's env_uuid names the GPUs that have a UUID by it, the others by their number.
  PlanRequest uuids = tasks(2);
  Topology named = t;
  named.gpus[0].uuid = "GPU-11111111-2222-3333-4444-555555555555";
  uuids.gpus = std::vector<StepGpu>{{0, named.gpus[0].uuid}, {1, "1"}};
  const Plan by_uuid = plan_or_fail(named, SitePolicy(), uuids);
  EXPECT_EQ(env_of(by_uuid.tasks[0], "CUDA_VISIBLE_DEVICES"), named.gpus[0].uuid);
  EXPECT_EQ(env_of(by_uuid.tasks[1], "ROCR_VISIBLE_DEVICES"), "0");

  // Under a device cgroup Slurm numbers the step's GPUs from 0: the AMD GPU alone is "0".
  PlanRequest amd_only = tasks(1);
  amd_only.gpus = std::vector<StepGpu>{{1, "0"}};
  EXPECT_EQ(env_of(plan_or_fail(t, SitePolicy(), amd_only).tasks[0], "ROCR_VISIBLE_DEVICES"), "0");
  amd_only.gpus = std::vector<StepGpu>{{1, "1"}};
  EXPECT_EQ(env_of(plan_or_fail(t, SitePolicy(), amd_only).tasks[0], "ROCR_VISIBLE_DEVICES"), "0");
}

// A template for every vendor sees all of a mixed task's GPUs, once.
TEST(PlannerVendors, TemplatesForEveryVendorSeeAllTheTasksGpus) {
  SitePolicy policy;
  policy.gpu_env.push_back({"MY_PCI", "{gpu_pci}", "", false});
  policy.gpu_env.push_back({"MY_N", "{ngpus}", "", false});
  const Plan plan = plan_or_fail(fixture("workstation-mixed"), policy, tasks(1));
  EXPECT_EQ(env_of(plan.tasks[0], "MY_PCI"), "0000:01:00.0,0000:0a:00.0");
  EXPECT_EQ(env_of(plan.tasks[0], "MY_N"), "2");
  int count = 0;
  for (const EnvVar var : plan.tasks[0].env)
    count += var.name == "MY_PCI";
  EXPECT_EQ(count, 1);
}

// HIP is kept off NVIDIA's list only where the plan narrowed ROCm to the task's GPUs.
TEST(PlannerVendors, HipFollowsOnlyAPlannedRocrList) {
  SitePolicy policy;
  policy.gpu_env = {{"CUDA_VISIBLE_DEVICES", "{gpus}", "nvidia", false}};
  const Plan plan = plan_or_fail(fixture("workstation-mixed"), policy, tasks(2));
  EXPECT_EQ(env_of(plan.tasks[1], "HIP_VISIBLE_DEVICES"), "<unset>");
}

TEST(PlannerVendors, SingleVendorNodesKeepSlurmsNumbers) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(2);
  request.gpus = std::vector<StepGpu>{{3, "3"}, {6, "6"}};
  const Plan global = plan_or_fail(t, lumi_policy(), request);
  EXPECT_EQ(env_of(global.tasks[0], "ROCR_VISIBLE_DEVICES"), "3");
  EXPECT_EQ(env_of(global.tasks[1], "ROCR_VISIBLE_DEVICES"), "6");
  EXPECT_EQ(env_of(global.tasks[1], "CUDA_VISIBLE_DEVICES"), "<unset>") << "a single-vendor node";
  request.gpus = std::vector<StepGpu>{{3, "0"}, {6, "1"}};
  const Plan local = plan_or_fail(t, lumi_policy(), request);
  EXPECT_EQ(env_of(local.tasks[1], "ROCR_VISIBLE_DEVICES"), "1");
}

// Level Zero counts discrete cards in PCI order and an integrated GPU after them.
TEST(PlannerVendors, LevelZeroCountsTheIntegratedGpuLast) {
  Topology t = fixture("aurora-pvc");
  Gpu integrated = t.gpus[0];
  integrated.pci_bus_id = "0000:00:02.0";
  integrated.tiles = 0;
  t.gpus.insert(t.gpus.begin(), integrated);
  for (size_t i = 0; i < t.gpus.size(); ++i)
    t.gpus[i].index = static_cast<int>(i);
  const Plan plan = plan_or_fail(t, SitePolicy(), tasks(7));
  EXPECT_EQ(env_of(plan.tasks[0], "ZE_AFFINITY_MASK"), "12") << "after the 6 cards' 12 tiles";
  EXPECT_EQ(env_of(plan.tasks[1], "ZE_AFFINITY_MASK"), "0,1") << "the first card is device 0";
  EXPECT_EQ(env_of(plan.tasks[6], "ZE_AFFINITY_MASK"), "10,11");
  PlanRequest composite = tasks(7);
  composite.ze_hierarchy = ZeHierarchy::kComposite;
  const Plan cards = plan_or_fail(t, SitePolicy(), composite);
  EXPECT_EQ(env_of(cards.tasks[0], "ZE_AFFINITY_MASK"), "6");
  EXPECT_EQ(env_of(cards.tasks[1], "ZE_AFFINITY_MASK"), "0");
}

// A node whose GPUs' UUIDs are known (the driver's procfs, hwloc's NVIDIAUUID).
Topology dgx_with_uuids() {
  Topology t = fixture("dgx-h100");
  for (Gpu& gpu : t.gpus)
    gpu.uuid = "GPU-0000000" + std::to_string(gpu.index) + "-aaaa-bbbb-cccc-dddddddddddd";
  return t;
}

TEST(PlannerUuids, GpuUuidsArePlacedOnTheirGpus) {
  const Topology t = dgx_with_uuids();
  PlanRequest request = tasks(2);
  request.unplaced_gpus = {t.gpus[5].uuid, t.gpus[2].uuid};
  const Plan plan = plan_or_fail(t, SitePolicy(), request);
  EXPECT_TRUE(plan.warnings.empty()) << plan.warnings[0];
  ASSERT_EQ(plan.tasks[0].gpus.size(), 1u);
  EXPECT_EQ(plan.tasks[0].gpus[0].node_index, 5);
  EXPECT_EQ(env_of(plan.tasks[0], "CUDA_VISIBLE_DEVICES"), t.gpus[5].uuid)
      << "as the step names it";
  EXPECT_EQ(plan.tasks[1].gpus[0].node_index, 2);
  for (int r : {0, 1}) {
    const Gpu& gpu = t.gpus[plan.tasks[r].gpus[0].node_index];
    EXPECT_TRUE(plan.tasks[r].cpus.is_subset_of(gpu.locality.cpus)) << "rank " << r;
  }
  // Hex digits in upper case, as some tools print them.
  std::string upper = t.gpus[7].uuid;
  for (char& c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  request.unplaced_gpus = {upper, t.gpus[0].uuid};
  EXPECT_EQ(plan_or_fail(t, SitePolicy(), request).tasks[0].gpus[0].node_index, 7);
  // Slurm's env_uuid: an index beside each UUID; the UUID names the GPU the runtime opens.
  PlanRequest indexed = tasks(1);
  indexed.gpus = std::vector<StepGpu>{{1, t.gpus[4].uuid}};
  EXPECT_EQ(plan_or_fail(t, SitePolicy(), indexed).tasks[0].gpus[0].node_index, 4);
  // A UUID the node does not list: today's tokens without locality, said.
  request.unplaced_gpus = {t.gpus[1].uuid, "GPU-ffffffff-0000-0000-0000-000000000000"};
  const Plan unknown = plan_or_fail(t, SitePolicy(), request);
  EXPECT_EQ(unknown.tasks[0].gpus[0].node_index, -1);
  ASSERT_EQ(unknown.warnings.size(), 1u);
  EXPECT_NE(unknown.warnings[0].find("names GPUs this node does not list"), std::string::npos);
  request.unplaced_gpus = {t.gpus[1].uuid, t.gpus[1].uuid};
  EXPECT_FALSE(make_plan(t, SitePolicy(), request)) << "one GPU twice";
}

TEST(PlannerUuids, MigInstancesArePlacedNearTheirParentGpu) {
  Topology t = dgx_with_uuids();
  PlanRequest request = tasks(2);
  request.unplaced_gpus = {"MIG-11111111-2222-3333-4444-555555555555",
                           "MIG-66666666-7777-8888-9999-000000000000"};
  // Which GPU holds a MIG UUID is NVML's to say; with MIG on one GPU only, it is that one.
  t.gpus[6].mig_instances = 3;
  Plan plan = plan_or_fail(t, SitePolicy(), request);
  EXPECT_TRUE(plan.warnings.empty());
  for (int r : {0, 1}) {
    EXPECT_EQ(plan.tasks[r].gpus[0].node_index, 6);
    EXPECT_EQ(env_of(plan.tasks[r], "CUDA_VISIBLE_DEVICES"), request.unplaced_gpus[r]);
    EXPECT_TRUE(plan.tasks[r].cpus.intersects(t.gpus[6].locality.cpus)) << "rank " << r;
    EXPECT_EQ(plan.tasks[r].numa_node, t.numa_os_number(t.gpus[6].locality.numa_index));
  }
  // MIG on several GPUs: Slurm numbers the 6 GPUs without MIG first (0-5), then the instances
  // GPU by GPU: 6-7 on GPU 1, 8-10 on GPU 6.
  t.gpus[1].mig_instances = 2;
  request.unplaced_slurm_indices = {7, 8};
  plan = plan_or_fail(t, SitePolicy(), request);
  EXPECT_EQ(plan.tasks[0].gpus[0].node_index, 1);
  EXPECT_EQ(plan.tasks[1].gpus[0].node_index, 6);
  request.unplaced_slurm_indices = {6, 11};
  EXPECT_EQ(plan_or_fail(t, SitePolicy(), request).tasks[0].gpus[0].node_index, -1)
      << "an index past the instances: nothing tells";
  // Without them nothing tells: tokens without locality, as before, said.
  request.unplaced_slurm_indices.clear();
  plan = plan_or_fail(t, SitePolicy(), request);
  EXPECT_EQ(plan.tasks[0].gpus[0].node_index, -1);
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("MIG instances"), std::string::npos);
  // Drivers before R470 name the parent GPU in the token.
  request.unplaced_gpus = {"MIG-" + t.gpus[3].uuid + "/1/0"};
  EXPECT_EQ(plan_or_fail(t, SitePolicy(), request).tasks[0].gpus[0].node_index, 3);
}

// no-gpu-env: the step's visibility variables stay Slurm's, but CUDA still counts in PCI order,
// as codes that pick their GPU by local rank need.
TEST(PlannerVendors, NoGpuEnvKeepsTheDeviceOrder) {
  PlanRequest request = tasks(8);
  request.gpu_env = false;
  const Plan plan = plan_or_fail(fixture("dgx-h100"), SitePolicy(), request);
  EXPECT_EQ(env_of(plan.tasks[3], "CUDA_VISIBLE_DEVICES"), "<unset>");
  EXPECT_EQ(env_of(plan.tasks[3], "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
}

TEST(PlannerVendors, HipVisibleDevicesIsTheSitesChoice) {
  const Topology& t = fixture("lumi-g");
  EXPECT_EQ(env_of(plan_or_fail(t, lumi_policy(), tasks(2)).tasks[1], "HIP_VISIBLE_DEVICES"),
            "<unset>")
      << "left alone by default";
  SitePolicy policy = lumi_policy();
  policy.gpu_env.push_back({"HIP_VISIBLE_DEVICES", "{gpu_ordinals}", "amd", false});
  const Plan plan = plan_or_fail(t, policy, tasks(2));
  EXPECT_EQ(env_of(plan.tasks[1], "ROCR_VISIBLE_DEVICES"), "4,5,6,7");
  EXPECT_EQ(env_of(plan.tasks[1], "HIP_VISIBLE_DEVICES"), "0,1,2,3");
}

TEST(PlannerWarnings, TasksSharingAGpuAreToldOnce) {
  const Plan plan = plan_or_fail(fixture("dgx-h100"), SitePolicy(), tasks(16));
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_EQ(plan.warnings[0].substr(0, 58),
            "2 tasks share GPU 0000:1b:00.0 (and 7 more GPUs are shared");
  EXPECT_NE(plan.warnings[0].find("NCCL_MULTI_RANK_GPU_ENABLE=1"), std::string::npos);
  // Tiles of one card are devices of their own: no warning.
  EXPECT_TRUE(plan_or_fail(fixture("aurora-pvc"), SitePolicy(), tasks(12)).warnings.empty());
}

TEST(PlannerNoGpus, CpuOnlyStepsPlanByCoresWithoutGpuEnv) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(4);
  request.gpus = std::vector<StepGpu>{};
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  for (const TaskPlan& task : plan.tasks) {
    EXPECT_TRUE(task.gpus.empty());
    EXPECT_EQ(task.ncores, 14);
    EXPECT_EQ(env_of(task, "ROCR_VISIBLE_DEVICES"), "<unset>");
    EXPECT_GE(task.nic_index, 0) << "NIC nearest the task's cores";
  }
  EXPECT_EQ(plan.tasks[0].cpus.to_list(), "1-7,9-15");
  EXPECT_EQ(t.nics[plan.tasks[0].nic_index].name, "hsn2") << "hsn2 sits on CCD 1, NUMA 0";
}

// --- Environment --------------------------------------------------------------------------------

TEST(PlannerEnv, OmpThreadsOnlyIfUnsetAndPlacesOnlyOnRequest) {
  const Topology& t = fixture("lumi-g");
  const Plan plan = plan_or_fail(t, lumi_policy(), tasks(8));
  const std::optional<EnvVar> threads = find_env(plan.tasks[0], "OMP_NUM_THREADS");
  ASSERT_TRUE(threads);
  EXPECT_EQ(threads->value, "7");
  EXPECT_TRUE(threads->only_if_unset);
  EXPECT_FALSE(find_env(plan.tasks[0], "OMP_PLACES"));
  EXPECT_FALSE(find_env(plan.tasks[0], "OMP_PROC_BIND"));
  PlanRequest omp = tasks(8);
  omp.omp_places = true;
  const Plan with = plan_or_fail(t, lumi_policy(), omp);
  EXPECT_EQ(env_of(with.tasks[0], "OMP_PLACES"), "cores");
  EXPECT_EQ(env_of(with.tasks[0], "OMP_PROC_BIND"), "close");
}

TEST(PlannerEnv, GroupsCanBeSwitchedOff) {
  PlanRequest request = tasks(8);
  request.gpu_env = false;
  request.nic_env = false;
  const Plan plan = plan_or_fail(fixture("lumi-g"), lumi_policy(), request);
  EXPECT_FALSE(find_env(plan.tasks[0], "ROCR_VISIBLE_DEVICES"));
  EXPECT_FALSE(find_env(plan.tasks[0], "NCCL_SOCKET_IFNAME"));
  EXPECT_EQ(env_of(plan.tasks[0], "GPUBIND_GPUS"), "0") << "information stays";
}

TEST(PlannerEnv, InformationalVariablesAndMarker) {
  const Plan plan = plan_or_fail(fixture("lumi-g"), lumi_policy(), tasks(8));
  const TaskPlan& task = plan.tasks[1];
  EXPECT_EQ(env_of(task, "GPUBIND_BOUND"), "1");
  EXPECT_EQ(env_of(task, "GPUBIND_LOCAL_RANK"), "1");
  EXPECT_EQ(env_of(task, "GPUBIND_CPUS"), "57-63");
  EXPECT_EQ(env_of(task, "GPUBIND_GPUS"), "1");
  EXPECT_EQ(env_of(task, "GPUBIND_GPU_PCI"), "0000:c6:00.0");
  EXPECT_EQ(env_of(task, "GPUBIND_NIC"), "hsn0");
  EXPECT_EQ(env_of(task, "GPUBIND_NUMA"), "3");
}

TEST(PlannerEnv, SiteTemplatesWithPlaceholders) {
  SitePolicy policy = lumi_policy();
  policy.gpu_env = {{"HIP_VISIBLE_DEVICES", "{gpus}", "", false},
                    {"MY_GPU_PCI", "{gpu_pci}", "nvidia", false}};
  policy.nic_env = {{"FI_CXI_DEVICE", "{nic_rdma}", "", false}};
  policy.omp_env = {{"OMP_NUM_THREADS", "{ncores}", "", true},
                    {"MY_RANK_INFO", "{local_rank}/{ntasks}@{cpu_mask}", "", false}};
  const Plan plan = plan_or_fail(fixture("lumi-g"), policy, tasks(8));
  const TaskPlan& task = plan.tasks[2];
  EXPECT_EQ(env_of(task, "HIP_VISIBLE_DEVICES"), "2");
  EXPECT_EQ(env_of(task, "MY_GPU_PCI"), "<unset>") << "selector 'nvidia' on an AMD GPU";
  EXPECT_EQ(env_of(task, "FI_CXI_DEVICE"), "cxi1");
  EXPECT_EQ(env_of(task, "OMP_NUM_THREADS"), "7");
  EXPECT_EQ(env_of(task, "MY_RANK_INFO"), "2/8@0xfe0000");
  EXPECT_EQ(env_of(task, "ROCR_VISIBLE_DEVICES"), "<unset>") << "group replaced";
}

TEST(PlannerEnv, GpuEnvIsAlwaysASubListOfTheStepTokens) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(5);
  request.gpus = std::vector<StepGpu>{{7, "GPU-a"}, {1, "GPU-b"}, {4, "GPU-c"}};
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  const std::set<std::string> tokens = {"GPU-a", "GPU-b", "GPU-c"};
  for (const TaskPlan& task : plan.tasks) {
    const std::string value = env_of(task, "ROCR_VISIBLE_DEVICES");
    EXPECT_TRUE(tokens.count(value)) << value;
  }
  EXPECT_EQ(env_of(plan.tasks[0], "ROCR_VISIBLE_DEVICES"), "GPU-a");
  EXPECT_TRUE(plan.tasks[0].cpus.intersects(t.gpus[7].locality.cpus));
}

}  // namespace
}  // namespace gpubind

namespace gpubind {
namespace {

// A node past the 1024 CPUs a fixed cpu_set_t holds (1152 hardware threads): planned, every CPU
// in some task, and each task's CPUs written and read back as a list and a mask unchanged.
TEST(PlannerScale, ANodeOfMoreThan1024Cpus) {
  bench::SyntheticShape shape;
  shape.cores_per_l3 = 18;
  const Topology t = bench::synthetic_topology(shape);
  ASSERT_EQ(t.all_pus().count(), 1152);
  for (int n : {8, 64, 576}) {
    auto plan = make_plan(t, SitePolicy(), tasks(n));
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(testing::plan_invariants(t, SitePolicy(), tasks(n), *plan)) << n;
    CpuSet covered;
    for (const TaskPlan& task : plan->tasks) {
      covered |= task.cpus;
      auto from_list = CpuSet::parse_list(task.cpus.to_list());
      auto from_mask = CpuSet::parse_mask(task.cpus.to_mask());
      ASSERT_TRUE(from_list && from_mask);
      EXPECT_EQ(*from_list, task.cpus);
      EXPECT_EQ(*from_mask, task.cpus);
    }
    EXPECT_EQ(covered, t.all_pus()) << n << " tasks";
    EXPECT_TRUE(covered.test(1151));
  }
}

TEST(PlannerScale, ThousandPuNodeWithManyTasks) {
  const Topology t = bench::synthetic_topology({});
  ASSERT_EQ(t.all_pus().count(), 1024);
  for (int n : {8, 256, 512, 600}) {
    PlanRequest request;
    request.ntasks = n;
    auto plan = make_plan(t, SitePolicy(), request);
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(testing::plan_invariants(t, SitePolicy(), request, *plan)) << n;
  }
}

}  // namespace
}  // namespace gpubind

namespace gpubind {
namespace {

bool has_warning(const Plan& plan, const std::string& text) {
  for (const std::string& w : plan.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// Packages of one NUMA node each, with L3s of 8 cores and GPUs (and as many NICs) on each.
Topology apu_node(int packages, int l3s, int gpus, int threads_per_core = 1) {
  bench::SyntheticShape shape;
  shape.packages = packages;
  shape.numa_per_package = 1;
  shape.l3_per_numa = l3s;
  shape.cores_per_l3 = 8;
  shape.threads_per_core = threads_per_core;
  shape.gpus_per_numa = gpus;
  return bench::synthetic_topology(shape);
}

// One package, one NUMA node, three L3s of 8 cores: an MI300A-like APU with one GPU.
Topology three_l3_node(int threads_per_core = 1) {
  return apu_node(1, 3, 1, threads_per_core);
}

std::vector<int> cores_per_task(const Plan& plan) {
  std::vector<int> cores;
  for (const TaskPlan& task : plan.tasks)
    cores.push_back(task.ncores);
  return cores;
}

TEST(PlannerBalance, SharesThatFitNoL3AreBalanced) {
  const Plan plan = plan_or_fail(three_l3_node(), SitePolicy(), tasks(2));
  EXPECT_EQ(cores_per_task(plan), (std::vector<int>{12, 12})) << "not 8 and 16";
}

TEST(PlannerBalance, UnevenSplitWhenBalanceWouldSplitAnL3) {
  const Topology t = three_l3_node();
  const Plan plan = plan_or_fail(t, SitePolicy(), tasks(4));
  EXPECT_EQ(cores_per_task(plan), (std::vector<int>{4, 4, 8, 8})) << "6 each would straddle";
  for (const TaskPlan& task : plan.tasks)
    EXPECT_EQ(l3s_of(t, task.cpus).size(), 1u) << task.cpus.to_list();
}

TEST(PlannerThreads, TasksGetThreadsOfTheirOwnBeforeSharingOne) {
  const Topology t = three_l3_node(4);  // 24 cores, 96 threads
  const Plan plan = plan_or_fail(t, SitePolicy(), tasks(48));
  CpuSet seen;
  for (const TaskPlan& task : plan.tasks) {
    EXPECT_EQ(task.cpus.count(), 2) << "two threads of one core each";
    EXPECT_EQ(task.ncores, 1);
    EXPECT_FALSE(task.cpus.intersects(seen)) << task.cpus.to_list();
    seen |= task.cpus;
  }
  EXPECT_EQ(seen, t.all_pus());
  EXPECT_TRUE(has_warning(plan, "share cores"));
}

TEST(PlannerSpareCores, TasksShareTheCoresNoGpuIsNear) {
  bench::SyntheticShape shape;  // 8 NUMA nodes of 64 cores, one GPU each
  shape.threads_per_core = 1;
  const Topology t = bench::synthetic_topology(shape);
  PlanRequest request = tasks(2);
  request.gpus = std::vector<StepGpu>{{0, "0"}, {1, "1"}};
  const Plan plan = plan_or_fail(t, SitePolicy(), request);
  EXPECT_EQ(cores_per_task(plan), (std::vector<int>{256, 256}));
  EXPECT_EQ(plan.tasks[0].numa_node, 0) << "memory stays on the GPU's NUMA node";
  EXPECT_TRUE(t.gpus[0].locality.cpus.is_subset_of(plan.tasks[0].cpus));
  SitePolicy domain_only;
  domain_only.gpu_domain_only = true;
  const Plan kept = plan_or_fail(t, domain_only, request);
  EXPECT_EQ(kept.tasks[0].cpus, t.gpus[0].locality.cpus);
  ASSERT_EQ(kept.warnings.size(), 1u) << "fewer CPUs than the step holds, and why";
  EXPECT_EQ(kept.warnings[0],
            "384 usable cores of the step stay idle: no task's GPU is near them "
            "(gpu_domain_only)");
}

TEST(PlannerGpus, TasksTakeGpusOfOneDomainWhereTheCountsAllow) {
  const Topology t = apu_node(4, 3, 3);  // 4 APUs with 3 GPUs each, like MI300A in TPX mode
  const Plan plan = plan_or_fail(t, SitePolicy(), tasks(6));
  int spanning = 0;
  for (const TaskPlan& task : plan.tasks) {
    ASSERT_EQ(task.gpus.size(), 2u);
    spanning += t.gpus[task.gpus[0].node_index].locality.numa_index !=
                t.gpus[task.gpus[1].node_index].locality.numa_index;
    EXPECT_EQ(task.ncores, 16) << "cores follow GPUs";
  }
  EXPECT_EQ(spanning, 2) << "12 GPUs in fours of three: only two tasks need two domains";
}

// GPUs equally near several NICs take them in turn, whatever the step: one-GPU jobs sharing the
// node spread over the NICs, and tasks of two GPUs get both and lead with different ones.
TEST(PlannerNics, EquallyNearNicsAreDividedByGpu) {
  Topology t = apu_node(1, 2, 4);  // 4 GPUs on one NUMA node, 2 NICs there
  t.nics.resize(2);
  std::vector<std::string> nic_of_gpu;
  for (int g = 0; g < 4; ++g) {
    PlanRequest request = tasks(1);
    request.gpus = std::vector<StepGpu>{{g, "0"}};
    nic_of_gpu.push_back(plan_or_fail(t, SitePolicy(), request).tasks[0].nic_names);
  }
  EXPECT_EQ(nic_of_gpu, (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_0", "mlx5_1"}));
  PlanRequest pairs = tasks(2);
  pairs.gpus_per_task = 2;
  const Plan plan = plan_or_fail(t, SitePolicy(), pairs);
  EXPECT_EQ(plan.tasks[0].nic_names, "mlx5_0,mlx5_1") << "both NICs, one per GPU";
  EXPECT_EQ(plan.tasks[1].nic_names, "mlx5_1,mlx5_0") << "leading with the other";
}

}  // namespace
}  // namespace gpubind

namespace gpubind {
namespace {

TEST(PlannerWarnings, TasksWithNoCpuNearTheirGpuAreNamedOnce) {
  const Topology& t = fixture("lumi-g");
  PlanRequest request = tasks(2);
  request.gpus = std::vector<StepGpu>{{0, "0"}, {1, "1"}};  // CCDs 6 and 7
  request.allowed_cpus = *CpuSet::parse_list("0-47");       // CCDs 0-5
  const Plan plan = plan_or_fail(t, lumi_policy(), request);
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_EQ(plan.warnings[0],
            "2 of 2 tasks have no CPU in their GPUs' domains (local task 0: GPU 0000:c1:00.0 on "
            "L3 6, local task 1: GPU 0000:c6:00.0 on L3 7): the step's CPUs there are too few or "
            "none");
  request.allowed_cpus = *CpuSet::parse_list("0-63");
  EXPECT_TRUE(plan_or_fail(t, lumi_policy(), request).warnings.empty());
}

// Nested steps clear the binding's information variables: the list they clear is complete.
TEST(PlannerEnv, EveryGpubindVariableIsABindingInfoVariable) {
  const Plan plan = plan_or_fail(fixture("lumi-g"), lumi_policy(), tasks(8));
  for (const EnvVar var : plan.tasks[0].env) {
    if (var.name.rfind("GPUBIND_", 0) != 0) continue;
    EXPECT_NE(std::find(kBindingInfoVars.begin(), kBindingInfoVars.end(), var.name),
              kBindingInfoVars.end())
        << var.name;
  }
}

TEST(PlannerWarnings, CountsAgreeWithTheirNouns) {
  PlanRequest request = tasks(2);
  request.gpus = std::vector<StepGpu>{{4, "0"}};
  request.allowed_cpus = CpuSet::of({1});
  const Plan plan = plan_or_fail(fixture("lumi-g"), lumi_policy(), request);
  ASSERT_EQ(plan.warnings.size(), 2u);
  EXPECT_EQ(plan.warnings[0], "2 tasks on 1 usable core: some tasks share cores");
  EXPECT_EQ(plan.warnings[1].substr(0, 32), "2 tasks share GPU 0000:d1:00.0: ");
}

}  // namespace
}  // namespace gpubind

namespace gpubind {
namespace {

// A node that reports no I/O locality: the plan says so once, naming the devices, and never
// claims a package or domain for them; a node with locality says nothing of the kind.
TEST(PlannerLocality, UnknownLocalityIsSaidOncePerStep) {
  auto warnings_with = [](const Plan& plan, const std::string& text) {
    return std::count_if(plan.warnings.begin(), plan.warnings.end(),
                         [&](const std::string& w) { return w.find(text) != std::string::npos; });
  };
  for (const char* name : {"lumi-g-noloc", "dgx-h100-noloc"}) {
    const Topology& t = fixture(name);
    PlanRequest request;
    request.ntasks = 8;
    const Plan plan = plan_or_fail(t, SitePolicy(), request);
    EXPECT_EQ(warnings_with(plan, "reports no CPU locality for GPU "), 1) << name;
    EXPECT_TRUE(testing::plan_invariants(t, SitePolicy(), request, plan)) << name;
  }
  PlanRequest request;
  request.ntasks = 8;
  const Plan located = plan_or_fail(fixture("lumi-g"), lumi_policy(), request);
  EXPECT_EQ(warnings_with(located, "no CPU locality"), 0);
}

}  // namespace
}  // namespace gpubind
