// The launch side's work in each task before exec, as slurmstepd does it: on a node of 64 GPUs
// (an MI300X node in CPX mode, 8 cards of 8 partitions, 2 packages of 4 NUMA nodes, 192 cores)
// with 256 tasks under Slurm's --gpu-bind=closest, whose GPUs the task's environment names
// (SLURM_STEP_GPUS by node index, BM_LaunchClosestNamed) or, under ConstrainDevices, the task's
// CPUs tell (BM_LaunchClosestByCpus). One iteration decides every task once; the time per task is
// the iteration's over 256. Run: build/bin/gpubind_launch_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gpubind/api/convert.h"
#include "gpubind/bench/synthetic_topology.h"
#include "gpubind/client/launch.h"
#include "gpubind/planner.h"
#include "gpubind/protocol/client.h"

namespace gpubind {
namespace {

constexpr int kTasks = 256;

struct Step {
  client::StepPlan plan;
  std::vector<int> step_gpus;
  std::vector<std::map<std::string, std::string>> named, by_cpus;  // each task's environment
};

const Step& step() {
  static const Step built = [] {
    bench::SyntheticShape shape;
    shape.packages = 2;
    shape.numa_per_package = 4;
    shape.l3_per_numa = 3;
    shape.cores_per_l3 = 8;
    shape.threads_per_core = 2;
    shape.gpus_per_numa = 8;
    const Topology topology = bench::synthetic_topology(shape);
    PlanRequest request;
    request.ntasks = kTasks;
    auto plan = make_plan(topology, SitePolicy(), request);
    if (!plan) std::abort();
    auto decoded = protocol::decode_plan(api::serialize_plan(*plan, &topology, {}));
    if (!decoded) std::abort();
    Step out;
    out.plan = std::move(*decoded);
    for (size_t g = 0; g < topology.gpus.size(); ++g)
      out.step_gpus.push_back(static_cast<int>(g));
    for (const client::TaskBinding& task : out.plan.tasks) {
      std::string gpus;
      for (const client::TaskGpuInfo& gpu : task.gpus)
        gpus += (gpus.empty() ? "" : ",") + std::to_string(gpu.node_index);
      out.named.push_back({{"SLURM_STEP_GPUS", gpus}, {"SLURMD_TRES_BIND", "gpu:closest"}});
      out.by_cpus.push_back({{"SLURM_STEP_GPUS", "0"}, {"SLURMD_TRES_BIND", "gpu:closest"}});
    }
    return out;
  }();
  return built;
}

void decide_every_task(benchmark::State& state,
                       const std::vector<std::map<std::string, std::string>>& envs) {
  const Step& s = step();
  client::StepFacts facts;
  facts.gpu_binding = "closest";
  for (auto _ : state) {
    for (int task = 0; task < kTasks; ++task) {
      const auto& vars = envs[task];
      const client::EnvLookup env = [&](const std::string& name) -> std::optional<std::string> {
        const auto found = vars.find(name);
        if (found == vars.end()) return std::nullopt;
        return found->second;
      };
      const client::TaskLaunch launch{task, kTasks, *CpuSet::parse_list(s.plan.tasks[task].cpus)};
      auto decision = client::decide_launch(s.plan, facts, s.step_gpus, env, launch, false);
      benchmark::DoNotOptimize(decision);
    }
  }
  state.SetItemsProcessed(state.iterations() * kTasks);
}

void BM_LaunchClosestNamed(benchmark::State& state) {
  decide_every_task(state, step().named);
}
BENCHMARK(BM_LaunchClosestNamed)->Unit(benchmark::kMicrosecond);

void BM_LaunchClosestByCpus(benchmark::State& state) {
  decide_every_task(state, step().by_cpus);
}
BENCHMARK(BM_LaunchClosestByCpus)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpubind

BENCHMARK_MAIN();
