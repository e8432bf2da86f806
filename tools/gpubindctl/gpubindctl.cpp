// gpubindctl: inspect a node's topology, the binding plan gpubind makes for a job step, and the
// daemon serving them. Offline with --topology FILE.xml, else it asks gpubindd.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "gpubind/api/binder_client.h"
#include "gpubind/bench/load.h"
#include "gpubind/cli_args.h"
#include "gpubind/node.h"
#include "gpubind/output/json.h"
#include "gpubind/output/plan_format.h"
#include "gpubind/output/plan_svg.h"
#include "gpubind/output/plan_timing.h"
#include "gpubind/planner.h"
#include "gpubind/protocol/limits.h"

namespace gpubind::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;

constexpr const char* kUsage = R"(usage: gpubindctl [--socket PATH] [--timeout MS] COMMAND [OPTIONS]

Commands:
  topology [--topology FILE.xml|live] [--policy FILE] [--json]
      GPUs, NICs and their CPU locality as gpubind sees them.
  plan [--topology FILE.xml|live] [--policy FILE] --ntasks N [--cpus LIST] [--gpus LIST]
       [--cpus-per-task N] [--gpus-per-task N] [--tasks-per-gpu N] [--order gpu|cpu]
       [--smt N] [--omp] [--ze-hierarchy flat|composite] [--json] [--svg FILE] [--time]
      The per-task binding plan for a job step on that node; --svg FILE also draws it.
  status [--json]
      What the daemon serves: version, uptime, policy, topology, requests, latency.
  bench [--clients N] [--requests M] [--no-cache] [--floor] [plan options] [--json]
      Load the daemon with M Plan calls in all (default 10000) from N concurrent clients
      (default 1) and report p50/p99/p99.9 latency and plans/s; --floor also measures the
      same plans over the plugin's compact protocol, an empty gRPC call and a raw Unix-socket
      echo of the same bytes.

With --topology, topology and plan work offline on that hwloc XML ("live" discovers this
machine); without it they ask gpubindd.

Options:
  --socket PATH     gpubindd's socket (default $GPUBIND_SOCKET, else /run/gpubind/gpubind.sock)
  --timeout MS      give up on the daemon after MS milliseconds (default 5000)
  --policy FILE     site policy for offline use (default: built-in defaults)
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

int fail(const std::string& message, int code = kExitBadInput) {
  std::fprintf(stderr, "gpubindctl: %s\n", message.c_str());
  return code;
}

// Whether gpubindd on `socket` closes a gRPC connection from this user before answering it: it
// serves gRPC to root, its own user and its --grpc-group only (gpubindd(8)).
bool grpc_refused_to_me(const std::string& socket_path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  // HTTP/2's preface and an empty SETTINGS frame: a server that serves it answers with its own.
  static constexpr char kHello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
  bool refused = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      send(fd, kHello, sizeof kHello - 1, MSG_NOSIGNAL) ==
          static_cast<ssize_t>(sizeof kHello - 1)) {
    pollfd reply{fd, POLLIN, 0};
    char byte;
    refused = poll(&reply, 1, 1000) == 1 && recv(fd, &byte, 1, 0) <= 0;
  }
  close(fd);
  return refused;
}

// A failed call to the daemon, with what to do when the daemon does not serve this user gRPC.
int fail_from_daemon(const std::string& socket_path, const Error& error, int code = kExitFailed) {
  if (error.message.find("daemon unavailable") == std::string::npos ||
      !grpc_refused_to_me(socket_path)) {
    return fail(error.message, code);
  }
  return fail(
      error.message + "\ngpubindd serves gRPC only to root, its own user and members of " +
          "its --grpc-group (gpubindd(8)); ask the node's administrator, or see this node " +
          "offline with --topology live",
      kExitFailed);
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
  auto smt = args.get_int("smt", -1, 0, protocol::kMaxSmt);
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
  if (auto hierarchy = args.get("ze-hierarchy")) {
    if (*hierarchy == "composite")
      request.ze_hierarchy = ZeHierarchy::kComposite;
    else if (*hierarchy != "flat")
      return make_error("--ze-hierarchy: expected 'flat' or 'composite', got '" + *hierarchy + "'");
  }
  return request;
}

bool offline(const Args& args) {
  return args.has("topology");
}

Result<Node> load_offline(const Args& args) {
  NodeSources sources;
  if (auto policy = args.get("policy")) sources.policy_path = *policy;
  sources.topology_path = args.get("topology");
  if (sources.topology_path->empty()) return make_error("--topology: empty path");
  return load_node(sources);
}

