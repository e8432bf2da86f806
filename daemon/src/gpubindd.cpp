// gpubindd: the per-node binding daemon. Discovers the node once, holds the site policy and
// answers Plan requests on a Unix socket, over the compact protocol (the launch path) and gRPC.
// systemd-native: Type=notify, socket activation, watchdog; SIGHUP reloads, SIGTERM drains and
// exits 0.
#include <grp.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>

#include "gpubind/cli_args.h"
#include "gpubind/daemon/binder_service.h"
#include "gpubind/daemon/daemon_state.h"
#include "gpubind/daemon/listener.h"
#include "gpubind/daemon/log.h"
#include "gpubind/daemon/plan_workers.h"
#include "gpubind/daemon/router.h"
#include "gpubind/node.h"
#include "gpubind/parse.h"
#include "gpubind/protocol/fallback_reports.h"
#include "gpubind/protocol/limits.h"
#include "gpubind/sanitizers.h"
#include "watchdog.h"

namespace gpubind::daemon {
namespace {

constexpr const char* kDefaultSocket = protocol::kDefaultSocket;
constexpr auto kDrainDeadline = std::chrono::seconds(5);
constexpr int kMaxGrpcThreads = 32;

constexpr const char* kUsage = R"(usage: gpubindd [OPTIONS]

Serves gpubind binding plans for this node on a Unix socket, which speaks two protocols: the
compact protocol (the SPANK plugin and gpubind-run at launch) and gRPC (gpubind.v1.Binder:
gpubindctl and other clients), told apart by each connection's first bytes.

Options:
  --config FILE        site policy (default /etc/gpubind/policy.conf; built-in defaults when
                       that default file does not exist)
  --socket PATH        Unix socket to serve (default /run/gpubind/gpubind.sock); ignored under
                       systemd socket activation
  --socket-mode MODE   octal permissions of the socket (default 0666, 0660 with --socket-group)
  --socket-group NAME  group owning the socket
  --grpc-group NAME    members of this group may use gRPC (gpubindctl) besides root and the
                       daemon's own user; anyone else is served the compact protocol only
                       (default: no group)
  --topology FILE.xml  node topology from an hwloc XML dump instead of live discovery ("live")
  --foreground         stay in the foreground (implied under systemd)
  --log-level LEVEL    error, warning, info (default) or debug
  --delay-answers MS   hold every Plan answer MS milliseconds (fault testing only)
  --version, --help
Signals: SIGHUP reloads policy and topology (a bad policy is refused, the old one keeps serving);
SIGTERM/SIGINT finish in-flight calls and exit 0.
)";

struct Options {
  NodeSources sources;
  SocketOptions socket;
  Router::GrpcAccess grpc_access;
  bool foreground = false;
  std::chrono::milliseconds answer_delay{0};
};

Result<Options> parse_options(const std::vector<std::string>& argv) {
  auto args = cli::Args::parse(argv,
                               {"config", "socket", "socket-mode", "socket-group", "grpc-group",
                                "topology", "log-level", "delay-answers"},
                               {"foreground", "help", "version"});
  if (!args) return args.error();
  if (!args->positional().empty())
    return make_error("unexpected argument '" + args->positional()[0] + "'");
  Options options;
  options.sources.policy_path = policy_to_load(args->get("config"));
  if (auto topology = args->get("topology")) options.sources.topology_path = *topology;
  options.socket.path = args->get("socket").value_or(kDefaultSocket);
  if (auto group = args->get("socket-group")) {
    const struct group* gr = getgrnam(group->c_str());
    if (!gr) return make_error("--socket-group: no group named '" + *group + "'");
    options.socket.group = gr->gr_gid;
    options.socket.mode = 0660;
  }
  if (auto group = args->get("grpc-group")) {
    const struct group* gr = getgrnam(group->c_str());
    if (!gr) return make_error("--grpc-group: no group named '" + *group + "'");
    options.grpc_access.group = gr->gr_gid;
  }
  if (auto mode = args->get("socket-mode")) {
    const auto value = parse_whole_number(*mode, 0, 0777, 8);
    if (!value) {
      return make_error("--socket-mode: expected an octal mode such as 0666, got '" + *mode + "'");
    }
    options.socket.mode = static_cast<mode_t>(*value);
  }
  if (auto level = args->get("log-level")) {
    log::Level parsed;
    if (!log::parse_level(*level, parsed)) {
      return make_error("--log-level: expected error, warning, info or debug, got '" + *level +
                        "'");
    }
    log::set_level(parsed);
  }
  options.foreground = args->has("foreground");
  auto delay = args->get_int("delay-answers", 0, 0, 600000);
  if (!delay) return delay.error();
  options.answer_delay = std::chrono::milliseconds(*delay);
  return options;
}

std::string describe(const DaemonState& state) {
  const Topology& t = state.node.topology;
  return "policy " + state.policy_source + " (generation " +
         std::to_string(state.policy_generation) + "), topology " + t.source + ": " +
         std::to_string(t.cores.size()) + " cores, " + std::to_string(t.gpus.size()) + " GPUs, " +
         std::to_string(t.nics.size()) + " NICs";
}

void notify(const std::string& message) {
  sd_notify(0, message.c_str());
}

// Detaches from the terminal once the server is up; the parent exits 0 only then.
class Detacher {
 public:
  // Forks; returns in the child. The parent waits for ready() or the child's death.
  Status detach() {
    int fds[2];
    if (pipe(fds) != 0) return make_error(std::string("pipe: ") + std::strerror(errno));
    const pid_t pid = fork();
    if (pid < 0) return make_error(std::string("fork: ") + std::strerror(errno));
    if (pid > 0) {
      close(fds[1]);
      char byte = 0;
      const bool ready = read(fds[0], &byte, 1) == 1;
      _exit(ready ? 0 : 1);
    }
    close(fds[0]);
    write_fd_ = fds[1];
    setsid();
    return Ok{};
  }
  void ready() {
    if (write_fd_ < 0) return;
    const char byte = 1;
    if (write(write_fd_, &byte, 1) != 1) log::warning("could not tell the parent we are ready");
    close(write_fd_);
    write_fd_ = -1;
  }

