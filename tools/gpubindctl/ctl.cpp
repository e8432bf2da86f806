#include "ctl.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gpubind/api/binder_client.h"
#include "gpubind/protocol/limits.h"

namespace gpubind::ctl {
namespace {

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

Result<CpuSet> parse_cpus(const std::string& text) {
  if (text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0) return CpuSet::parse_mask(text);
  return CpuSet::parse_list(text);
}

}  // namespace

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "gpubindctl: %s\n", message.c_str());
  return code;
}

int fail_from_daemon(const std::string& socket_path, const Error& error, int code) {
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

Result<DaemonAccess> daemon_access(const Args& args) {
  auto timeout = args.get_int("timeout", 5000, 1, 3600 * 1000);
  if (!timeout) return timeout.error();
  return DaemonAccess{args.get("socket").value_or(api::default_socket()),
                      std::chrono::milliseconds(*timeout)};
}

}  // namespace gpubind::ctl
