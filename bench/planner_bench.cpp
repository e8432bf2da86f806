// Planner speed on real-shaped nodes: the LUMI-G fixture (128 PUs, 8 GCDs) with its policy, every
// fixture for 1, G and 4G tasks (BM_Plan/FIXTURE/TASKS), and a 1024-PU node.
// Run: build/bin/gpubind_bench [--benchmark_repetitions=9 --benchmark_report_aggregates_only=true]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>

#include "gpubind/bench/synthetic_topology.h"
#include "gpubind/explain.h"
#include "gpubind/planner.h"
#include "gpubind/topology_hwloc.h"

namespace gpubind {
namespace {

const Topology& lumi() {
  static const Topology topology = [] {
    auto loaded = load_topology_xml(std::string(GPUBIND_FIXTURES) + "/lumi-g.xml",
                                    SitePolicy::default_nic_patterns());
    if (!loaded) std::abort();
    return *loaded;
  }();
  return topology;
}

SitePolicy lumi_policy() {
  SitePolicy policy;
  policy.reserve_first_core_per_l3 = true;
  policy.smt = 1;
  return policy;
}

void plan_loop(benchmark::State& state, const Topology& topology, const SitePolicy& policy,
               Order order) {
  PlanRequest request;
  request.ntasks = static_cast<int>(state.range(0));
  request.order = order;
  for (auto _ : state) {
    auto plan = make_plan(topology, policy, request);
    if (!plan) state.SkipWithError(plan.error().message.c_str());
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_PlanLumiG(benchmark::State& state) {
  plan_loop(state, lumi(), lumi_policy(), Order::kGpu);
}
BENCHMARK(BM_PlanLumiG)->Arg(8)->Arg(56)->Unit(benchmark::kMicrosecond);

void BM_PlanLumiGOrderCpu(benchmark::State& state) {
  plan_loop(state, lumi(), lumi_policy(), Order::kCpu);
}
BENCHMARK(BM_PlanLumiGOrderCpu)->Arg(8)->Arg(56)->Unit(benchmark::kMicrosecond);

// The same plan with the planner's reasons recorded (gpubindctl explain): what asking costs.
void BM_PlanLumiGExplained(benchmark::State& state) {
  PlanRequest request;
  request.ntasks = static_cast<int>(state.range(0));
  const SitePolicy policy = lumi_policy();
  for (auto _ : state) {
    PlanExplanation explanation;
    auto plan = make_plan(lumi(), policy, request, explanation);
    if (!plan) state.SkipWithError(plan.error().message.c_str());
    benchmark::DoNotOptimize(plan);
    benchmark::DoNotOptimize(explanation);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PlanLumiGExplained)->Arg(8)->Arg(56)->Unit(benchmark::kMicrosecond);

void BM_Plan1024Pus(benchmark::State& state) {
  // 2 packages x 4 NUMA x 4 L3 x 16 cores x 2 threads, one GPU and NIC per NUMA node.
  static const Topology big = bench::synthetic_topology({});
  plan_loop(state, big, SitePolicy(), Order::kGpu);
}
BENCHMARK(BM_Plan1024Pus)->Arg(256)->Unit(benchmark::kMicrosecond);

void BM_LoadLumiGXml(benchmark::State& state) {
  const std::string path = std::string(GPUBIND_FIXTURES) + "/lumi-g.xml";
  for (auto _ : state) {
    auto loaded = load_topology_xml(path, SitePolicy::default_nic_patterns());
    benchmark::DoNotOptimize(loaded);
  }
}
BENCHMARK(BM_LoadLumiGXml)->Unit(benchmark::kMicrosecond);

// One benchmark per fixture and task count: 1 task, one per GPU, four per GPU.
void register_fixture_benchmarks() {
  std::set<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(GPUBIND_FIXTURES)) {
    if (entry.path().extension() == ".xml") files.insert(entry.path());
  }
  for (const auto& path : files) {
    auto loaded = load_topology_xml(path.string(), SitePolicy::default_nic_patterns());
    if (!loaded) std::abort();
    auto topology = std::make_shared<Topology>(std::move(*loaded));
    const int gpus = std::max<int>(1, static_cast<int>(topology->gpus.size()));
    for (const int ntasks : std::set<int>{1, gpus, 4 * gpus}) {
      const std::string name = "BM_Plan/" + path.stem().string() + "/" + std::to_string(ntasks);
      benchmark::RegisterBenchmark(name.c_str(), [topology, ntasks](benchmark::State& state) {
        PlanRequest request;
        request.ntasks = ntasks;
        for (auto _ : state) {
          auto plan = make_plan(*topology, SitePolicy(), request);
          if (!plan) state.SkipWithError(plan.error().message.c_str());
          benchmark::DoNotOptimize(plan);
        }
      })->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace
}  // namespace gpubind

int main(int argc, char** argv) {
  gpubind::register_fixture_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
