#include "gpubind/output/plan_svg.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "../support/fixtures.h"

namespace gpubind {
namespace {

using testing::fixture;

Plan plan_for(const Topology& topology, const SitePolicy& policy, int ntasks) {
  PlanRequest request;
  request.ntasks = ntasks;
  auto plan = make_plan(topology, policy, request);
  EXPECT_TRUE(plan) << plan.error().message;
  return plan ? *plan : Plan{};
}

// The picture read back: each drawn element's data-* attributes.
struct Drawn {
  std::string css;
  int index = -1;
  std::string pus, tasks;
  size_t offset = 0;
};

std::vector<Drawn> drawn(const std::string& svg, const std::string& kind) {
  std::vector<Drawn> found;
  const std::regex pattern(
      kind == "core"
          ? R"re(<g class="(core(?: reserved)?)" data-core="(\d+)" data-pus="([\d,]*)" data-tasks="([\d,]*)">)re"
          : R"re(<g class="()re" + kind +
                R"re()" data-index="(-?\d+)"()( data-tasks="([\d,]*)")?>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    Drawn item{m[1].str(), std::stoi(m[2].str()), m[3].str(),
               kind == "core" ? m[4].str() : m[5].str(), static_cast<size_t>(m.position(0))};
    found.push_back(item);
  }
  return found;
}

std::set<int> numbers(const std::string& list) {
  std::set<int> out;
  auto parsed = CpuSet::parse_list(list);
  if (parsed) parsed->for_each([&](int n) { out.insert(n); });
  return out;
}

TEST(PlanSvg, LumiCoresAreColouredByTheirTaskAndReservedOnesMarked) {
  const Topology& node = fixture("lumi-g");
  const SitePolicy policy = testing::lumi_policy();
  const Plan plan = plan_for(node, policy, 8);
  const CpuSet reserved = reserved_cpus(node, policy);
  const std::string svg = plan_to_svg(node, reserved, plan, "lumi");

  const auto cores = drawn(svg, "core");
  ASSERT_EQ(cores.size(), node.cores.size());
  int reserved_cores = 0;
  for (const Drawn& core : cores) {
    const Core& model = node.cores[core.index];
    const bool is_reserved = reserved.test(model.pus.front());
    EXPECT_EQ(core.css == "core reserved", is_reserved) << "core " << core.index;
    reserved_cores += is_reserved;
    std::set<int> owners;
    for (const TaskPlan& task : plan.tasks) {
      for (const int pu : model.pus) {
        if (task.cpus.test(pu)) owners.insert(task.rank);
      }
    }
    EXPECT_EQ(numbers(core.tasks), owners) << "core " << core.index;
    // Each owner's colour fills the cell.
    const size_t end = svg.find("</g>", core.offset);
    for (const int owner : owners) {
      EXPECT_NE(svg.substr(core.offset, end - core.offset).find(task_colour(owner)),
                std::string::npos)
          << "core " << core.index;
    }
  }
  EXPECT_EQ(reserved_cores, 8);
  EXPECT_NE(svg.find("reserved by the site policy: 0,8,16,24,32,40,48,56,64"), std::string::npos);
}

TEST(PlanSvg, GpusAndNicsSitInTheirL3AndShowTheirTasks) {
  const Topology& node = fixture("lumi-g");
  const Plan plan = plan_for(node, testing::lumi_policy(), 8);
  const std::string svg = plan_to_svg(node, {}, plan, "lumi");

  const auto l3s = drawn(svg, "l3");
  const auto gpus = drawn(svg, "gpu");
  ASSERT_EQ(gpus.size(), node.gpus.size());
  for (const Drawn& gpu : gpus) {
    // The GPU's chip is drawn inside the box of the L3 its locality names.
    const int l3 = node.gpus[gpu.index].locality.l3_index;
    const Drawn* box = nullptr;
    for (const Drawn& candidate : l3s) {
      if (candidate.offset < gpu.offset) box = &candidate;
    }
    ASSERT_NE(box, nullptr);
    EXPECT_EQ(box->index, l3) << "GPU " << gpu.index;
    // LUMI: rank r has GCD r.
    EXPECT_EQ(gpu.tasks, std::to_string(gpu.index));
  }
  const auto nics = drawn(svg, "nic");
  ASSERT_EQ(nics.size(), 4u);
  for (const Drawn& nic : nics) {
    std::set<int> users;
    for (const TaskPlan& task : plan.tasks) {
      if (task.nic_index == nic.index) users.insert(task.rank);
    }
    EXPECT_EQ(numbers(nic.tasks), users);
    EXPECT_EQ(users.size(), 2u);
  }
}

TEST(PlanSvg, SharedGpusShowEverySharer) {
  const Topology& node = fixture("lumi-g");
  const Plan plan = plan_for(node, testing::lumi_policy(), 16);
  const std::string svg = plan_to_svg(node, {}, plan, "lumi");
  for (const Drawn& gpu : drawn(svg, "gpu")) {
    EXPECT_EQ(numbers(gpu.tasks).size(), 2u) << "GPU " << gpu.index;
  }
  for (int rank = 0; rank < 16; ++rank) {
    EXPECT_NE(svg.find("rank " + std::to_string(rank) + " · CPUs"), std::string::npos);
  }
}

TEST(PlanSvg, PartitionsAndTilesAreNamed) {
  const std::string mi300a =
      plan_to_svg(fixture("mi300a-tpx"), {}, plan_for(fixture("mi300a-tpx"), {}, 12), "mi300a");
  EXPECT_NE(mi300a.find("part 2/3"), std::string::npos);
  const std::string pvc =
      plan_to_svg(fixture("aurora-pvc"), {}, plan_for(fixture("aurora-pvc"), {}, 12), "pvc");
  EXPECT_NE(pvc.find("2 tiles"), std::string::npos);
  // Tile 1 of the first card: device 1 under Level Zero's default FLAT hierarchy.
  EXPECT_NE(pvc.find("GPU 1 (0000:18:00.0)"), std::string::npos);
}

TEST(PlanSvg, TextIsEscaped) {
  Topology node = fixture("lumi-g");
  node.hostname = "evil<&\"host\">";
  Plan plan = plan_for(node, {}, 2);
  plan.warnings.push_back("a <warning> & \x01 more");
  const std::string svg = plan_to_svg(node, {}, plan, "title <b>&");
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_EQ(svg.find("evil<"), std::string::npos);
  EXPECT_EQ(svg.find('\x01'), std::string::npos);
  EXPECT_NE(svg.find("title &lt;b&gt;&amp;"), std::string::npos);
  EXPECT_NE(svg.find("Node evil&lt;&amp;&quot;host&quot;&gt;"), std::string::npos);
  EXPECT_NE(svg.find("warning: a &lt;warning&gt; &amp;  more"), std::string::npos);
}

TEST(PlanSvg, TaskColoursAreDistinct) {
  std::set<std::string> colours;
  for (int rank = 0; rank < 256; ++rank)
    colours.insert(task_colour(rank));
  EXPECT_EQ(colours.size(), 256u);
}

}  // namespace
}  // namespace gpubind
