// Conformance on real GPU-node dumps (../shared/topologies): every file loads and plans with all
// invariants for ntasks in {1, G, 2G, 3G}, both orders, with and without reserved cores, and for
// random step allocations. Skipped, with a message, when the folder is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "../support/invariants.h"
#include "../support/shared_dumps.h"
#include "gpubind/topology_hwloc.h"

namespace gpubind {
namespace {

namespace fs = std::filesystem;

const fs::path kShared = testing::kSharedDumps;

std::vector<std::string> shared_files() {
  return testing::shared_dump_files();
}

Topology load_shared(const std::string& name) {
  auto topology = load_topology_xml((kShared / name).string(), SitePolicy::default_nic_patterns());
  EXPECT_TRUE(topology) << topology.error().message;
  return topology ? std::move(*topology) : Topology{};
}

std::vector<SitePolicy> policies() {
  SitePolicy reserving;
  reserving.reserve_first_core_per_l3 = true;
  reserving.smt = 1;
  return {SitePolicy(), reserving};
}

class SharedTopology : public ::testing::TestWithParam<std::string> {};

TEST(SharedTopologies, FolderPresent) {
  if (shared_files().empty()) {
    GTEST_SKIP() << "no hwloc dumps in " << kShared << ": conformance tests skipped";
  }
  EXPECT_GE(shared_files().size(), 20u);
}

TEST_P(SharedTopology, LoadsAndPlansWithAllInvariants) {
  const Topology t = load_shared(GetParam());
  ASSERT_FALSE(t.cores.empty());
  const int gpus = static_cast<int>(t.gpus.size());
  std::vector<int> counts =
      gpus > 0 ? std::vector<int>{1, gpus, 2 * gpus, 3 * gpus} : std::vector<int>{1, 2, 4};
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  for (const SitePolicy& policy : policies()) {
    for (Order order : {Order::kGpu, Order::kCpu}) {
      for (int n : counts) {
        PlanRequest request;
        request.ntasks = n;
        request.order = order;
        SCOPED_TRACE("ntasks " + std::to_string(n) + " order " + order_name(order) +
                     (policy.reserve_first_core_per_l3 ? " reserving" : ""));
        auto plan = make_plan(t, policy, request);
        ASSERT_TRUE(plan) << plan.error().message;
        EXPECT_TRUE(testing::plan_invariants(t, policy, request, *plan));
        auto again = make_plan(t, policy, request);
        ASSERT_TRUE(again);
        EXPECT_EQ(testing::fingerprint(*plan), testing::fingerprint(*again)) << "deterministic";
      }
    }
  }
}

TEST_P(SharedTopology, PlansStayInsideRandomStepAllocations) {
  const Topology t = load_shared(GetParam());
  ASSERT_FALSE(t.cores.empty());
  std::mt19937 rng(12345);
  const std::vector<int> pus = t.all_pus().to_vector();
  for (int trial = 0; trial < 200; ++trial) {
    PlanRequest request;
    CpuSet allowed;
    std::bernoulli_distribution keep(std::uniform_real_distribution<>(0.1, 1.0)(rng));
    for (int pu : pus) {
      if (keep(rng)) allowed.set(pu);
    }
    if (allowed.empty()) allowed.set(pus[rng() % pus.size()]);
    request.allowed_cpus = allowed;
    // Half the trials also name the step's cores, as Slurm does (S_STEP_ALLOC_CORES).
    if (trial % 2) {
      CpuSet cores;
      for (const Core& core : t.cores) {
        if (keep(rng)) cores.set(core.index);
      }
      if (cores.empty()) cores.set(t.cores[rng() % t.cores.size()].index);
      request.allowed_cores = cores;
    }
    std::vector<StepGpu> step;
    for (const Gpu& gpu : t.gpus) {
      if (rng() % 2) step.push_back({gpu.index, "tok" + std::to_string(gpu.index)});
    }
    std::shuffle(step.begin(), step.end(), rng);
    request.gpus = step;
    request.ntasks = 1 + static_cast<int>(rng() % (2 * std::max<size_t>(step.size(), 2)));
    request.cpus_per_task = static_cast<int>(rng() % 4);
    request.order = rng() % 2 ? Order::kGpu : Order::kCpu;
    const SitePolicy policy = policies()[trial % 2];
    SCOPED_TRACE("trial " + std::to_string(trial) + " cpus " + allowed.to_list() + " cores " +
                 (request.allowed_cores ? request.allowed_cores->to_list() : "-") + " ntasks " +
                 std::to_string(request.ntasks));
    auto plan = make_plan(t, policy, request);
    if (!plan) {
      // Only refusal allowed: the allocation holds nothing but reserved CPUs.
      EXPECT_TRUE(testing::step_cpus(t, request).is_subset_of(reserved_cpus(t, policy)))
          << plan.error().message;
      continue;
    }
    EXPECT_TRUE(testing::plan_invariants(t, policy, request, *plan));
  }
}

INSTANTIATE_TEST_SUITE_P(Dumps, SharedTopology, ::testing::ValuesIn(shared_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::regex_replace(info.param, std::regex("[^A-Za-z0-9]"), "_");
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SharedTopology);

// PRRTE's golden map for `--map-by device=gpu --bind-to core -n4` on the H200 node binds rank r
// to the first core of GPU r's NUMA node: one core per task, GPU order, must agree.
TEST(SharedTopologies, AgreesWithPrrteDeviceMapping) {
  const fs::path map = kShared / "expected/prrte/turin-4gpu-nvml/device.turin-4gpu-nvml.gpu.map";
  if (!fs::exists(map)) GTEST_SKIP() << map << " absent";
  const Topology t = load_shared("lenovo-sd665nv3-h200-nvml.xml");
  PlanRequest request;
  request.ntasks = 4;
  request.cpus_per_task = 1;
  request.smt = 1;
  auto plan = make_plan(t, SitePolicy(), request);
  ASSERT_TRUE(plan) << plan.error().message;
  std::ifstream in(map);
  const std::regex line_re(
      R"(Process rank: (\d+) Bound: package\[\d+\]\[core:L(\d+)\] Device: (\w+))");
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, line_re)) continue;
    const TaskPlan& task = plan->tasks.at(std::stoi(m[1]));
    const int core = std::stoi(m[2]);
    EXPECT_EQ(task.cpus, CpuSet::of({t.cores.at(core).pus[0]})) << line;
    EXPECT_EQ(t.gpus.at(task.gpus.at(0).node_index).os_name, m[3].str()) << line;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

}  // namespace
}  // namespace gpubind