struct DaemonAccess {
  std::string socket;
  std::chrono::milliseconds timeout;
};

Result<DaemonAccess> daemon_access(const Args& args) {
  auto timeout = args.get_int("timeout", 5000, 1, 3600 * 1000);
  if (!timeout) return timeout.error();
  return DaemonAccess{args.get("socket").value_or(client::default_socket()),
                      std::chrono::milliseconds(*timeout)};
}

int run_topology(const Args& args) {
  Topology topology;
  if (offline(args)) {
    auto node = load_offline(args);
    if (!node) return fail(node.error().message);
    topology = std::move(node->topology);
  } else {
    if (args.has("policy")) return fail("--policy applies offline only (with --topology)");
    auto access = daemon_access(args);
    if (!access) return fail(access.error().message);
    auto fetched = client::BinderClient(access->socket).topology(access->timeout);
    if (!fetched) return fail_from_daemon(access->socket, fetched.error());
    topology = std::move(fetched->topology);
  }
  std::cout << (args.has("json") ? topology_to_json(topology) : topology_to_text(topology));
  return kExitOk;
}

// What a plan is drawn on: the node, its reserved CPUs and the plan itself.
struct PlannedNode {
  Topology topology;
  CpuSet reserved;
  Plan plan;
  std::optional<PlanTiming> timing;  // --time (offline only)
};

Result<PlannedNode> plan_offline(const Args& args, const PlanRequest& request) {
  auto node = load_offline(args);
  if (!node) return node.error();
  auto planned = make_plan(node->topology, node->policy, request);
  if (!planned) return Error{"cannot plan: " + planned.error().message, true};
  const CpuSet reserved = reserved_cpus(node->topology, node->policy);
  std::optional<PlanTiming> timing;
  if (args.has("time")) timing = time_make_plan(node->topology, node->policy, request);
  return PlannedNode{std::move(node->topology), reserved, std::move(*planned), timing};
}

// The topology is fetched only for --svg, and again if a reload came between the two calls.
Result<PlannedNode> plan_from_daemon(const Args& args, const PlanRequest& request) {
  auto access = daemon_access(args);
  if (!access) return access.error();
  client::BinderClient client(access->socket);
  for (int attempt = 0;; ++attempt) {
    auto reply = client.plan(request, {}, access->timeout);
    if (!reply) return reply.error();
    PlannedNode planned{{}, {}, std::move(reply->plan), std::nullopt};
    if (!args.has("svg")) return planned;
    auto node = client.topology(access->timeout);
    if (!node) return node.error();
    if (node->topology_generation == reply->topology_generation || attempt == 1) {
      planned.topology = std::move(node->topology);
      planned.reserved = node->reserved;
      return planned;
    }
  }
}

std::string svg_title(const PlannedNode& node) {
  const std::string host = node.topology.hostname.empty() ? "node" : node.topology.hostname;
  const size_t tasks = node.plan.tasks.size();
  return "gpubind plan: " + std::to_string(tasks) + (tasks == 1 ? " task on " : " tasks on ") +
         host + " (" + node.topology.source + ")";
}

// Written beside the target and renamed, so a failed write never leaves half a picture.
Status write_file_atomically(const std::string& path, const std::string& content) {
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  if (!out) return make_error("--svg: cannot write '" + path + "': " + std::strerror(errno));
  out << content;
  out.close();
  if (!out || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return make_error("--svg: cannot write '" + path + "': " + reason);
  }
  return Ok{};
}

// The plan's JSON object with "planner_us" added as its last key.
std::string json_with_timing(const Plan& plan, const PlanTiming& timing) {
  std::string json = plan_to_json(plan);
  const size_t close = json.rfind('}');
  char key[64];
  std::snprintf(key, sizeof key, ",\"planner_us\":%.1f", timing.median_us);
  return json.insert(close, key);
}

std::string plan_output(const Args& args, const PlannedNode& planned) {
  const bool json = args.has("json");
  if (!planned.timing) return json ? plan_to_json(planned.plan) : plan_to_table(planned.plan);
  if (json) return json_with_timing(planned.plan, *planned.timing);
  char line[96];
  std::snprintf(line, sizeof line, "planner: %.1f us median of %d runs\n",
                planned.timing->median_us, planned.timing->runs);
  return plan_to_table(planned.plan) + line;
}

