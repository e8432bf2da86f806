// The planner's rules (docs/planning.md) on real GPU-node dumps (../shared/topologies): each rule
// is checked on every dump it applies to, and on the dumps where it was once broken. Skipped, with
// a message, when the folder is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include "../support/shared_dumps.h"
#include "gpubind/planner.h"
#include "gpubind/topology_hwloc.h"

namespace gpubind {
namespace {

namespace fs = std::filesystem;

const fs::path kShared = testing::kSharedDumps;

std::vector<std::string> dumps() {
  return testing::shared_dump_files();
}

// The dump, or nullopt (and the test skips) when the shared folder lacks it.
std::optional<Topology> dump(const std::string& name) {
  if (!fs::exists(kShared / name)) return std::nullopt;
  auto t = load_topology_xml((kShared / name).string(), SitePolicy::default_nic_patterns());
  EXPECT_TRUE(t) << t.error().message;
  return t ? std::optional<Topology>(std::move(*t)) : std::nullopt;
}

#define LOAD_OR_SKIP(var, name)                                          \
  const std::optional<Topology> var##_loaded = dump(name);               \
  if (!var##_loaded) GTEST_SKIP() << name << " absent from " << kShared; \
  const Topology& var = *var##_loaded

Plan plan(const Topology& t, int ntasks, Order order = Order::kGpu,
          const SitePolicy& policy = SitePolicy()) {
  PlanRequest request;
  request.ntasks = ntasks;
  request.order = order;
  auto result = make_plan(t, policy, request);
  EXPECT_TRUE(result) << result.error().message;
  return result ? *result : Plan{};
}

std::string cores_of(const Plan& p) {
  std::string text;
  for (const TaskPlan& task : p.tasks)
    text += (text.empty() ? "" : "/") + std::to_string(task.ncores);
  return text;
}

TEST(PlannerRules, DumpsPresent) {
  if (dumps().empty()) GTEST_SKIP() << "no hwloc dumps in " << kShared << ": rules not checked";
}

// Rule 1: a device's locality is the smallest CPU-side object holding it (NUMA with sub-NUMA
// clustering), and a task keeps its GPU's NUMA node.
TEST(PlannerRules, SubNumaClusteringPutsEachGpuOnItsNumaNode) {
  LOAD_OR_SKIP(t, "dell-xe8640-h100.xml");
  for (const Gpu& gpu : t.gpus) {
    EXPECT_EQ(gpu.locality.kind, LocalityKind::kNuma) << gpu.pci_bus_id;
    EXPECT_EQ(gpu.locality.cpus, t.numa_pus(gpu.locality.numa_index));
  }
  for (int n : {4, 8}) {
    for (const TaskPlan& task : plan(t, n).tasks) {
      const Locality& gpu = t.gpus[task.gpus[0].node_index].locality;
      EXPECT_TRUE(task.cpus.intersects(gpu.cpus)) << n << " tasks, rank " << task.rank;
      EXPECT_EQ(task.numa_node, t.numa_os_number(gpu.numa_index))
          << n << " tasks, rank " << task.rank;
    }
  }
}

// Rule 2: when GPUs outnumber tasks, cores follow GPUs: tasks' cores per GPU differ at most 2x
// (never a one-core task next to 24-core ones).
TEST(PlannerRules, CoresFollowGpusWhenGpusOutnumberTasks) {
  for (const std::string& name : dumps()) {
    const Topology t = *dump(name);
    const int gpus = static_cast<int>(t.gpus.size());
    for (int n = 2; n < gpus; ++n) {
      const Plan p = plan(t, n);
      double lo = 1e9, hi = 0;
      for (const TaskPlan& task : p.tasks) {
        const double per_gpu = double(task.ncores) / std::max<size_t>(1, task.gpus.size());
        lo = std::min(lo, per_gpu);
        hi = std::max(hi, per_gpu);
      }
      EXPECT_LE(hi, 2 * lo) << name << " " << n << " tasks: " << cores_of(p);
    }
  }
}

TEST(PlannerRules, TasksWithGpusOfTwoApusAreNotStarved) {
  LOAD_OR_SKIP(t, "tuolumne-mi300a-tpx.xml");
  EXPECT_EQ(cores_of(plan(t, 6)), "16/16/16/16/16/16");
  EXPECT_EQ(cores_of(plan(t, 8)), "16/8/16/8/16/8/16/8") << "cores in proportion to GPUs";
}

// Rule 3: equal GPU shares, core counts within one, unless a task would straddle an L3 it fits in.
TEST(PlannerRules, EqualSharesGetBalancedCores) {
  LOAD_OR_SKIP(spx, "tuolumne-mi300a-spx.xml");
  EXPECT_EQ(cores_of(plan(spx, 8)), "12/12/12/12/12/12/12/12");
  LOAD_OR_SKIP(lassen, "lassen-p9-v100.xml");
  EXPECT_EQ(cores_of(plan(lassen, 8)), "5/5/5/5/5/5/5/5");
}

// Rule 4: only GPUs are GPUs, and each vendor's runtime numbers its own.
TEST(PlannerRules, EachVendorNumbersItsOwnGpus) {
  LOAD_OR_SKIP(t, "chimera-gtx1070-vegafe.xml");
  const Plan p = plan(t, 2);
  ASSERT_EQ(p.tasks.size(), 2u);
  EXPECT_EQ(p.tasks[1].gpus[0].vendor, Vendor::kAmd);
  EXPECT_EQ(p.tasks[1].gpus[0].token, "0");
  LOAD_OR_SKIP(vm, "h100-vm-live.xml");
  EXPECT_EQ(vm.gpus.size(), 1u) << "the unattached OpenCL device is the H100 seen twice";
}

// Rule 5: more tasks than cores but not than threads: no two tasks share a thread.
TEST(PlannerRules, TasksSpreadOverThreadsBeforeSharingOne) {
  for (const std::string& name : dumps()) {
    const Topology t = *dump(name);
    const int pus = t.all_pus().count();
    if (pus == static_cast<int>(t.cores.size())) continue;
    const Plan p = plan(t, pus);
    CpuSet seen;
    for (const TaskPlan& task : p.tasks) {
      EXPECT_EQ(task.cpus.count(), 1) << name << " rank " << task.rank;
      EXPECT_FALSE(task.cpus.intersects(seen)) << name << " rank " << task.rank;
      seen |= task.cpus;
    }
  }
}

// Rule 6: tasks that must share cores share their own GPU's, until each of those carries an even
// share of the tasks.
TEST(PlannerRules, OversubscribedTasksShareTheirGpusCores) {
  for (const std::string& name : dumps()) {
    const Topology t = *dump(name);
    if (t.gpus.empty()) continue;
    const int n = 2 * t.all_pus().count();
    if (n > kMaxTasks) continue;
    const Plan p = plan(t, n);
    std::map<int, int> tasks_on;  // PU -> tasks
    for (const TaskPlan& task : p.tasks)
      task.cpus.for_each([&](int pu) { ++tasks_on[pu]; });
    const int cores = static_cast<int>(t.cores.size());
    const int even = (n + cores - 1) / cores;
    for (const TaskPlan& task : p.tasks) {
      const CpuSet& local = t.gpus[task.gpus[0].node_index].locality.cpus;
      if (task.cpus.is_subset_of(local)) continue;
      local.for_each([&](int pu) {
        EXPECT_GE(tasks_on[pu], even) << name << " rank " << task.rank << " left CPU " << pu;
      });
    }
  }
}

// Rule 7: with order=cpu each task gets, of the GPUs still free, the one whose domain holds most
// of its cores.
TEST(PlannerRules, OrderCpuGivesEachTaskTheGpuNearestItsCores) {
  for (const std::string& name : dumps()) {
    const Topology t = *dump(name);
    const int gpus = static_cast<int>(t.gpus.size());
    if (gpus < 2) continue;
    const Plan p = plan(t, gpus, Order::kCpu);
    std::vector<bool> given(gpus, false);
    for (const TaskPlan& task : p.tasks) {
      auto local = [&](int g) { return (task.cpus & t.gpus[g].locality.cpus).count(); };
      const int mine = task.gpus[0].node_index;
      for (int g = 0; g < gpus; ++g) {
        if (!given[g]) {
          EXPECT_LE(local(g), local(mine)) << name << " rank " << task.rank;
        }
      }
      given[mine] = true;
    }
  }
}

// Rule 8: by default no usable core stays idle; gpu_domain_only keeps tasks in their domains.
TEST(PlannerRules, SpareCoresGoToTasksUnlessThePolicyKeepsThemIdle) {
  for (const std::string& name : dumps()) {
    const Topology t = *dump(name);
    if (t.gpus.empty()) continue;
    const int n = static_cast<int>(t.gpus.size());
    CpuSet used;
    for (const TaskPlan& task : plan(t, n).tasks)
      used |= task.cpus;
    EXPECT_EQ(used, t.all_pus()) << name;
    SitePolicy domain_only;
    domain_only.gpu_domain_only = true;
    for (const TaskPlan& task : plan(t, n, Order::kGpu, domain_only).tasks) {
      CpuSet domains;
      for (const TaskGpu& gpu : task.gpus)
        domains |= t.gpus[gpu.node_index].locality.cpus;
      EXPECT_TRUE(task.cpus.is_subset_of(domains)) << name << " rank " << task.rank;
    }
  }
}

// Rule 9: Slingshot named hsiN and AWS EFA are NICs; a GPU's NIC is the one it shares the most
// PCI bridges with, when any shares one.
TEST(PlannerRules, NicsOfEveryFabricAreFound) {
  LOAD_OR_SKIP(tioga, "tioga-mi250x.xml");
  ASSERT_EQ(tioga.nics.size(), 4u);
  EXPECT_EQ(tioga.nics[0].kind, NicKind::kSlingshot);
  LOAD_OR_SKIP(aws, "aws-g4dn-metal-t4.xml");
  ASSERT_EQ(aws.nics.size(), 1u);
  EXPECT_EQ(aws.nics[0].kind, NicKind::kEfa);
  for (const TaskPlan& task : plan(aws, 8).tasks) {
    const auto unset = std::none_of(task.env.begin(), task.env.end(),
                                    [](const EnvVar v) { return v.name == "UCX_NET_DEVICES"; });
    EXPECT_TRUE(unset) << "UCX has no EFA transport";
  }
}

size_t shared_bridges(const Locality& a, const Locality& b) {
  const auto [end, unused] =
      std::mismatch(a.pci_path.begin(), a.pci_path.end(), b.pci_path.begin(), b.pci_path.end());
  return static_cast<size_t>(end - a.pci_path.begin());
}

TEST(PlannerRules, EachGpuGetsTheNicBehindItsOwnSwitch) {
  for (const std::string& name : dumps()) {
    const Topology t = *dump(name);
    if (t.gpus.empty() || t.nics.empty()) continue;
    for (const TaskPlan& task : plan(t, static_cast<int>(t.gpus.size())).tasks) {
      const Locality& gpu = t.gpus[task.gpus[0].node_index].locality;
      size_t best = 0;
      for (const Nic& nic : t.nics)
        best = std::max(best, shared_bridges(gpu, nic.locality));
      EXPECT_EQ(shared_bridges(gpu, t.nics[task.nic_index].locality), best)
          << name << " rank " << task.rank;
    }
  }
}

}  // namespace
}  // namespace gpubind
