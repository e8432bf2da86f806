// gpubindctl: inspect a node's topology and the binding plan gpubind makes for a job step.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli_args.h"
#include "gpubind/plan_format.h"
#include "gpubind/planner.h"
#include "gpubind/policy_loader.h"
#include "gpubind/topology_hwloc.h"

namespace gpubind::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;

constexpr const char* kUsage = R"(usage: gpubindctl COMMAND [OPTIONS]

Commands:
  topology --topology FILE.xml [--policy FILE] [--json]
      GPUs, NICs and their CPU locality as gpubind sees them.
  plan --topology FILE.xml [--policy FILE] --ntasks N [--cpus LIST] [--gpus LIST]
       [--cpus-per-task N] [--gpus-per-task N] [--tasks-per-gpu N] [--order gpu|cpu]
       [--smt N] [--omp] [--json]
      The per-task binding plan for a job step on that node.

Options:
  --topology FILE   hwloc XML of the node (lstopo --of xml --whole-io), or "live" to discover
                    this machine
  --policy FILE     site policy in protobuf text format (default: built-in defaults)
  --ntasks N        tasks of the step on this node
  --cpus LIST       the step's CPUs, "0-63" or a 0x mask (default: every CPU)
  --gpus LIST       the step's GPUs as node GPU indices, "0,1,4-5" (default: every GPU)
  --json            machine-readable output
  --help            this text
)";

int fail(const std::string& message) {
  std::fprintf(stderr, "gpubindctl: %s\n", message.c_str());
  return kExitBadInput;
}

struct Node {
  Topology topology;
  SitePolicy policy;
};

Result<Node> load_node(const Args& args) {
  Node node;
  if (auto path = args.get("policy")) {
    auto policy = load_policy_file(*path);
    if (!policy) return policy.error();
    node.policy = std::move(*policy);
  }
  auto path = args.get("topology");
  if (!path || path->empty()) return make_error("--topology FILE.xml (or 'live') is required");
  auto topology = *path == "live" ? load_topology_live(node.policy.nic_patterns)
                                  : load_topology_xml(*path, node.policy.nic_patterns);
  if (!topology) return topology.error();
  node.topology = std::move(*topology);
  if (auto status = apply_gpu_order(node.topology, node.policy.gpu_order); !status) {
    return make_error(node.policy.source + ": " + status.error().message);
  }
  return node;
}

Result<CpuSet> parse_cpus(const std::string& text) {
  if (text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0) return CpuSet::parse_mask(text);
  return CpuSet::parse_list(text);
}

Result<PlanRequest> request_from(const Args& args) {
  PlanRequest request;
  if (!args.has("ntasks")) return make_error("--ntasks N is required");
  auto ntasks = args.get_int("ntasks", 1, 1, kMaxTasks);
  auto cpt = args.get_int("cpus-per-task", 0, 0, CpuSet::kMaxCpu);
  auto gpt = args.get_int("gpus-per-task", 0, 0, 1024);
  auto tpg = args.get_int("tasks-per-gpu", 0, 0, kMaxTasks);
  auto smt = args.get_int("smt", -1, 0, 64);
  for (const auto* r : {&ntasks, &cpt, &gpt, &tpg, &smt}) {
    if (!*r) return r->error();
  }
  request.ntasks = *ntasks;
  request.cpus_per_task = *cpt;
  request.gpus_per_task = *gpt;
  request.tasks_per_gpu = *tpg;
  if (*smt >= 0) request.smt = *smt;
  if (auto cpus = args.get("cpus")) {
    auto set = parse_cpus(*cpus);
    if (!set) return make_error("--cpus: " + set.error().message);
    request.allowed_cpus = *set;
  }
  if (auto gpus = args.get("gpus")) {
    auto set = CpuSet::parse_list(*gpus);  // same list syntax
    if (!set) return make_error("--gpus: " + set.error().message);
    std::vector<StepGpu> step;
    for (int index : set->to_vector())
      step.push_back({index, std::to_string(index)});
    request.gpus = std::move(step);
  }
  if (auto order = args.get("order")) {
    if (*order == "gpu")
      request.order = Order::kGpu;
    else if (*order == "cpu")
      request.order = Order::kCpu;
    else
      return make_error("--order: expected 'gpu' or 'cpu', got '" + *order + "'");
  }
  if (args.has("omp")) request.omp_places = true;
  return request;
}

int run_topology(const Args& args) {
  auto node = load_node(args);
  if (!node) return fail(node.error().message);
  std::cout << (args.has("json") ? topology_to_json(node->topology)
                                 : topology_to_text(node->topology));
  return kExitOk;
}

int run_plan(const Args& args) {
  auto request = request_from(args);
  if (!request) return fail(request.error().message);
  auto node = load_node(args);
  if (!node) return fail(node.error().message);
  auto plan = make_plan(node->topology, node->policy, *request);
  if (!plan) return fail("cannot plan: " + plan.error().message);
  std::cout << (args.has("json") ? plan_to_json(*plan)
                                 : plan_to_table(*plan));
  return kExitOk;
}

int run(const std::vector<std::string>& argv) {
  if (argv.empty()) return fail(std::string("no command given\n") + kUsage);
  const std::string& command = argv[0];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  const std::set<std::string> common_values = {"topology", "policy"};
  if (command == "topology") {
    auto args = Args::parse(rest, common_values, {"json"});
    if (!args) return fail("topology: " + args.error().message);
    return run_topology(*args);
  }
  if (command == "plan") {
    std::set<std::string> values = common_values;
    values.insert({"ntasks", "cpus", "gpus", "cpus-per-task", "gpus-per-task", "tasks-per-gpu",
                   "order", "smt"});
    auto args = Args::parse(rest, values, {"json", "omp"});
    if (!args) return fail("plan: " + args.error().message);
    if (!args->positional().empty())
      return fail("plan: unexpected argument '" + args->positional()[0] + "'");
    return run_plan(*args);
  }
  return fail("unknown command '" + command + "'\n" + kUsage);
}

}  // namespace
}  // namespace gpubind::cli

int main(int argc, char** argv) {
  return gpubind::cli::run(std::vector<std::string>(argv + 1, argv + argc));
}
