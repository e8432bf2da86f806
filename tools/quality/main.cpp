// gpubind-quality: how good gpubind's plans are on real GPU-node dumps, scored by checks written
// apart from the planner.
//
// Each dump is loaded with gpubind's loader (default NIC patterns) and, on its own, with hwloc
// (the reference: cores, L3s, NUMA nodes, packages, PCI devices). It is planned, whole node and
// every GPU, default policy, for ntasks in {1, G/2, G, 2G, 3G, one per usable core} (no GPU:
// {1, cores/2, one per usable core}) x order {gpu, cpu} x reserve_first_core_per_l3 {no, yes}.
//
// Terms. A task's cores: the reference cores holding its CPUs; its share: their number. Usable
// cores: cores with a PU not reserved (reserve: every PU of the first core of each L3).
// Oversubscribed: ntasks > usable cores. A device's anchor: the cpuset of its PCI device's non-I/O
// ancestor (hwloc_get_non_io_ancestor_obj); where that holds no CPU (I/O below a CPU-less NUMA
// node), the NUMA nodes with CPUs that hwloc's NUMA distance matrix puts nearest to the CPU-less
// nodes of its nodeset, over the whole machine. Its locality: the smallest (fewest PUs) L3, NUMA
// node or package holding the anchor, else the machine (a GPU without PCI id: gpubind's). A task's
// home: the union of its GPUs' localities under order=gpu, else the machine. GPU g is near a task
// when g's locality holds more than half of the task's CPUs. NIC distance from a GPU: the PCI
// bridges crossed when the two share a bridge below the host bridge, else 1000 + PUs of the
// smallest of {the GPU's locality if it holds the NIC's anchor, a NUMA node, a package} holding
// both anchors, else 1000000; a GPU's nearest NICs are those at its smallest distance.
//
// Columns (per dump, over its cases): L3 straddles: tasks across L3s whose share is at most the
// usable cores of the roomiest L3 (cases not oversubscribed); worst core ratio: the largest
// max/min share among tasks with as many GPUs; tasks on GPU locality: tasks with GPUs holding
// their share of their first GPU's locality (its usable cores over the tasks whose first GPU sits
// there, or all their own cores if fewer; order=gpu cases not oversubscribed); cores used: usable
// cores holding a task / usable cores, min and mean; NIC not nearest: tasks whose NIC is not among
// their first GPU's nearest; plan n=G / n=cores: median planner time (order=gpu, no reserve).
//
// Violations (exit 1):
//   refused       the planner refused the request;
//   task-count    a plan with another number of tasks than asked;
//   no-cpu        a task without CPU;
//   reserved-cpu  a task holding a reserved CPU;
//   shared-cpu    two tasks sharing a CPU, not oversubscribed;
//   l3-straddle   a straddle counted above, when the shares of all tasks with the same home fit,
//                 placed largest first each into the first L3 with room, into the usable cores
//                 of the L3s that have a PU in the home; only a task's cores inside its home
//                 count (order=gpu: the cores no GPU is near are shared out by default);
//   imbalance     among tasks with as many GPUs, max share - min share > 1, not oversubscribed,
//                 unless the L3s call for it: either the smallest task lies in one L3 and an
//                 even split of these tasks' cores (shares within one) would force a straddle
//                 (each even share fits one L3, but not all of them, placed as above, into the
//                 L3s the tasks occupy), or each task holds every usable core of each L3 it
//                 touches and max - min is at most the usable cores of the roomiest L3;
//   gpu-not-near  order=cpu, ntasks = G: a task's GPU is not near it while a GPU no task holds
//                 is, or another task's GPU is and swapping would not make that task lose its
//                 near GPU;
//   gpu-matching  order=cpu: a task mostly inside a NUMA node that holds GPUs (their locality
//                 inside it) has none of them, while one of them is held by a task mostly
//                 outside the node or carries fewer tasks than the task's own GPU;
//   numa-tasks    order=cpu, not oversubscribed: a NUMA node holds (as most of their CPUs) a
//                 whole task more than its share of the tasks, in proportion to usable cores;
//   domain-tasks  order=gpu, ntasks >= G, not oversubscribed: the GPUs of one locality carry more
//                 tasks than it has usable cores while another's carry fewer, one of the first's
//                 GPUs carrying the most tasks and one of the second's fewer;
//   domain-cores  order=gpu, not oversubscribed: a task holds cores outside its home while a
//                 usable core of its home stays idle or is held by a task whose home it is not;
//   spare-far     order=gpu, not oversubscribed, with a task's distance to a core: 0 inside its
//                 home, else the PUs of the smallest L3, NUMA node or package holding both (the
//                 machine's PUs if none): a task's core outside its home while an idle usable
//                 core is nearer it; two tasks that would both come nearer, neither farther,
//                 by swapping one such core each; or a chain: task T's such core is nearer a
//                 task V, and a task U with more cores per GPU than V would have with one more
//                 holds such a core no farther from T, the three moves bringing cores nearer in
//                 sum.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "checks.h"
#include "gpubind/output/plan_timing.h"
#include "mapping_score.h"
#include "report.h"

