// gpubindctl: inspect a node's topology, the binding plan gpubind makes for a job step, and the
// daemon serving them. Offline with --topology FILE.xml, else it asks gpubindd. Each command is a
// file of its own (ctl.h lists them); this one parses the command line and dispatches.
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "ctl.h"

namespace gpubind::ctl {
namespace {

constexpr const char* kUsage = R"(usage: gpubindctl [--socket PATH] [--timeout MS] COMMAND [OPTIONS]

Commands:
  topology [--topology FILE.xml|live] [--policy FILE] [--json]
      GPUs, NICs and their CPU locality as gpubind sees them.
  plan [--topology FILE.xml|live] [--policy FILE] --ntasks N [--cpus LIST] [--gpus LIST]
       [--cpus-per-task N] [--gpus-per-task N] [--tasks-per-gpu N] [--order gpu|cpu]
       [--smt N] [--omp] [--ze-hierarchy flat|composite] [--json] [--svg FILE] [--time]
      The per-task binding plan for a job step on that node; --svg FILE also draws it.
  explain [--topology FILE.xml|live] [--policy FILE] --ntasks N [plan options] [--rank R]
          [--slurm-gpu-bind map_gpu:L|mask_gpu:L|per_task:N] [--json]
      Why each task of that plan gets its cores, GPUs, NIC and variables, in the planner's own
      reasons: the GPU's domain and the order, reserved CPUs and the policy line keeping them,
      spare cores and how near, the NIC's nearness, each variable's rule, and what could not
      be met. Without --topology, on gpubindd's node and policy (its plan, checked).
      --slurm-gpu-bind: under Slurm's own per-task GPU binding, the GPUs each task keeps and
      the planned task it is bound as.
  explain --job ID [--json]
      A running job on this node: each task's plan (gpubind's record of it) beside what it runs
      with now (the audit's reading), and the verdict.
  status [--json]
      What the daemon serves: version, uptime, policy, topology, requests, latency.
  bench [--clients N] [--requests M] [--no-cache] [--floor] [plan options] [--json]
      Load the daemon with M Plan calls in all (default 10000) from N concurrent clients
      (default 1) and report p50/p99/p99.9 latency and plans/s; --floor also measures the
      same plans over the plugin's compact protocol, an empty gRPC call and a raw Unix-socket
      echo of the same bytes.
  metrics [--textfile PATH.prom] [--audit [--record DIR]]
      The daemon's counters (plans by source, plan time, fallbacks, reloads) in the Prometheus
      text format; --textfile writes them atomically for node_exporter's textfile collector.
      A daemon that does not answer gets gpubind_daemon_up 0 (and exit status 1). --audit
      adds the audit's counts: running tasks by verdict (gpubind_audit_tasks{verdict});
      --record DIR also keeps each job's verdicts as audit --record does.
  check-node [--topology FILE.xml|live] [--policy FILE] [--no-daemon] [--json]
      The node health check: the node against the policy's `expect` and what binding needs
      (GPU localities with CPUs, NIC links up, kernel.numa_balancing, gpubindd answering).
      One "ERROR: gpubind: CODE: MESSAGE" line per fault and exit 1; exit 0 when healthy.
      Without --topology: this node as gpubindd sees it, with the site's policy (default
      /etc/gpubind/policy.conf); with FILE.xml offline (no links, sysctl or daemon).
  audit [--job ID] [--tasks] [--json] [--topology FILE.xml|live] [--policy FILE]
      Every task of every Slurm job step running on this node as it runs now: each thread's
      CPUs, its GPUs and where its memory lies, judged against gpubind's plan for it
      (as-planned, re-pinned: which threads moved where and what it costs) or, for a task
      gpubind did not bind, against the planner's rules (unbound-near, -far, -straddling,
      -overlapping). One line per step; --tasks one per task. Reads /proc only; root sees
      every job, anyone else their own. --record DIR (root): one file per running job with
      this node's verdicts, step by step (ended steps kept), in a folder root alone may enter.
  audit --admin-comment ID --record DIR
      The job's AdminComment read on standard input, with this node's record of the job
      merged in (the audit epilog stores it); exit 3 when there is no record of the job.

With --topology, topology and plan work offline on that hwloc XML ("live" discovers this
machine); without it they ask gpubindd.