 private:
  int write_fd_ = -1;
};

void warn_about_policy(const DaemonState& state) {
  for (const std::string& message : variables_needing_env_allow(state.node.policy))
    log::warning(message);
}

void reload(BinderService& service, const NodeSources& sources) {
  notify("RELOADING=1");
  const StatePtr current = service.state();
  auto fresh = load_state(sources, current.get());
  if (fresh) {
    service.replace_state(*fresh);
    log::info("reloaded: " + describe(**fresh));
    warn_about_policy(**fresh);
    notify("READY=1\nSTATUS=Serving " + describe(**fresh));
    return;
  }
  log::error("reload refused, still serving generation " +
             std::to_string(current->policy_generation) + ": " + fresh.error().message);
  service.set_reload_error(fresh.error().message);
  notify("READY=1\nSTATUS=Serving " + describe(*current) +
         "; last reload refused: " + fresh.error().message);
}

// Plans of thousands of tasks allocate and free megabytes in small blocks. With glibc's defaults
// (an arena per thread, an mmap threshold raised after each large free) a few distinct 4096-task
// requests would hold the resident size far above what is served; giving every freed megabyte
// back at once instead makes the next large plan fault it all in again, which cost more than
// planning it. So: one arena that keeps up to 16 MiB free between plans, all of it handed back
// once the planners idle (give_back_free_memory).
void bound_allocator_memory() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, 16 << 20);  // fixed: glibc would raise it after each large free
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
}

void give_back_free_memory() {
  // Under AddressSanitizer its own allocator holds the heap: glibc's malloc_trim would set up
  // arenas no thread is attached to, and glibc aborts when the workers exit.
  if constexpr (!kAddressSanitizer) malloc_trim(0);
}

// The daemon cannot serve: said in the log and to systemd; the exit status.
int cannot_start(const Error& why) {
  log::error("cannot start: " + why.message);
  notify("STATUS=Cannot start: " + why.message);
  return 1;
}

// Signals are handled by serve()'s thread only: blocked before any other thread starts.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGHUP, SIGTERM, SIGINT})
    sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

// Whether systemd handed over the listening socket (socket activation).
bool socket_activated() {
  const int inherited = sd_listen_fds(1);
  if (inherited > 1)
    log::warning("systemd passed " + std::to_string(inherited) + " sockets; using the first");
  return inherited > 0;
}

// The socket served: systemd's, or gpubindd's own at --socket.
struct ServedSocket {
  int fd = -1;
  bool activated = false;
  std::string path;  // where it is bound (the watchdog's probes go there)

  std::string where() const {
    return activated ? "socket-activated fd " + std::to_string(fd) : path;
  }
};

Result<ServedSocket> open_or_adopt_socket(const SocketOptions& options, bool activated) {
  if (activated) {
    const int fd = SD_LISTEN_FDS_START;
    if (auto status = check_inherited_listener(fd); !status) return status.error();
    return ServedSocket{fd, true, socket_path_of(fd)};
  }
  auto fd = open_listener(options);
  if (!fd) return fd.error();
  return ServedSocket{*fd, false, options.path};
}

// An adopted socket is systemd's to close; gpubindd's own goes, file and all.
void close_socket(const ServedSocket& socket) {
  if (socket.activated) return;
  close(socket.fd);
  unlink(socket.path.c_str());
}

std::unique_ptr<grpc::Server> build_grpc_server(BinderService& service) {
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  // Oversized requests are refused by the handler with INVALID_ARGUMENT up to this size, and by
  // gRPC (RESOURCE_EXHAUSTED) beyond it.
  builder.SetMaxReceiveMessageSize(1 << 20);
  // A bounded thread count, whatever the node's core count, so the unit's TasksMax always holds
  // the daemon. The launch path does not use gRPC (compact protocol, own workers).
  grpc::ResourceQuota quota("gpubindd");
  quota.SetMaxThreads(kMaxGrpcThreads);
  builder.SetResourceQuota(quota);
  // Only root, the daemon's own user and --grpc-group members reach gRPC (the router closes
  // everyone else's connection); these bound what even they can make gRPC 1.51 hold: streams
  // open at once per connection (the server advertised no limit), the header block of a call,
  // and pings without data (gRPC's own defaults, stated so that no default change loosens them).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 16);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 16 << 10);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 300000);
  return builder.BuildAndStart();
}

