// gpubindctl explain's reasons against the plan they explain, on every real dump and fixture:
// recording changes nothing in the plan; each task's recorded core grants make up its CPUs
// exactly, its GPU reasons name its GPUs, its NIC reasons its NICs in order, its variable rules its
// variables in order; the rules it could not meet are those the plan shows; and the JSON that
// `explain --json` prints says the same. Shared dumps are skipped, with a message, when absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "../support/invariants.h"
#include "../support/shared_dumps.h"
#include "gpubind/explain.h"
#include "gpubind/output/explain_format.h"
#include "gpubind/output/json.h"
#include "gpubind/topology_hwloc.h"

namespace gpubind {
namespace {

namespace fs = std::filesystem;

// Every check for one request; `where` names it in failures.
void expect_explained(const Topology& t, const SitePolicy& policy, const PlanRequest& request,
                      const std::string& where) {
  SCOPED_TRACE(where);
  auto plain = make_plan(t, policy, request);
  PlanExplanation why;
  auto plan = make_plan(t, policy, request, why);
  ASSERT_EQ(static_cast<bool>(plain), static_cast<bool>(plan));
  if (!plan) return;
  EXPECT_EQ(testing::fingerprint(*plain), testing::fingerprint(*plan)) << "recording changed it";
  EXPECT_EQ(plain->warnings, plan->warnings);
  ASSERT_EQ(why.tasks.size(), plan->tasks.size());
  EXPECT_EQ(why.order_from == OrderFrom::kRequest, request.order.has_value());

  // Which CPUs more than one task holds.
  std::vector<int> holders(CpuSet::kMaxCpu + 1, 0);
  for (const TaskPlan& task : plan->tasks)
    for (int cpu : task.cpus.to_vector())
      ++holders[cpu];

  const output::Json json =
      output::Json::parse(explain_to_json(t, *plan, why, std::nullopt), nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  ASSERT_EQ(json["tasks"].size(), plan->tasks.size());

  for (const TaskPlan& task : plan->tasks) {
    const TaskExplanation& mine = why.tasks[task.rank];
    SCOPED_TRACE("local task " + std::to_string(task.rank));
    ASSERT_EQ(mine.rank, task.rank);
    CpuSet granted;
    for (const CoreGrant& grant : mine.cores) {
      EXPECT_FALSE(grant.cpus.empty());
      EXPECT_FALSE(granted.intersects(grant.cpus)) << "a CPU granted twice";
      granted |= grant.cpus;
      if (grant.source == CoreSource::kGpuDomain) {
        ASSERT_GE(grant.domain_gpu, 0);
        EXPECT_TRUE(grant.cpus.minus(t.gpus[grant.domain_gpu].locality.cpus).empty())
            << "GPU-domain cores outside the domain";
      }
    }
    EXPECT_EQ(granted, task.cpus);

    ASSERT_EQ(mine.gpus.size(), task.gpus.size());
    for (size_t g = 0; g < task.gpus.size(); ++g)
      EXPECT_EQ(mine.gpus[g].step_index, task.gpus[g].step_index);

    ASSERT_EQ(mine.nics.size(), task.nic_indices.size());
    for (size_t n = 0; n < task.nic_indices.size(); ++n) {
      EXPECT_EQ(mine.nics[n].nic_index, task.nic_indices[n]);
      EXPECT_EQ(mine.nics[n].leads, task.nic_indices[n] == task.nic_index);
    }

    ASSERT_EQ(mine.env.size(), task.env.size());
    size_t v = 0;
    for (const EnvVar var : task.env)
      EXPECT_EQ(mine.env[v++].name, var.name);

    EXPECT_EQ(mine.memory != MemoryReason::kNone, task.numa_node >= 0);
    bool shares = false;
    for (int cpu : task.cpus.to_vector())
      shares = shares || holders[cpu] > 1;
    EXPECT_EQ(mine.shares_cores, shares);
    if (order_name(why.order) == std::string("gpu") && !task.gpus.empty() &&
        task.gpus[0].node_index >= 0) {
      bool near = false;
      for (const TaskGpu& gpu : task.gpus)
        near = near || task.cpus.intersects(t.gpus[gpu.node_index].locality.cpus);
      EXPECT_EQ(mine.far_from_gpu, !near);
    }

    // The JSON's words are about the same CPUs, GPUs and NICs.
    const output::Json& entry = json["tasks"][task.rank];
    EXPECT_EQ(entry["cpus"], task.cpus.to_list());
    CpuSet from_json;
    for (const auto& grant : entry["cores"]) {
      auto cpus = CpuSet::parse_list(grant["cpus"].get<std::string>());
      ASSERT_TRUE(cpus);
      from_json |= *cpus;
      EXPECT_FALSE(grant["text"].get<std::string>().empty());
    }
    EXPECT_EQ(from_json, task.cpus);
    ASSERT_EQ(entry["gpus"].size(), task.gpus.size());
    for (size_t g = 0; g < task.gpus.size(); ++g) {
      EXPECT_EQ(entry["gpus"][g]["token"], task.gpus[g].token);
      EXPECT_EQ(entry["gpus"][g]["pci"], task.gpus[g].pci);
    }
    ASSERT_EQ(entry["nics"].size(), task.nic_indices.size());
    for (size_t n = 0; n < task.nic_indices.size(); ++n)
      EXPECT_EQ(entry["nics"][n]["name"], t.nics[task.nic_indices[n]].name);
  }
}

// Step shapes that reach every phase: one task, one per GPU, two and three per GPU, more tasks
// than cores (threads), more than threads (shared cores), cpus-per-task, fewer tasks than GPUs,
// under both orders, with and without the first core of each L3 reserved, and a random half of
// the node's CPUs.
void expect_explained_everywhere(const Topology& t, const std::string& name) {
  const int gpus = static_cast<int>(t.gpus.size());
  const int cores = static_cast<int>(t.cores.size());
  const int threads = t.all_pus().count();
  std::vector<int> counts = {1,        3,         std::max(1, gpus), 2 * gpus + 1,
                             3 * gpus, cores + 3, threads + 5};
  SitePolicy reserving;
  reserving.reserve_first_core_per_l3 = true;
  reserving.smt = 1;
  reserving.reserved_cpus = CpuSet::range(0, 0);
  std::mt19937 rng(4242);
  for (const SitePolicy& policy : {SitePolicy(), reserving}) {
    for (Order order : {Order::kGpu, Order::kCpu}) {
      for (int n : counts) {
        if (n < 1 || n > kMaxTasks) continue;
        PlanRequest request;
        request.ntasks = n;
        request.order = order;
        const std::string where = name + ": " + std::to_string(n) +
                                  " tasks, order=" + order_name(order) +
                                  (policy.smt ? ", reserving" : "");
        expect_explained(t, policy, request, where);
        request.cpus_per_task = 2;
        expect_explained(t, policy, request, where + ", cpus-per-task 2");
        request.cpus_per_task = 0;
        std::vector<int> pus = t.all_pus().to_vector();
        std::shuffle(pus.begin(), pus.end(), rng);
        CpuSet half;
        for (size_t i = 0; i < pus.size() / 2 + 1; ++i)
          half.set(pus[i]);
        request.allowed_cpus = half;
        expect_explained(t, policy, request, where + ", CPUs " + half.to_list());
      }
    }
  }
}

TEST(Explain, MatchesThePlanOnEveryFixture) {
  for (const char* name : {"lumi-g.xml", "aurora-pvc.xml", "dgx-h100.xml", "mi300a-tpx.xml",
                           "cpuless-numa.xml", "a100-pcionly.xml", "workstation-mixed.xml"}) {
    auto t = load_topology_xml(std::string(GPUBIND_FIXTURES) + "/" + name,
                               SitePolicy::default_nic_patterns());
    ASSERT_TRUE(t) << t.error().message;
    expect_explained_everywhere(*t, name);
  }
}

TEST(Explain, MatchesThePlanOnEverySharedDump) {
  const std::vector<std::string> files = testing::shared_dump_files();
  if (files.empty()) {
    GTEST_SKIP() << "no hwloc dumps in " << testing::kSharedDumps << ": explain not checked there";
  }
  for (const std::string& name : files) {
    auto t = load_topology_xml((testing::kSharedDumps / name).string(),
                               SitePolicy::default_nic_patterns());
    ASSERT_TRUE(t) << name << ": " << t.error().message;
    expect_explained_everywhere(*t, name);
  }
}

}  // namespace
}  // namespace gpubind