namespace gpubind::quality {
namespace {

namespace fs = std::filesystem;

constexpr int kExitOk = 0;
constexpr int kExitViolations = 1;
constexpr int kExitBadInput = 2;

constexpr const char* kUsage = R"(usage: gpubind-quality [--json] [--no-timing] DIR_OR_XML...
       gpubind-quality [--json] [--no-timing] --live
       gpubind-quality --score XML < MAPPINGS

Plans every hwloc XML dump given (a folder: every *.xml in it) for a set of step shapes, scores
the plans with checks independent of the planner and prints one Markdown row per dump, a summary
and a VIOLATION line per hard violation.

  --json       the same data as JSON
  --no-timing  leave out the planner timings
  --live       this machine instead, discovered live as gpubindd does (hwloc's HWLOC_FSROOT
               points it at a captured sysfs/procfs tree)

  --score XML  scores bindings of the dump's node, any binder's, read one JSON object a line:
               {"gpus_counted": true, "tasks": [{"cpus": "0-7", "gpus": ["0000:c1:00.0"]}]}
               (a task's "gpu_indices", gpubind's GPU numbers, take the place of its bus ids);
               prints one line each, {"metrics": {NAME: VALUE, ...}} (lower is better) or
               {"error": WHY}

Exit status: 0 no violation, 1 violations, 2 bad input.
)";

struct Options {
  bool json = false;
  bool timing = true;
  bool live = false;
  std::vector<std::string> paths;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "gpubind-quality: %s\n", message.c_str());
  return kExitBadInput;
}

Result<std::vector<std::string>> xml_files_in(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".xml") files.push_back(entry.path().string());
  }
  if (ec) return make_error("'" + dir.string() + "': " + ec.message());
  if (files.empty()) return make_error("'" + dir.string() + "': no *.xml in it");
  std::sort(files.begin(), files.end());
  return files;
}

Result<std::vector<std::string>> dump_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      auto inside = xml_files_in(path);
      if (!inside) return inside.error();
      files.insert(files.end(), inside->begin(), inside->end());
    } else if (fs::is_regular_file(path, ec)) {
      files.push_back(path);
    } else {
      return make_error("'" + path + "': no such file or folder");
    }
  }
  return files;
}

std::optional<PlanTiming> time_case(const Node& node, int ntasks) {
  if (ntasks < 1) return std::nullopt;
  const Case spec{ntasks, Order::kGpu, false};
  return time_make_plan(node.topology, spec.policy(), spec.request());
}