// Everything that serves the socket: the service with its cache, the planning workers, the gRPC
// server, the router and the watchdog, started in that order and stopped in reverse.
class Serving {
 public:
  Serving(StatePtr state, const ServedSocket& socket, const Options& options)
      : service_(std::move(state), socket.activated),
        workers_({}, give_back_free_memory),
        router_(service_, workers_, {}, options.grpc_access),
        watchdog_(socket.path),
        listen_fd_(socket.fd) {
    service_.plan_on(&workers_);
    // Beside the socket, where the launch side looks (its path: the plugin's socket= argument).
    if (socket.path.rfind('/', 0) == 0)
      service_.set_fallback_spool(protocol::fallback_spool_of(socket.path));
    if (const auto answer_delay = options.answer_delay; answer_delay.count() > 0) {
      log::warning("--delay-answers: every Plan answer is held " +
                   std::to_string(answer_delay.count()) + " ms (fault testing)");
      service_.set_answer_delay(answer_delay);
    }
  }

  Status start() {
    server_ = build_grpc_server(service_);
    if (!server_) return make_error("the gRPC server did not start");
    if (auto status = router_.start(listen_fd_, server_.get()); !status) return status;
    watchdog_.start();
    return Ok{};
  }

  BinderService& service() { return service_; }

  // Finishes the calls in flight (for a few seconds at most), then stops everything.
  void stop() {
    notify("STOPPING=1");
    watchdog_.stop();
    // Workers first: a finished plan wakes the router, whose descriptors must still be open.
    workers_.stop();
    router_.stop();
    // Idle client connections need not be waited for.
    const auto drain_until = std::chrono::steady_clock::now() + kDrainDeadline;
    while (service_.in_flight() > 0 && std::chrono::steady_clock::now() < drain_until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (service_.in_flight() > 0) {
      log::warning(std::to_string(service_.in_flight()) + " calls still running after " +
                   std::to_string(kDrainDeadline.count()) + " s; cancelling them");
    }
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }

 private:
  BinderService service_;
  PlanWorkers workers_;
  Router router_;
  Watchdog watchdog_;
  const int listen_fd_;
  std::unique_ptr<grpc::Server> server_;
};

void announce(const DaemonState& state, const ServedSocket& socket) {
  log::info("serving on " + socket.where() + ": " + describe(state));
  warn_about_policy(state);
  notify("READY=1\nSTATUS=Serving " + describe(state) + "\nMAINPID=" + std::to_string(getpid()));
}

std::string grpc_served_to(const Router::GrpcAccess& access) {
  std::string who = "gRPC is served to root";
  if (geteuid() != 0) who += " and uid " + std::to_string(geteuid());
  if (access.group) {
    const struct group* gr = getgrgid(*access.group);
    who +=
        " and members of group " + (gr ? std::string(gr->gr_name) : std::to_string(*access.group));
  }
  return who + " only; other users are served the compact protocol";
}

// Serves until SIGTERM or SIGINT; SIGHUP reloads.
void wait_for_stop(const sigset_t& signals, BinderService& service, const NodeSources& sources) {
  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) {
      log::info(std::string("received ") + strsignal(sig) + ", finishing in-flight calls");
      return;
    }
    reload(service, sources);
  }
}

int serve(const Options& options) {
  bound_allocator_memory();
  const sigset_t signals = block_signals();
  auto state = load_state(options.sources, nullptr);
  if (!state) return cannot_start(state.error());
  const bool activated = socket_activated();
  Detacher detacher;
  const bool under_systemd = activated || std::getenv("NOTIFY_SOCKET") != nullptr;
  if (!options.foreground && !under_systemd) {
    if (auto status = detacher.detach(); !status) return cannot_start(status.error());
  }
  auto socket = open_or_adopt_socket(options.socket, activated);
  if (!socket) return cannot_start(socket.error());
  Serving serving(*state, *socket, options);
  if (auto status = serving.start(); !status) return cannot_start(status.error());
  announce(**state, *socket);
  log::info(grpc_served_to(options.grpc_access));
  detacher.ready();
  wait_for_stop(signals, serving.service(), options.sources);
  serving.stop();
  close_socket(*socket);
  log::info("stopped");
  return 0;
}

}  // namespace
}  // namespace gpubind::daemon

int main(int argc, char** argv) {
  using namespace gpubind::daemon;
  const std::vector<std::string> argv_list(argv + 1, argv + argc);
  for (const std::string& arg : argv_list) {
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--version") {
      std::cout << "gpubindd " << GPUBIND_VERSION << "\n";
      return 0;
    }
  }
  auto options = parse_options(argv_list);
  if (!options) {
    std::fprintf(stderr, "gpubindd: %s\n%s", options.error().message.c_str(), kUsage);
    return 2;
  }
  return serve(*options);
}