int run_plan(const Args& args) {
  auto request = request_from(args);
  if (!request) return fail(request.error().message);
  if (args.has("svg") && args.get("svg")->empty()) return fail("--svg: empty path");
  if (!offline(args) && args.has("policy"))
    return fail("--policy applies offline only (with --topology)");
  if (!offline(args) && args.has("time"))
    return fail("--time applies offline only (with --topology)");
  auto planned = offline(args) ? plan_offline(args, *request) : plan_from_daemon(args, *request);
  if (!planned) {
    if (offline(args)) return fail(planned.error().message, kExitBadInput);
    // A GPU or CPU the daemon's node lacks is, here, one the command line named.
    const bool bad_input = planned.error().invalid_input || planned.error().node_mismatch;
    return fail_from_daemon(args.get("socket").value_or(client::default_socket()), planned.error(),
                            bad_input ? kExitBadInput : kExitFailed);
  }
  if (auto svg = args.get("svg")) {
    const std::string drawing =
        plan_to_svg(planned->topology, planned->reserved, planned->plan, svg_title(*planned));
    if (auto written = write_file_atomically(*svg, drawing); !written)
      return fail(written.error().message, kExitFailed);
  }
  std::cout << plan_output(args, *planned);
  return kExitOk;
}

int run_status(const Args& args) {
  auto access = daemon_access(args);
  if (!access) return fail(access.error().message);
  auto status = client::BinderClient(access->socket).status(access->timeout);
  if (!status) return fail_from_daemon(access->socket, status.error());
  const client::DaemonStatus& s = *status;
  if (args.has("json")) {
    const output::Json json{{"socket", access->socket},
                            {"version", s.version},
                            {"uptime_s", s.uptime_s},
                            {"policy", s.policy_source},
                            {"policy_generation", s.policy_generation},
                            {"topology", s.topology_source},
                            {"topology_generation", s.topology_generation},
                            {"requests", s.requests},
                            {"errors", s.errors},
                            {"cache_hits", s.cache_hits},
                            {"p50_us", s.p50_us},
                            {"p99_us", s.p99_us},
                            {"rss_bytes", s.rss_bytes},
                            {"socket_activated", s.socket_activated},
                            {"last_reload_error", s.last_reload_error}};
    std::cout << output::to_text(json) << "\n";
    return kExitOk;
  }
  std::printf("gpubindd %s on %s%s, up %.0f s\n", s.version.c_str(), access->socket.c_str(),
              s.socket_activated ? " (socket-activated)" : "", s.uptime_s);
  std::printf("policy    %s (generation %llu)\n", s.policy_source.c_str(),
              static_cast<unsigned long long>(s.policy_generation));
  std::printf("topology  %s (generation %llu)\n", s.topology_source.c_str(),
              static_cast<unsigned long long>(s.topology_generation));
  std::printf("requests  %llu answered, %llu refused, %llu from cache\n",
              static_cast<unsigned long long>(s.requests),
              static_cast<unsigned long long>(s.errors),
              static_cast<unsigned long long>(s.cache_hits));
  std::printf("latency   p50 %.1f us, p99 %.1f us (in the daemon, last 4096 calls)\n", s.p50_us,
              s.p99_us);
  std::printf("memory    %.1f MB resident\n", s.rss_bytes / 1e6);
  if (!s.last_reload_error.empty()) {
    std::printf("last reload refused: %s\n", s.last_reload_error.c_str());
  }
  return kExitOk;
}

output::Json bench_json(const bench::LoadResult& r) {
  return output::Json{{"p50_us", r.p50_us},
                      {"p99_us", r.p99_us},
                      {"p999_us", r.p999_us},
                      {"plans_per_s", r.plans_per_s},
                      {"errors", r.errors}};
}