DumpReport report_dump(const Node& node, bool timing) {
  DumpReport dump;
  dump.name = node.name;
  dump.gpus = static_cast<int>(node.topology.gpus.size());
  dump.nics = static_cast<int>(node.topology.nics.size());
  dump.cores = static_cast<int>(node.ref.cores.size());
  for (const Case& spec : cases_for(node)) {
    const SitePolicy policy = spec.policy();
    dump.cases.push_back(score_case(node, spec, make_plan(node.topology, policy, spec.request())));
  }
  if (timing) {
    dump.time_one_per_gpu = time_case(node, dump.gpus);
    dump.time_one_per_core = time_case(node, usable_cores(node, false).count());
  }
  return dump;
}

Result<Options> parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      options.json = true;
    } else if (arg == "--no-timing") {
      options.timing = false;
    } else if (arg == "--live") {
      options.live = true;
    } else if (arg.rfind("--", 0) == 0) {
      return make_error("unknown option " + arg + "\n" + kUsage);
    } else {
      options.paths.push_back(arg);
    }
  }
  if (options.live && !options.paths.empty())
    return make_error(std::string("--live takes no dump\n") + kUsage);
  if (!options.live && options.paths.empty())
    return make_error(std::string("no dump given\n") + kUsage);
  return options;
}

// One mapping line scored, as one line of JSON.
nlohmann::json score_line(const Node& node, const std::string& line) {
  const nlohmann::json in = nlohmann::json::parse(line, nullptr, false);
  if (in.is_discarded() || !in.is_object() || !in.contains("tasks") || !in["tasks"].is_array())
    return {{"error", "not a mapping: " + line.substr(0, 80)}};
  std::vector<BoundTask> tasks;
  for (const nlohmann::json& t : in["tasks"]) {
    BoundTask task;
    auto cpus = CpuSet::parse_list(t.value("cpus", std::string()));
    if (!cpus) return {{"error", "a task's cpus is not a CPU list"}};
    task.cpus = *cpus;
    for (const nlohmann::json& gpu : t.value("gpus", nlohmann::json::array())) {
      if (!gpu.is_string()) return {{"error", "a task's gpus are not PCI bus ids"}};
      task.gpus.push_back(gpu.get<std::string>());
    }
    for (const nlohmann::json& index : t.value("gpu_indices", nlohmann::json::array())) {
      if (!index.is_number_integer()) return {{"error", "a task's gpu_indices are not numbers"}};
      task.gpu_indices.push_back(index.get<int>());
    }
    tasks.push_back(std::move(task));
  }
  auto metrics = score_mapping(node, tasks, in.value("gpus_counted", true));
  if (!metrics) return {{"error", metrics.error().message}};
  nlohmann::json out = nlohmann::json::object();
  const auto values = metrics->values();
  for (size_t i = 0; i < values.size(); ++i)
    out[MappingMetrics::kNames[i]] = values[i];
  return {{"metrics", out}};
}

int score_mappings(const std::string& xml) {
  auto node = load_node(xml);
  if (!node) return fail(node.error().message);
  for (std::string line; std::getline(std::cin, line);) {
    if (!line.empty()) std::cout << score_line(*node, line).dump() << std::endl;
  }
  return kExitOk;
}

int run(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (argc >= 2 && std::string(argv[1]) == "--score") {
    if (argc != 3) return fail(std::string("--score takes one dump\n") + kUsage);
    return score_mappings(argv[2]);
  }
  auto options = parse(argc, argv);
  if (!options) return fail(options.error().message);
  // The empty path names the live topology.
  auto files = options->live ? Result<std::vector<std::string>>(std::vector<std::string>{""})
                             : dump_files(options->paths);
  if (!files) return fail(files.error().message);
  std::vector<DumpReport> dumps;
  for (const std::string& file : *files) {
    auto node = load_node(file);
    if (!node) return fail(node.error().message);
    dumps.push_back(report_dump(*node, options->timing));
  }
  std::cout << (options->json ? report_json(dumps) : report_markdown(dumps));
  return violation_count(dumps) > 0 ? kExitViolations : kExitOk;
}

}  // namespace
}  // namespace gpubind::quality

int main(int argc, char** argv) {
  return gpubind::quality::run(argc, argv);
}
