// gpubindd: the per-node binding daemon. Discovers the node once, holds the site policy and
// answers Plan requests over gRPC on a Unix socket. systemd-native: Type=notify, socket
// activation, watchdog; SIGHUP reloads, SIGTERM drains and exits 0.
#include <grp.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>

#include "compact_server.h"
#include "gpubind/cli_args.h"
#include "gpubind/daemon/binder_service.h"
#include "gpubind/daemon/daemon_state.h"
#include "gpubind/daemon/listener.h"
#include "gpubind/daemon/log.h"
#include "gpubind/daemon/plan_workers.h"
#include "gpubind/daemon/router.h"
#include "gpubind/node.h"
#include "gpubind/parse.h"
#include "gpubind/planner.h"
#include "gpubind/protocol/client.h"
#include "gpubind/protocol/limits.h"
#include "gpubind/sanitizers.h"

namespace gpubind::daemon {
namespace {

constexpr const char* kDefaultSocket = protocol::kDefaultSocket;
constexpr auto kDrainDeadline = std::chrono::seconds(5);
constexpr int kMaxGrpcThreads = 32;

constexpr const char* kUsage = R"(usage: gpubindd [OPTIONS]

Serves gpubind binding plans for this node over gRPC on a Unix socket.

Options:
  --config FILE        site policy (default /etc/gpubind/policy.conf; built-in defaults when
                       that default file does not exist)
  --socket PATH        Unix socket to serve (default /run/gpubind/gpubind.sock); ignored under
                       systemd socket activation
  --socket-mode MODE   octal permissions of the socket (default 0666, 0660 with --socket-group)
  --socket-group NAME  group owning the socket
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
  bool foreground = false;
  std::chrono::milliseconds answer_delay{0};
};

Result<Options> parse_options(const std::vector<std::string>& argv) {
  auto args = cli::Args::parse(
      argv,
      {"config", "socket", "socket-mode", "socket-group", "topology", "log-level", "delay-answers"},
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

// Pings the systemd watchdog while the daemon answers a plan through its own socket: connect,
// classification, a worker and the answer, so a wedged router or stuck workers stop the pings
// and systemd restarts the daemon.
class Watchdog {
 public:
  explicit Watchdog(std::string socket_path) : socket_path_(std::move(socket_path)) {}
  ~Watchdog() { stop(); }

  void start() {
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return;
    const auto period = std::chrono::microseconds(usec / 2);
    // The probe must be answered well inside the period, but never needs more than the
    // plugin's own deadline twice over.
    const int timeout_ms = static_cast<int>(std::clamp<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(period).count() / 2, 50,
        2 * protocol::kDefaultTimeoutMs));
    thread_ = std::thread([this, period, timeout_ms] {
      std::unique_lock<std::mutex> lock(mutex_);
      while (!stopping_) {
        lock.unlock();
        const bool answered = healthy(timeout_ms);
        lock.lock();
        if (answered) notify("WATCHDOG=1");
        wake_.wait_for(lock, period, [this] { return stopping_; });
      }
    });
    log::info("watchdog enabled: a plan through " + socket_path_ + " every " +
              std::to_string(usec / 2000) + " ms");
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  bool healthy(int timeout_ms) const {
    v1::PlanRequest probe;
    probe.set_ntasks(1);
    probe.set_bypass_cache(true);  // the planner too, not only the cache
    protocol::TrustedServer itself;
    itself.check = false;
    auto answer = protocol::exchange(socket_path_, probe.SerializeAsString(), timeout_ms, itself);
    if (!answer) {
      static log::RateLimited said;
      said.write(log::Level::kError,
                 "watchdog probe through " + socket_path_ + " failed: " + answer.error().message);
    }
    return answer.ok();
  }

  const std::string socket_path_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
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

int serve(const Options& options) {
  bound_allocator_memory();
  // Signals are handled by this thread only: block them before any other thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGHUP, SIGTERM, SIGINT})
    sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto state = load_state(options.sources, nullptr);
  if (!state) {
    log::error("cannot start: " + state.error().message);
    notify("STATUS=Cannot start: " + state.error().message);
    return 1;
  }

  const int inherited = sd_listen_fds(1);
  const bool activated = inherited > 0;
  if (inherited > 1)
    log::warning("systemd passed " + std::to_string(inherited) + " sockets; using the first");
  const bool under_systemd = activated || std::getenv("NOTIFY_SOCKET") != nullptr;
  Detacher detacher;
  if (!options.foreground && !under_systemd) {
    if (auto status = detacher.detach(); !status) {
      log::error(status.error().message);
      return 1;
    }
  }

  int listen_fd = -1;
  if (activated) {
    listen_fd = SD_LISTEN_FDS_START;
    if (auto status = check_inherited_listener(listen_fd); !status) {
      log::error("cannot start: " + status.error().message);
      return 1;
    }
  } else {
    auto fd = open_listener(options.socket);
    if (!fd) {
      log::error("cannot start: " + fd.error().message);
      return 1;
    }
    listen_fd = *fd;
  }

  BinderService service(*state, activated);
  PlanWorkers workers({}, give_back_free_memory);
  service.plan_on(&workers);
  if (options.answer_delay.count() > 0) {
    log::warning("--delay-answers: every Plan answer is held " +
                 std::to_string(options.answer_delay.count()) + " ms (fault testing)");
    service.set_answer_delay(options.answer_delay);
  }
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
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    log::error("cannot start the gRPC server");
    return 1;
  }
  Router router(service, workers, {});
  if (auto status = router.start(listen_fd, server.get()); !status) {
    log::error("cannot start: " + status.error().message);
    return 1;
  }
  Watchdog watchdog(activated ? socket_path_of(listen_fd) : options.socket.path);
  watchdog.start();

  const std::string where =
      activated ? "socket-activated fd " + std::to_string(listen_fd) : options.socket.path;
  log::info("serving on " + where + ": " + describe(**state));
  warn_about_policy(**state);
  notify("READY=1\nSTATUS=Serving " + describe(**state) + "\nMAINPID=" + std::to_string(getpid()));
  detacher.ready();

  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      reload(service, options.sources);
      continue;
    }
    log::info(std::string("received ") + strsignal(sig) + ", finishing in-flight calls");
    break;
  }
  notify("STOPPING=1");
  watchdog.stop();
  // Workers first: a finished plan wakes the router, whose descriptors must still be open.
  workers.stop();
  router.stop();
  // Finish the calls in flight, then close: idle client connections need not be waited for.
  const auto drain_until = std::chrono::steady_clock::now() + kDrainDeadline;
  while (service.in_flight() > 0 && std::chrono::steady_clock::now() < drain_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (service.in_flight() > 0) {
    log::warning(std::to_string(service.in_flight()) + " calls still running after " +
                 std::to_string(kDrainDeadline.count()) + " s; cancelling them");
  }
  server->Shutdown(std::chrono::system_clock::now());
  server->Wait();
  if (!activated) {
    close(listen_fd);
    unlink(options.socket.path.c_str());
  }
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