int run_bench(const Args& args) {
  auto clients = args.get_int("clients", 1, 1, 1024);
  auto requests = args.get_int("requests", 10000, 1, 100000000);
  if (!clients) return fail(clients.error().message);
  if (!requests) return fail(requests.error().message);
  PlanRequest request;
  request.ntasks = 8;
  if (args.has("ntasks")) {
    auto parsed = request_from(args);
    if (!parsed) return fail(parsed.error().message);
    request = std::move(*parsed);
  }
  auto access = daemon_access(args);
  if (!access) return fail(access.error().message);
  // One call first: the daemon must answer, and the floor echoes an answer of the same size.
  auto probe = client::BinderClient(access->socket).plan(request, {}, access->timeout);
  if (!probe) return fail_from_daemon(access->socket, probe.error());
  const bool bypass = args.has("no-cache");
  client::BinderClient status_client(access->socket);
  auto before = status_client.status(access->timeout);
  const bench::LoadResult rpc =
      bench::plan_over_grpc(access->socket, request, *clients, *requests, bypass);
  auto after = status_client.status(access->timeout);
  // The daemon's own CPU per plan: what it could serve with the load generator elsewhere.
  const double daemon_cpu_s = before && after ? after->cpu_s - before->cpu_s : 0;
  const double plans_per_daemon_cpu_s =
      daemon_cpu_s > 0 ? static_cast<double>(rpc.calls - rpc.errors) / daemon_cpu_s : 0;
  std::optional<bench::LoadResult> compact, empty, floor;
  if (args.has("floor")) {
    // The compact protocol has no cache bypass: with --no-cache it would not compare.
    if (!bypass) compact = bench::plan_over_compact(access->socket, request, *clients, *requests);
    empty = bench::empty_grpc_calls(access->socket, *clients, *requests);
    auto measured = bench::raw_socket_floor(request, probe->response_bytes, *clients, *requests);
    if (!measured) return fail(measured.error().message, kExitFailed);
    floor = *measured;
  }
  if (args.has("json")) {
    output::Json json = bench_json(rpc);
    json["clients"] = *clients;
    json["requests"] = *requests;
    json["ntasks"] = request.ntasks;
    json["cache"] = !bypass;
    json["response_bytes"] = probe->response_bytes;
    json["daemon_cpu_s"] = daemon_cpu_s;
    json["plans_per_daemon_cpu_s"] = plans_per_daemon_cpu_s;
    json["daemon_rss_before_bytes"] = before ? before->rss_bytes : 0;
    json["daemon_rss_bytes"] = after ? after->rss_bytes : 0;
    if (compact) json["compact"] = bench_json(*compact);
    if (empty) json["empty_rpc"] = bench_json(*empty);
    if (floor) json["floor"] = bench_json(*floor);
    std::cout << output::to_text(json) << "\n";
  } else {
    std::printf("Plan RPC, %d clients, %d requests, %d tasks, %s, %zu-byte answers\n", *clients,
                *requests, request.ntasks, bypass ? "planned afresh" : "cache allowed",
                probe->response_bytes);
    std::printf("  p50 %.1f us  p99 %.1f us  p99.9 %.1f us  %.0f plans/s  %llu errors\n",
                rpc.p50_us, rpc.p99_us, rpc.p999_us, rpc.plans_per_s,
                static_cast<unsigned long long>(rpc.errors));
    std::printf(
        "  daemon: %.2f CPU s, %.0f plans per daemon CPU second, %.1f MB resident before,"
        " %.1f MB after\n",
        daemon_cpu_s, plans_per_daemon_cpu_s, before ? before->rss_bytes / 1e6 : 0.0,
        after ? after->rss_bytes / 1e6 : 0.0);
    if (compact) {
      std::printf("Plan over the compact protocol (the plugin's path, a connection per call)\n");
      std::printf("  p50 %.1f us  p99 %.1f us  p99.9 %.1f us  %.0f plans/s  %llu errors\n",
                  compact->p50_us, compact->p99_us, compact->p999_us, compact->plans_per_s,
                  static_cast<unsigned long long>(compact->errors));
    }
    if (empty) {
      std::printf("empty gRPC call (GetStatus), same load\n");
      std::printf("  p50 %.1f us  p99 %.1f us  p99.9 %.1f us  %.0f calls/s\n", empty->p50_us,
                  empty->p99_us, empty->p999_us, empty->plans_per_s);
    }
    if (floor) {
      std::printf("raw Unix-socket echo of the same bytes (floor)\n");
      std::printf("  p50 %.1f us  p99 %.1f us  p99.9 %.1f us  %.0f calls/s\n", floor->p50_us,
                  floor->p99_us, floor->p999_us, floor->plans_per_s);
    }
  }
  if (rpc.errors > 0)
    return fail("bench: " + std::to_string(rpc.errors) + " calls failed, first: " + rpc.first_error,
                kExitFailed);
  if (compact && compact->errors > 0) {
    return fail("bench: " + std::to_string(compact->errors) +
                    " compact exchanges failed, first: " + compact->first_error,
                kExitFailed);
  }
  return kExitOk;
}

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
  } else if (command == "status") {
    handler = run_status;
  } else if (command == "bench") {
    values.insert(kPlanValues.begin(), kPlanValues.end());
    values.insert({"clients", "requests"});
    switches.insert({"omp", "no-cache", "floor"});
    handler = run_bench;
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
}  // namespace gpubind::cli

int main(int argc, char** argv) {
  return gpubind::cli::run(std::vector<std::string>(argv + 1, argv + argc));
}
