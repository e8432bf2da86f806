// The planner's recorded reasons and explain's words on known nodes: LUMI-G with its site policy
// (the first core of each CCD reserved, each GPU's own L3, the NIC beside each GPU), and steps
// whose rules cannot all be met (CPUs far from the GPUs, more tasks than threads), order=cpu's
// matching, spare cores and cpus-per-task spills.
#include <gtest/gtest.h>

#include "gpubind/explain.h"
#include "gpubind/node.h"
#include "gpubind/output/explain_format.h"
#include "gpubind/output/json.h"
#include "gpubind/planner.h"

namespace gpubind {
namespace {

struct Explained {
  Topology topology;
  Plan plan;
  PlanExplanation why;
};

Explained explain(const std::string& fixture, const std::optional<std::string>& policy,
                  const PlanRequest& request) {
  NodeSources sources;
  sources.topology_path = std::string(GPUBIND_FIXTURES) + "/" + fixture;
  if (policy) sources.policy_path = std::string(GPUBIND_POLICIES) + "/" + *policy;
  auto node = load_node(sources);
  EXPECT_TRUE(node) << node.error().message;
  Explained out;
  auto plan = make_plan(node->topology, node->policy, request, out.why);
  EXPECT_TRUE(plan) << plan.error().message;
  out.topology = std::move(node->topology);
  out.plan = std::move(*plan);
  return out;
}

PlanRequest tasks(int n) {
  PlanRequest request;
  request.ntasks = n;
  return request;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Whether one line of `text` holds both parts, in order (columns are padded).
bool line_with(const std::string& text, const std::string& first, const std::string& then) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    const size_t at = line.find(first);
    if (at != std::string::npos && line.find(then, at + first.size()) != std::string::npos)
      return true;
    begin = end + 1;
  }
  return false;
}

TEST(Explain, LumiGNamesTheReservedCoresTheGpusL3AndTheNic) {
  const Explained e = explain("lumi-g.xml", "lumi-g.conf", tasks(8));
  // The first core of each CCD (L3), both threads, and nothing the policy lists by number.
  EXPECT_TRUE(e.why.reserved_listed.empty());
  for (const Core& core : e.topology.cores) {
    const bool first_of_l3 =
        core.index == 0 || e.topology.cores[core.index - 1].l3_index != core.l3_index;
    if (first_of_l3)
      EXPECT_TRUE(e.why.reserved_first_core_per_l3.test(core.pus[0]));
    else
      EXPECT_FALSE(e.why.reserved_first_core_per_l3.test(core.pus[0]));
  }
  EXPECT_EQ(e.why.order, Order::kGpu);
  EXPECT_EQ(e.why.order_from, OrderFrom::kPolicy);
  for (const TaskPlan& task : e.plan.tasks) {
    const TaskExplanation& why = e.why.tasks[task.rank];
    ASSERT_EQ(why.gpus.size(), 1u);
    EXPECT_EQ(why.gpus[0].reason, GpuReason::kRankOrder);
    EXPECT_EQ(why.gpus[0].sharers, 1);
    // All its cores are its GPU's L3's, named by that GPU.
    ASSERT_EQ(why.cores.size(), 1u);
    EXPECT_EQ(why.cores[0].source, CoreSource::kGpuDomain);
    const Gpu& gpu = e.topology.gpus[task.gpus[0].node_index];
    EXPECT_EQ(e.topology.gpus[why.cores[0].domain_gpu].locality.cpus, gpu.locality.cpus);
    EXPECT_EQ(gpu.locality.kind, LocalityKind::kL3);
    ASSERT_EQ(why.nics.size(), 1u);
    EXPECT_EQ(why.nics[0].gpu_step_index, task.gpus[0].step_index);
    EXPECT_TRUE(why.nics[0].leads);
    EXPECT_EQ(why.memory, MemoryReason::kGpuNuma);
    EXPECT_FALSE(why.far_from_gpu || why.shares_cores || why.shares_gpu);
  }
  const std::string text = explain_to_text(e.topology, e.plan, e.why, 2);
  EXPECT_TRUE(contains(text,
                       "reserved 0,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120: the "
                       "first core of each L3"))
      << text;
  EXPECT_TRUE(contains(text, "reserve_first_core_per_l3")) << text;
  const Gpu& gpu2 = e.topology.gpus[e.plan.tasks[2].gpus[0].node_index];
  EXPECT_TRUE(contains(text, "its GPU's own domain, " + describe_locality(gpu2.locality))) << text;
  EXPECT_TRUE(line_with(text, "NIC     " + e.topology.nics[e.plan.tasks[2].nic_index].name,
                        "nearest to its GPU"))
      << text;
  EXPECT_TRUE(contains(text, "ROCR_VISIBLE_DEVICES=2  gpu_env[")) << text;
  EXPECT_FALSE(contains(text, "local task 3:")) << "--rank 2 shows task 2 only";
}

// Where the node reports no locality for its devices, explain claims no nearness: no GPUs that
// "sit together", no NIC "nearest" or "equally near", no package for them; the unmet rule says why.
TEST(Explain, ClaimsNoNearnessTheNodeDoesNotReport) {
  const Explained e = explain("lumi-g-noloc.xml", std::nullopt, tasks(2));
  for (const TaskExplanation& why : e.why.tasks)
    for (const NicChoice& nic : why.nics)
      EXPECT_EQ(nic.nearness, Nearness::kUnknown);
  const std::string text = explain_to_text(e.topology, e.plan, e.why, std::nullopt);
  EXPECT_FALSE(contains(text, "sit together")) << text;
  EXPECT_FALSE(contains(text, "nearest to its GPU")) << text;
  EXPECT_FALSE(contains(text, "equally near")) << text;
  EXPECT_FALSE(contains(text, "same package")) << text;
  EXPECT_TRUE(contains(text, "nearness unknown (the node reports no locality for it)")) << text;
  EXPECT_TRUE(contains(text, "not met  the node reports no CPU locality")) << text;
}

TEST(Explain, SaysWhichRulesCouldNotBeMet) {
  // The step's CPUs on two CCDs only: most tasks get no core near their GPU.
  PlanRequest far = tasks(8);
  far.allowed_cpus = CpuSet::range(64, 79);
  const Explained e = explain("lumi-g.xml", "lumi-g.conf", far);
  int far_tasks = 0;
  for (const TaskExplanation& why : e.why.tasks)
    far_tasks += why.far_from_gpu;
  EXPECT_EQ(far_tasks, 6);
  const std::string text = explain_to_text(e.topology, e.plan, e.why, std::nullopt);
  EXPECT_TRUE(line_with(text, "not met GPU domain", "none of its CPUs lie in its GPUs' domains"))
      << text;
  EXPECT_TRUE(contains(text, "the task holding most cores gave up one")) << text;

  // More tasks than hardware threads: shared cores and shared GPUs.
  const Explained crowded = explain("lumi-g.xml", std::nullopt, tasks(200));
  const TaskExplanation& last = crowded.why.tasks[199];
  EXPECT_TRUE(last.shares_cores);
  EXPECT_TRUE(last.shares_gpu);
  ASSERT_FALSE(last.cores.empty());
  EXPECT_EQ(last.cores.back().source, CoreSource::kShared);
  const std::string json = explain_to_json(crowded.topology, crowded.plan, crowded.why, 199);
  const output::Json parsed = output::Json::parse(json);
  ASSERT_EQ(parsed["tasks"].size(), 1u);
  EXPECT_EQ(parsed["tasks"][0]["rank"], 199);
  EXPECT_EQ(parsed["tasks"][0]["not_met"].size(), 2u);
  EXPECT_EQ(parsed["tasks"][0]["cores"].back()["source"], "shared");
}

TEST(Explain, SharedCoresOfATaskWithoutGpusClaimNoNearness) {
  // A step without GPUs and with more tasks than threads: its tasks have nothing to be near, so
  // their shared cores are the least loaded, not "on another package" (LUMI-G has one package).
  PlanRequest no_gpus = tasks(200);
  no_gpus.gpus = std::vector<StepGpu>{};
  const Explained e = explain("lumi-g.xml", std::nullopt, no_gpus);
  int shared = 0;
  for (const TaskExplanation& why : e.why.tasks) {
    for (const CoreGrant& grant : why.cores) {
      if (grant.source != CoreSource::kShared) continue;
      ++shared;
      EXPECT_EQ(grant.nearness, Nearness::kNoAnchor);
    }
  }
  EXPECT_GT(shared, 0);
  const std::string text = explain_to_text(e.topology, e.plan, e.why, 199);
  EXPECT_TRUE(contains(text,
                       "a core shared with other tasks, the least loaded, the task having "
                       "no GPU to be near"))
      << text;
  EXPECT_FALSE(contains(text, "another package")) << text;
  const output::Json parsed = output::Json::parse(explain_to_json(e.topology, e.plan, e.why, 199));
  EXPECT_EQ(parsed["tasks"][0]["cores"].back()["nearness"], "none");
}

TEST(Explain, OrderCpuGivesGpusByTheShareOfCoresTheirDomainHolds) {
  PlanRequest request = tasks(8);
  request.order = Order::kCpu;
  const Explained e = explain("lumi-g.xml", "lumi-g.conf", request);
  EXPECT_EQ(e.why.order_from, OrderFrom::kRequest);
  for (const TaskExplanation& why : e.why.tasks) {
    ASSERT_EQ(why.gpus.size(), 1u);
    EXPECT_EQ(why.gpus[0].reason, GpuReason::kCoreShare);
    EXPECT_EQ(why.gpus[0].share_permille, 1000);
    EXPECT_EQ(why.gpus[0].nearness, Nearness::kL3);
    ASSERT_EQ(why.cores.size(), 1u);
    EXPECT_EQ(why.cores[0].source, CoreSource::kNodeShare);
  }
}

TEST(Explain, SpareCoresSayHowNearTheyAre) {
  // DGX H100: 8 GPUs on 2 sockets; with 4 tasks on GPUs 0 and 4-6 the other GPUs' cores are
  // spare and go to the tasks nearest them.
  PlanRequest request = tasks(4);
  request.gpus = std::vector<StepGpu>{{0, "0"}, {4, "4"}, {5, "5"}, {6, "6"}};
  const Explained e = explain("dgx-h100.xml", std::nullopt, request);
  bool spare = false;
  for (const TaskExplanation& why : e.why.tasks) {
    for (const CoreGrant& grant : why.cores) {
      if (grant.source != CoreSource::kSpare) continue;
      spare = true;
      EXPECT_NE(grant.nearness, Nearness::kPciSwitch);
    }
  }
  const std::string text = explain_to_text(e.topology, e.plan, e.why, std::nullopt);
  EXPECT_EQ(spare, contains(text, "spare cores no task's GPU domain gave out")) << text;

  // cpus-per-task beyond the domain's share spills to the nearest free L3.
  PlanRequest wide = tasks(4);  // one GPU and 8 cores each; a CCD holds 7 usable ones
  wide.gpus = std::vector<StepGpu>{{0, "0"}, {1, "1"}, {2, "2"}, {3, "3"}};
  wide.cpus_per_task = 8;
  const Explained spilled = explain("lumi-g.xml", "lumi-g.conf", wide);
  bool spill = false;
  for (const TaskExplanation& why : spilled.why.tasks)
    for (const CoreGrant& grant : why.cores)
      spill = spill || grant.source == CoreSource::kSpill;
  EXPECT_TRUE(spill);
}

TEST(Explain, CitesThePolicyLineOfEachRule) {
  const std::string policy =
      "# a comment: reserved_cpus\n"
      "reserved_cpus: \"0,64\"\n"
      "expect {\n"
      "  gpu_count: 8  # smt: 2\n"
      "}\n"
      "nic_env { name: \"A\" value: \"{ not a brace\" }\n"
      "nic_env { name: \"B\" value: \"x\" }\n"
      "smt: 1\n";
  const PolicyLines lines = policy_field_lines(policy);
  EXPECT_EQ(lines.at("reserved_cpus"), std::vector<int>{2});
  EXPECT_EQ(lines.at("expect"), std::vector<int>{3});
  EXPECT_EQ(lines.count("gpu_count"), 0u) << "nested fields are not the policy's own";
  EXPECT_EQ(lines.at("nic_env"), (std::vector<int>{6, 7}));
  EXPECT_EQ(lines.at("smt"), std::vector<int>{8});

  PlanExplanation why;
  why.policy_source = "/etc/gpubind/policy.conf";
  why.step_cpus = CpuSet::range(0, 127);
  why.reserved_listed = CpuSet::parse_list("0,64").value();
  const Topology none;
  const std::string text = explain_to_text(none, Plan{}, why, std::nullopt, lines);
  EXPECT_TRUE(contains(text,
                       "reserved 0,64: reserved_cpus in the site policy "
                       "(/etc/gpubind/policy.conf:2)"))
      << text;
}

TEST(Explain, SmtAndCoreListsSayWhichCpusNoTaskGets) {
  PlanRequest request = tasks(2);
  request.smt = 1;
  request.allowed_cores = CpuSet::range(0, 15);
  const Explained e = explain("lumi-g.xml", std::nullopt, request);
  // Cores 16-63 are outside the step's cores; the second threads of cores 0-15 are trimmed.
  EXPECT_TRUE(e.why.outside_cores.test(16));
  EXPECT_FALSE(e.why.outside_cores.test(15));
  EXPECT_EQ(e.why.smt, 1);
  EXPECT_EQ(e.why.smt_trimmed.count(), 16);
}

}  // namespace
}  // namespace gpubind