Options:
  --socket PATH     gpubindd's socket (default $GPUBIND_SOCKET, else /run/gpubind/gpubind.sock)
  --timeout MS      give up on the daemon after MS milliseconds (default 5000)
  --policy FILE     site policy for offline use (default: built-in defaults; check-node:
                    /etc/gpubind/policy.conf where it exists)
  --no-daemon       check-node: do not ask gpubindd
  --ntasks N        tasks of the step on this node
  --cpus LIST       the step's CPUs, "0-63" or a 0x mask (default: every CPU)
  --gpus LIST       the step's GPUs as node GPU indices, "0,1,4-5" (default: every GPU)
  --ze-hierarchy H  how the tasks' Level Zero names PVC tiles (ZE_FLAT_DEVICE_HIERARCHY):
                    flat (the default: one device per tile) or composite (card.tile)
  --json            machine-readable output
  --svg FILE        plan: also write an SVG picture of the node and the plan to FILE
  --time            plan, offline only: plan the request repeatedly and report the planner's
                    median time (topology loading excluded)
  --help            this text
)";

const std::set<std::string> kCommonValues = {"socket", "timeout"};
const std::set<std::string> kPlanValues = {"ntasks",        "cpus",          "gpus",
                                           "cpus-per-task", "gpus-per-task", "tasks-per-gpu",
                                           "order",         "smt",           "ze-hierarchy"};

int run(std::vector<std::string> argv) {
  // --socket/--timeout may come before the command, as "--socket PATH" or "--socket=PATH".
  std::vector<std::string> global;
  auto is_global = [](const std::string& arg) {
    return arg.rfind("--socket=", 0) == 0 || arg.rfind("--timeout=", 0) == 0;
  };
  while (!argv.empty()) {
    if (is_global(argv[0])) {
      global.push_back(argv[0]);
      argv.erase(argv.begin());
    } else if (argv.size() >= 2 && (argv[0] == "--socket" || argv[0] == "--timeout")) {
      global.insert(global.end(), argv.begin(), argv.begin() + 2);
      argv.erase(argv.begin(), argv.begin() + 2);
    } else {
      break;
    }
  }
  if (argv.empty()) return fail(std::string("no command given\n") + kUsage);
  const std::string command = argv[0];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  if (command == "--version") {
    std::cout << "gpubindctl " << GPUBIND_VERSION << "\n";
    return kExitOk;
  }
  std::vector<std::string> rest(global);
  rest.insert(rest.end(), argv.begin() + 1, argv.end());
  std::set<std::string> values = kCommonValues;
  std::set<std::string> switches = {"json"};
  int (*handler)(const Args&) = nullptr;
  if (command == "topology") {
    values.insert({"topology", "policy"});
    handler = run_topology;
  } else if (command == "plan") {
    values.insert({"topology", "policy", "svg"});
    values.insert(kPlanValues.begin(), kPlanValues.end());
    switches.insert({"omp", "time"});
    handler = run_plan;
  } else if (command == "explain") {
    values.insert({"topology", "policy", "rank", "slurm-gpu-bind", "job"});
    values.insert(kPlanValues.begin(), kPlanValues.end());
    switches.insert("omp");
    handler = run_explain;
  } else if (command == "status") {
    handler = run_status;
  } else if (command == "bench") {
    values.insert(kPlanValues.begin(), kPlanValues.end());
    values.insert({"clients", "requests"});
    switches.insert({"omp", "no-cache", "floor"});
    handler = run_bench;
  } else if (command == "check-node") {
    values.insert({"topology", "policy"});
    switches.insert("no-daemon");
    handler = run_check_node;
  } else if (command == "audit") {
    values.insert({"topology", "policy", "job", "record", "admin-comment"});
    switches.insert("tasks");
    handler = run_audit;
  } else if (command == "metrics") {
    values.insert({"textfile", "policy", "topology", "record"});
    switches = {"audit"};
    handler = run_metrics;
  } else {
    return fail("unknown command '" + command + "'\n" + kUsage);
  }
  auto args = Args::parse(rest, values, switches);
  if (!args) return fail(command + ": " + args.error().message);
  if (!args->positional().empty()) {
    return fail(command + ": unexpected argument '" + args->positional()[0] + "'");
  }
  return handler(*args);
}

}  // namespace
}  // namespace gpubind::ctl

int main(int argc, char** argv) {
  return gpubind::ctl::run(std::vector<std::string>(argv + 1, argv + argc));
}
