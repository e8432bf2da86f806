// gpubind_attack: denial-of-service attacks on gpubindd's socket, measured by a legitimate client.
//
// A forked child attacks the daemon (as another user when --attacker-uid is given and this runs
// as root), while the parent sends, every 200 ms, the request a job step's launch sends (8 tasks,
// 8 GPUs) with the plugin's default deadline of 1000 ms, timing each answer and sampling the
// daemon's memory, fds and threads from /proc. Every attack is bounded in time and count, and
// talks only to the local Unix socket it is given. The compact requests are framed by the
// project's own client (gpubind/protocol), the gRPC ones by binder.proto's generated stub.
//
// Prints one line:
//   mode=idle n=1000 seconds=8 probes=35 p50_ms=0.41 p99_ms=0.90 max_ms=1.20 misses=0 failed=0
//   rss_mib=12->13(peak 14) cpu_s=0.50 fds_peak=70 threads_peak=9 <what the attacker did> alive=yes
// and exits 0, 1 when a --max-* threshold is exceeded or the daemon died (each named on its own
// line), 2 on a usage or setup error.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gpubind/protocol/client.h"
#include "gpubind/protocol/compact.h"
#include "gpubind/protocol/io.h"
#include "gpubind/protocol/limits.h"
#include "gpubind/protocol/step.h"
#include "gpubind/v1/binder.grpc.pb.h"

namespace {

using gpubind::protocol::Clock;
using namespace std::chrono_literals;
namespace protocol = gpubind::protocol;
namespace compact = gpubind::compact;

constexpr const char* kUsage =
    R"(usage: gpubind_attack --socket PATH --daemon-pid PID --mode MODE [--count N]
         [--seconds S] [--attacker-uid UID] [--attacker-cpus LIST] [--max-p99-ms X]
         [--max-misses Y] [--max-rss-mib Z]

Attacks the gpubindd serving PATH (process PID) for S seconds (default 8) while probing it with
an ordinary 8-task, 8-GPU request every 200 ms (1000 ms deadline, the plugin's default).

modes (N, default in brackets):
  none       no attack: the baseline
  idle       keep N silent connections open, re-opening any the daemon closes [1000]
  fresh      open N new silent connections per second, each closed after 3 s [5]
  slowloris  N connections sending the compact header (length 100), then a byte per 0.5 s [8]
  flood      N threads connecting and closing as fast as they can [16]
  h2idle     N connections sending the HTTP/2 preface and an empty SETTINGS frame, then
             nothing [1100]
  heavy      N threads sending compact requests with the largest CPU list the daemon accepts
             ("0-65535,..."), back to back, each waiting for its answer [4]
  grpcheavy  the same as gRPC Plan calls (bypass_cache) [4]
  cachemem   N distinct 4096-task requests, one at a time, 30 s deadline each; S bounds the
             whole run (default 120) [100]
  nonread-cached  N connections asking for the largest answer the cache keeps (4096 tasks,
             ~4 MB on LUMI-G) and never reading it, re-opened as the daemon closes them [64]
  nonread-big  the same with the largest answer there is, planned afresh (bypass_cache,
             ~16 MB) [12]
  h2streams  HTTP/2 connections opening N streams each (HEADERS, never finished) [40000]
  h2nonread  HTTP/2 connections with a receive window of 0 sending N Plan calls a second, each
             a bypass_cache request of the largest answer, never read [5]
  multiuser  --users U processes, each as its own uid (--attacker-uid, +1, ...), holding N
             connections each that sent a compact header and then nothing [64]
  queuefill  --users U processes, each as its own uid, with N connections each asking back to
             back for a distinct plan of 1024 tasks with eight GPUs each and 128-byte tokens
             (bypass_cache: planned every time, ~4 MB answers) and reading the answers [1]

--attacker-uid UID  the attacking child drops to UID (and its group) first; needs root
--attacker-cpus L   the attacking child runs only on these CPUs ("3" or "2,3"), as Slurm's
                    task/cgroup confines a hostile job to its own allocation
--max-p99-ms X      fail when the probes' 99th percentile exceeds X ms
--max-misses Y      fail when more than Y probes miss their 1000 ms deadline (or fail)
--max-rss-mib Z     fail when the daemon's resident memory peaks above Z MiB
--max-hwm-mib Z     fail when the daemon's peak resident memory since it started (VmHWM)
                    exceeds Z MiB
--probe-timeout-ms T  the probes' deadline (default 1000, the plugin's)
--probe-uid UID     the probes connect as UID (needs root)
--probe-tasks N     the probes ask for an N-task step (default 8)
--probe-uncached    the probes ask for a plan the daemon must make (bypass_cache), as a launch
                    of a shape it has not planned yet
--max-planned-while-waiting K  queuefill: fail when, at the 99th percentile, more than K of the
                    attackers' plans were answered while a probe waited for its own: how far
                    back in the daemon's line the probe stood, whatever the machine's speed
--users U           multiuser: how many users attack (default 65)
--expect-grpc-refused  h2streams, h2nonread: fail unless the daemon closes the attacker's
                    connections without a byte of HTTP/2 (gRPC is not served to that user)
The daemon dying, or (cachemem) a request left unanswered, always fails.
)";

enum class Mode {
  kNone,
  kIdle,
  kFresh,
  kSlowloris,
  kFlood,
  kH2idle,
  kHeavy,
  kGrpcHeavy,
  kCachemem,
  kNonreadCached,
  kNonreadBig,
  kH2Streams,
  kH2Nonread,
  kMultiuser,
  kQueuefill
};

struct ModeInfo {
  const char* name;
  Mode mode;
  long default_count;
  long max_count;
};

constexpr ModeInfo kModes[] = {
    {"none", Mode::kNone, 0, 0},
    {"idle", Mode::kIdle, 1000, 100000},
    {"fresh", Mode::kFresh, 5, 10000},
    {"slowloris", Mode::kSlowloris, 8, 10000},
    {"flood", Mode::kFlood, 16, 256},
    {"h2idle", Mode::kH2idle, 1100, 100000},
    {"heavy", Mode::kHeavy, 4, 256},
    {"grpcheavy", Mode::kGrpcHeavy, 4, 256},
    {"cachemem", Mode::kCachemem, 100, 100000},
    {"nonread-cached", Mode::kNonreadCached, 64, 1000},
    {"nonread-big", Mode::kNonreadBig, 12, 1000},
    {"h2streams", Mode::kH2Streams, 40000, 1000000},
    {"h2nonread", Mode::kH2Nonread, 5, 100},
    {"multiuser", Mode::kMultiuser, 64, 1000},
    {"queuefill", Mode::kQueuefill, 1, 64},
};

struct Options {
  std::string socket;
  pid_t daemon_pid = 0;
  ModeInfo mode{};
  long count = 0;
  double seconds = 0;
  std::optional<uid_t> attacker_uid;
  std::vector<int> attacker_cpus;
  gid_t attacker_gid = 0;
  std::optional<double> max_p99_ms;
  std::optional<long> max_misses;
  std::optional<double> max_rss_mib;
  std::optional<double> max_hwm_mib;
  int probe_timeout_ms = protocol::kDefaultTimeoutMs;
  std::optional<uid_t> probe_uid;
  long users = 65;
  bool expect_grpc_refused = false;
  int probe_tasks = 8;
  bool probe_uncached = false;
  std::optional<long> max_planned_while_waiting;
};

[[noreturn]] void usage_error(const std::string& why) {
  const std::string usage(kUsage);
  std::fprintf(stderr, "gpubind_attack: %s\n%s\n(gpubind_attack --help describes the modes)\n",
               why.c_str(), usage.substr(0, usage.find("\n\n")).c_str());
  std::exit(2);
}

[[noreturn]] void setup_error(const std::string& why) {
  std::fprintf(stderr, "gpubind_attack: %s\n", why.c_str());
  std::exit(2);
}

std::optional<long> parse_long(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return value;
}

std::optional<double> parse_double(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !(value == value)) return std::nullopt;
  return value;
}

Options parse_options(int argc, char** argv) {
  Options options;
  std::optional<long> count;
  std::optional<double> seconds;
  bool have_mode = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg.rfind("--", 0) != 0) usage_error("unexpected argument '" + arg + "'");
    if (arg == "--expect-grpc-refused") {
      options.expect_grpc_refused = true;
      continue;
    }
    if (arg == "--probe-uncached") {
      options.probe_uncached = true;
      continue;
    }
    if (i + 1 >= argc) usage_error(arg + " needs a value");
    const std::string value = argv[++i];
    auto whole = [&](long low, long high) {
      auto number = parse_long(value);
      if (!number || *number < low || *number > high) {
        usage_error(arg + ": expected a whole number from " + std::to_string(low) + " to " +
                    std::to_string(high) + ", got '" + value + "'");
      }
      return *number;
    };
    auto positive = [&]() {
      auto number = parse_double(value);
      if (!number || *number < 0) {
        usage_error(arg + ": expected a number of at least 0, got '" + value + "'");
      }
      return *number;
    };
    if (arg == "--socket") {
      if (value.empty()) usage_error("--socket: empty path");
      options.socket = value;
    } else if (arg == "--daemon-pid") {
      options.daemon_pid = static_cast<pid_t>(whole(1, 1L << 22));
    } else if (arg == "--mode") {
      const auto it = std::find_if(std::begin(kModes), std::end(kModes),
                                   [&](const ModeInfo& m) { return value == m.name; });
      if (it == std::end(kModes)) {
        usage_error("--mode: unknown mode '" + value +
                    "' (none, idle, fresh, slowloris, flood, h2idle, heavy, grpcheavy, cachemem, "
                    "nonread-cached, nonread-big, h2streams, h2nonread, multiuser)");
      }
      options.mode = *it;
      have_mode = true;
    } else if (arg == "--count") {
      count = whole(1, 1000000);
    } else if (arg == "--seconds") {
      seconds = positive();
    } else if (arg == "--attacker-uid") {
      options.attacker_uid = static_cast<uid_t>(whole(0, 0x7fffffff));
    } else if (arg == "--attacker-cpus") {
      const std::string& list = value;
      size_t at = 0;
      while (at <= list.size()) {
        const size_t comma = std::min(list.find(',', at), list.size());
        const std::string item = list.substr(at, comma - at);
        char* end = nullptr;
        const long cpu = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || cpu < 0 || cpu >= CPU_SETSIZE)
          usage_error("--attacker-cpus: expected CPU numbers such as 1 or 2,3, got '" + list + "'");
        options.attacker_cpus.push_back(static_cast<int>(cpu));
        at = comma + 1;
      }
    } else if (arg == "--max-p99-ms") {
      options.max_p99_ms = positive();
    } else if (arg == "--max-misses") {
      options.max_misses = whole(0, 1L << 30);
    } else if (arg == "--max-rss-mib") {
      options.max_rss_mib = positive();
    } else if (arg == "--max-hwm-mib") {
      options.max_hwm_mib = positive();
    } else if (arg == "--probe-timeout-ms") {
      options.probe_timeout_ms = static_cast<int>(whole(1, 60000));
    } else if (arg == "--probe-uid") {
      options.probe_uid = static_cast<uid_t>(whole(0, 0x7fffffff));
    } else if (arg == "--users") {
      options.users = whole(1, 1000);
    } else if (arg == "--max-planned-while-waiting") {
      options.max_planned_while_waiting = whole(0, 1000000);
    } else if (arg == "--probe-tasks") {
      options.probe_tasks = static_cast<int>(whole(1, 4096));

    } else {
      usage_error("unknown option '" + arg + "'");
    }
  }
  if (options.socket.empty()) usage_error("--socket is required");
  if (options.daemon_pid == 0) usage_error("--daemon-pid is required");
  if (!have_mode) usage_error("--mode is required");
  const ModeInfo& mode = options.mode;
  options.count = count.value_or(mode.default_count);
  if (mode.mode == Mode::kNone) options.count = 0;
  if (count && mode.mode != Mode::kNone && *count > mode.max_count) {
    usage_error(std::string("--count for ") + mode.name + " must be from 1 to " +
                std::to_string(mode.max_count));
  }
  options.seconds = seconds.value_or(mode.mode == Mode::kCachemem ? 120.0 : 8.0);
  if (options.seconds < 2 || options.seconds > 3600) {
    usage_error(
        "--seconds must be from 2 to 3600 (probes run from 1 s after the start until "
        "0.5 s before the end)");
  }
  return options;
}

// ---- The daemon as /proc shows it ------------------------------------------------------------

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

long status_field(pid_t pid, const char* name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const size_t len = std::strlen(name);
  while (std::getline(in, line)) {
    if (line.compare(0, len, name) == 0) return std::strtol(line.c_str() + len, nullptr, 10);
  }
  return -1;
}

long rss_kib(pid_t pid) {
  return status_field(pid, "VmRSS:");
}
long hwm_kib(pid_t pid) {
  return status_field(pid, "VmHWM:");
}
long thread_count(pid_t pid) {
  return status_field(pid, "Threads:");
}

long fd_count(pid_t pid) {
  DIR* dir = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (!dir) return -1;
  long count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count;
}

// The fields of /proc/PID/stat after the command name: [0] is the state, [11] utime, [12] stime.
std::vector<std::string> stat_fields(pid_t pid) {
  const std::string text = read_text("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = text.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream in(text.substr(close + 1));
  std::string field;
  while (in >> field)
    fields.push_back(field);
  return fields;
}

double cpu_seconds(pid_t pid) {
  const auto fields = stat_fields(pid);
  if (fields.size() < 13) return -1;
  const double ticks =
      std::strtod(fields[11].c_str(), nullptr) + std::strtod(fields[12].c_str(), nullptr);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Alive: signalable and not a zombie (a daemon that died unreaped still answers kill(pid, 0)).
bool daemon_alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  const auto fields = stat_fields(pid);
  return !fields.empty() && fields[0] != "Z" && fields[0] != "X";
}

// ---- The attacker ------------------------------------------------------------------------------

// What the attacking child tells the parent when it is done (one write, under PIPE_BUF).
struct Report {
  long unanswered = 0;  // cachemem requests left without an answer
  long h2_served = -1;  // h2 modes: connections the daemon sent HTTP/2 bytes on
  long h2_closed = 0;   // h2 modes: connections the daemon closed
  int setup_failed = 0;
  char text[3800] = {};
};

struct AttackStats {
  std::atomic<long> opened{0}, refused{0}, dropped{0};
  std::atomic<long> sent{0}, answered{0}, rejected{0}, failed{0};
  std::mutex mutex;
  std::string first_error;

  void note(const std::string& error) {
    std::lock_guard<std::mutex> lock(mutex);
    if (first_error.empty()) first_error = error;
  }
};

struct Attack {
  std::string socket;
  long count = 0;
  Clock::time_point stop;
  AttackStats stats;
  std::string extra;  // mode-specific words for the result line
  long unanswered = 0;
  long h2_served = -1, h2_closed = 0;
  long users = 0;
  uid_t first_uid = 0;
};

bool running(const Attack& attack) {
  return Clock::now() < attack.stop;
}

// A deadline for one attacking request: `cap`, but never far past the attack's end.
int request_timeout_ms(const Attack& attack, std::chrono::milliseconds cap) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(attack.stop - Clock::now()) + 5s;
  return static_cast<int>(std::clamp(left, 1000ms, cap).count());
}

// A connection, with `hello` sent on it; -1 (counted as refused) when either fails.
int open_connection(Attack& attack, const std::string& hello, std::chrono::milliseconds wait) {
  auto fd = protocol::connect_unix(attack.socket, Clock::now() + wait);
  if (!fd) {
    ++attack.stats.refused;
    attack.stats.note(fd.error().message);
    return -1;
  }
  if (!hello.empty() && send(*fd, hello.data(), hello.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
                            static_cast<ssize_t>(hello.size())) {
    ++attack.stats.refused;
    attack.stats.note(std::string("send: ") + std::strerror(errno));
    close(*fd);
    return -1;
  }
  ++attack.stats.opened;
  return *fd;
}

// Reads and drops what the daemon sent; false once it closed the connection.
bool drain(int fd) {
  char buffer[4096];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

// idle, h2idle, slowloris: `count` connections held open (each sends `hello` first), re-opened
// when the daemon closes them; with `trickle`, one more byte on each every 0.5 s.
void hold_connections(Attack& attack, const std::string& hello, bool trickle) {
  const auto wanted = static_cast<size_t>(attack.count);
  std::vector<int> fds;
  std::vector<pollfd> polled;
  auto next_byte = Clock::now() + 500ms;
  while (running(attack)) {
    while (fds.size() < wanted && running(attack)) {
      const int fd = open_connection(attack, hello, 1s);
      if (fd < 0) break;  // retried after the poll below
      fds.push_back(fd);
    }
    polled.clear();
    for (int fd : fds)
      polled.push_back({fd, POLLIN, 0});
    poll(polled.data(), polled.size(), fds.size() < wanted ? 10 : 50);
    for (size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents != 0 && !drain(fds[i])) {
        close(fds[i]);
        fds[i] = -1;
        ++attack.stats.dropped;
      }
    }
    if (trickle && Clock::now() >= next_byte) {
      for (int& fd : fds) {
        if (fd >= 0 && send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN) {
          close(fd);
          fd = -1;
          ++attack.stats.dropped;
        }
      }
      next_byte += 500ms;
    }
    fds.erase(std::remove(fds.begin(), fds.end(), -1), fds.end());
  }
  for (int fd : fds)
    close(fd);
  attack.extra = "opened=" + std::to_string(attack.stats.opened.load()) +
                 " refused=" + std::to_string(attack.stats.refused.load()) +
                 " closed_by_daemon=" + std::to_string(attack.stats.dropped.load());
}

// fresh: `count` new silent connections a second, each closed after 3 s.
void fresh_connections(Attack& attack) {
  std::deque<std::pair<Clock::time_point, int>> open;
  auto tick = Clock::now();
  while (running(attack)) {
    for (long i = 0; i < attack.count && running(attack); ++i) {
      const int fd = open_connection(attack, "", 100ms);
      if (fd >= 0) open.emplace_back(Clock::now(), fd);
    }
    tick += 1s;
    while (Clock::now() < std::min(tick, attack.stop)) {
      while (!open.empty() && open.front().first + 3s <= Clock::now()) {
        close(open.front().second);
        open.pop_front();
      }
      std::this_thread::sleep_for(10ms);
    }
  }
  for (const auto& [when, fd] : open)
    close(fd);
  attack.extra = "opened=" + std::to_string(attack.stats.opened.load()) +
                 " refused=" + std::to_string(attack.stats.refused.load());
}

// flood: `count` threads connecting and closing as fast as they can.
void flood(Attack& attack) {
  std::vector<std::thread> threads;
  for (long t = 0; t < attack.count; ++t) {
    threads.emplace_back([&attack] {
      while (running(attack)) {
        auto fd = protocol::connect_unix(attack.socket, Clock::now() + 1s);
        if (fd) {
          close(*fd);
          ++attack.stats.opened;
        } else {
          ++attack.stats.refused;
          attack.stats.note(fd.error().message);
        }
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  attack.extra = "connections=" + std::to_string(attack.stats.opened.load()) +
                 " refused=" + std::to_string(attack.stats.refused.load());
}

// A CPU list of at most `max_bytes`: "V-65535" then ",0-65535" as often as fits. V varies per
// request, so no two are alike (the daemon's answer cache keys on the request's content).
std::string heavy_cpu_list(size_t max_bytes, uint64_t variant) {
  std::string list = std::to_string(variant % 65536) + "-65535";
  constexpr std::string_view kMore = ",0-65535";
  list.reserve(max_bytes);
  while (list.size() + kMore.size() <= max_bytes)
    list += kMore;
  return list;
}

enum class Verdict { kAnswered, kRefused, kNoAnswer };

// The largest CPU list the daemon plans: a request refused for its size costs the daemon nothing,
// so an attacker halves from the protocol's limit until one is planned.
size_t probe_list_bytes(Attack& attack, const std::function<Verdict(const std::string&)>& ask) {
  for (size_t bytes = protocol::kMaxCpuListBytes; bytes >= 64 && running(attack); bytes /= 2) {
    const Verdict verdict = ask(heavy_cpu_list(bytes, bytes));
    if (verdict == Verdict::kAnswered) return bytes;
    if (verdict == Verdict::kNoAnswer) break;
  }
  return protocol::kMaxCpuListBytes;  // none planned: the largest, refused or not
}

Verdict count_verdict(Attack& attack, Verdict verdict) {
  ++attack.stats.sent;
  if (verdict == Verdict::kAnswered) ++attack.stats.answered;
  if (verdict == Verdict::kRefused) ++attack.stats.rejected;
  if (verdict == Verdict::kNoAnswer) ++attack.stats.failed;
  return verdict;
}

// heavy and grpcheavy: `count` threads asking, back to back, with the largest CPU list.
void heavy(Attack& attack, const std::function<Verdict(const std::string&, uint64_t)>& ask) {
  const size_t list_bytes =
      probe_list_bytes(attack, [&](const std::string& list) { return ask(list, 0); });
  std::atomic<uint64_t> next{1};
  std::vector<std::thread> threads;
  for (long t = 0; t < attack.count; ++t) {
    threads.emplace_back([&] {
      while (running(attack)) {
        const uint64_t variant = next++;
        count_verdict(attack, ask(heavy_cpu_list(list_bytes, variant), variant));
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  attack.extra = "list_bytes=" + std::to_string(heavy_cpu_list(list_bytes, 1).size()) +
                 " requests=" + std::to_string(attack.stats.sent.load()) +
                 " answered=" + std::to_string(attack.stats.answered.load()) +
                 " refused=" + std::to_string(attack.stats.rejected.load()) +
                 " unanswered=" + std::to_string(attack.stats.failed.load());
}

Verdict compact_verdict(Attack& attack, const protocol::StepRequest& request, int timeout_ms) {
  auto bytes = protocol::encode_request(request);
  if (!bytes) {
    attack.stats.note("encode: " + bytes.error().message);
    return Verdict::kRefused;
  }
  auto answer = protocol::exchange(attack.socket, *bytes, timeout_ms, {std::nullopt, false});
  if (answer) return Verdict::kAnswered;
  attack.stats.note(answer.error().message);
  return answer.error().invalid_input ? Verdict::kRefused : Verdict::kNoAnswer;
}

void compact_heavy(Attack& attack) {
  heavy(attack, [&](const std::string& list, uint64_t variant) {
    protocol::StepRequest request;
    request.job_id = variant;
    request.ntasks = 1;
    request.allowed_cpus = list;
    return compact_verdict(attack, request, request_timeout_ms(attack, 30s));
  });
}

void grpc_heavy(Attack& attack) {
  // One connection per thread, as separate clients would have.
  auto make_stub = [&] {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return gpubind::v1::Binder::NewStub(grpc::CreateCustomChannel(
        "unix:" + attack.socket, grpc::InsecureChannelCredentials(), args));
  };
  std::mutex mutex;
  std::vector<std::unique_ptr<gpubind::v1::Binder::Stub>> stubs;
  thread_local gpubind::v1::Binder::Stub* mine = nullptr;
  heavy(attack, [&](const std::string& list, uint64_t variant) {
    if (!mine) {
      std::lock_guard<std::mutex> lock(mutex);
      stubs.push_back(make_stub());
      mine = stubs.back().get();
    }
    gpubind::v1::PlanRequest request;
    request.set_job_id(variant);
    request.set_ntasks(1);
    request.set_allowed_cpus(list);
    request.set_bypass_cache(true);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(request_timeout_ms(attack, 30s)));
    gpubind::v1::PlanResponse response;
    const grpc::Status status = mine->Plan(&context, request, &response);
    if (status.ok()) return Verdict::kAnswered;
    attack.stats.note("gRPC Plan: code " + std::to_string(status.error_code()) + ": " +
                      status.error_message());
    return status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? Verdict::kRefused
                                                                     : Verdict::kNoAnswer;
  });
  mine = nullptr;
}

// cachemem: distinct 4096-task requests, one at a time; stops at the first left unanswered.
void cache_memory(Attack& attack) {
  long k = 1;
  for (; k <= attack.count && running(attack); ++k) {
    protocol::StepRequest request;
    request.job_id = static_cast<uint64_t>(k);
    request.ntasks = 4096;
    request.allowed_cpus = "0-1";
    request.gpus_given = true;
    for (int gpu = 0; gpu < 4; ++gpu)
      request.gpus.emplace_back(gpu, std::to_string(gpu));
    request.cpus_per_task = static_cast<int>(k);
    const int timeout_ms = static_cast<int>(std::min<long>(
        30000,
        std::chrono::duration_cast<std::chrono::milliseconds>(attack.stop - Clock::now()).count()));
    if (count_verdict(attack, compact_verdict(attack, request, std::max(timeout_ms, 1))) ==
        Verdict::kNoAnswer)
      break;
  }
  attack.unanswered = attack.count - attack.stats.answered - attack.stats.rejected;
  attack.extra = "requests=" + std::to_string(attack.stats.sent.load()) +
                 " answers=" + std::to_string(attack.stats.answered + attack.stats.rejected) +
                 " plans=" + std::to_string(attack.stats.answered.load()) +
                 " refused=" + std::to_string(attack.stats.rejected.load()) +
                 " unanswered=" + std::to_string(attack.unanswered);
}

// ---- Answers nobody reads, HTTP/2 from users gRPC is not served to, many users at once --------

// A compact request frame around binder.proto's PlanRequest (built through the schema: the plugin
// never sends bypass_cache).
std::string compact_frame(const gpubind::v1::PlanRequest& request) {
  const std::string body = request.SerializeAsString();
  std::string frame(compact::kMagic, sizeof compact::kMagic);
  frame += static_cast<char>(compact::kVersion);
  char length[4];
  compact::put_length(length, static_cast<uint32_t>(body.size()));
  frame.append(length, 4);
  return frame + body;
}

// On LUMI-G (8 GPUs, 128 CPUs): the largest answer the cache still keeps (4096 tasks, two GPUs
// each with 80-byte tokens: ~4.1 MB from ~700 bytes) or, planned afresh every time, the largest
// answer there is (eight GPUs each with 128-byte tokens: ~16 MB).
gpubind::v1::PlanRequest large_answer_request(bool largest) {
  gpubind::v1::PlanRequest request;
  request.set_job_id(7);
  request.set_ntasks(4096);
  request.set_allowed_cpus("0-127");
  request.set_gpus_given(true);
  request.set_gpus_per_task(largest ? 8 : 2);
  request.set_smt(2);
  request.set_omp_places(true);
  request.set_bypass_cache(largest);
  for (int gpu = 0; gpu < 8; ++gpu) {
    auto* given = request.add_gpus();
    given->set_node_index(gpu);
    given->set_token(std::to_string(gpu) + std::string(largest ? 127 : 79, largest ? 'x' : 'y'));
  }
  return request;
}

// The answer's size, read whole once (so the attack is known to ask for what it means to, and a
// cacheable answer is in the cache before the connections that never read it).
std::optional<size_t> answer_size(Attack& attack, const std::string& frame) {
  auto fd = protocol::connect_unix(attack.socket, Clock::now() + 5s);
  if (!fd) return std::nullopt;
  const auto deadline = Clock::now() + 30s;
  std::optional<size_t> size;
  char header[compact::kAnswerHeaderBytes];
  if (protocol::send_all(*fd, frame.data(), frame.size(), deadline) &&
      protocol::receive_all(*fd, header, sizeof header, deadline) &&
      header[0] == compact::kStatusPlan) {
    std::string answer(compact::get_length(header + 1), '\0');
    if (protocol::receive_all(*fd, answer.data(), answer.size(), deadline)) size = answer.size();
  }
  close(*fd);
  return size;
}

// nonread-cached, nonread-big: `count` connections that send `frame` and never read a byte of
// the answer (a small receive buffer, so it waits in the daemon), each re-opened as soon as the
// daemon closes it.
void hold_unread(Attack& attack, const std::string& frame) {
  const auto size = answer_size(attack, frame);
  const auto wanted = static_cast<size_t>(attack.count);
  std::vector<pollfd> held;
  while (running(attack)) {
    while (held.size() < wanted && running(attack)) {
      const int fd = open_connection(attack, frame, 1s);
      if (fd < 0) break;  // retried after the poll below
      const int small = 4096;
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
      held.push_back({fd, POLLRDHUP, 0});
    }
    poll(held.data(), held.size(), 50);
    for (pollfd& p : held) {
      if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) continue;
      close(p.fd);
      p.fd = -1;
      ++attack.stats.dropped;
    }
    held.erase(std::remove_if(held.begin(), held.end(), [](const pollfd& p) { return p.fd < 0; }),
               held.end());
  }
  for (const pollfd& p : held)
    close(p.fd);
  attack.extra = "answer_bytes=" + (size ? std::to_string(*size) : std::string("none")) +
                 " opened=" + std::to_string(attack.stats.opened.load()) +
                 " refused=" + std::to_string(attack.stats.refused.load()) +
                 " closed_by_daemon=" + std::to_string(attack.stats.dropped.load());
  if (!size) attack.stats.note("the large answer was not served even once");
}

constexpr char kH2Preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
// An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
constexpr char kEmptySettings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};

std::string h2_frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string frame;
  for (int shift : {16, 8, 0})
    frame += static_cast<char>((payload.size() >> shift) & 0xff);
  frame += static_cast<char>(type);
  frame += static_cast<char>(flags);
  for (int shift : {24, 16, 8, 0})
    frame += static_cast<char>((stream >> shift) & 0xff);
  return frame + payload;
}

// A gRPC Plan call's headers as HPACK literals without indexing (every string under 127 bytes).
std::string plan_call_headers() {
  std::string block;
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{":method", "POST"},
                                                        {":scheme", "http"},
                                                        {":path", "/gpubind.v1.Binder/Plan"},
                                                        {":authority", "localhost"},
                                                        {"content-type", "application/grpc"},
                                                        {"te", "trailers"}}) {
    block += '\0';
    block += static_cast<char>(name.size());
    block += name;
    block += static_cast<char>(value.size());
    block += value;
  }
  return block;
}

// h2streams, h2nonread: HTTP/2 connections that open streams (h2streams: `count` HEADERS never
// finished; h2nonread: with a receive window of 0, `count` Plan calls a second of the largest
// answer, never read), re-opened whenever the daemon closes them. Counts the connections on which
// the daemon sent anything (its SETTINGS: gRPC served them) and those it closed.
void h2_streams(Attack& attack, bool nonread) {
  constexpr uint8_t kHeaders = 1, kData = 0, kEndStream = 1, kEndHeaders = 4;
  const std::string headers = plan_call_headers();
  std::string message(5, '\0');
  const std::string plan = large_answer_request(true).SerializeAsString();
  for (int i = 0; i < 4; ++i)
    message[1 + i] = static_cast<char>((plan.size() >> (24 - 8 * i)) & 0xff);
  message += plan;
  // SETTINGS_INITIAL_WINDOW_SIZE (4) = 0: the daemon may not send a byte of any answer.
  const std::string zero_window = h2_frame(4, 0, 0, std::string("\0\4\0\0\0\0", 6));
  const std::string hello = std::string(kH2Preface, sizeof kH2Preface - 1) +
                            (nonread ? zero_window : std::string(kEmptySettings, 9));
  long served = 0, closed = 0, streams = 0;
  while (running(attack)) {
    const int fd = open_connection(attack, hello, 1s);
    if (fd < 0) {
      std::this_thread::sleep_for(10ms);
      continue;
    }
    bool spoke = false, gone = false;
    uint32_t stream = 1;
    auto next_call = Clock::now();
    for (long opened = 0; running(attack) && !gone;) {
      if (!nonread && opened < attack.count) {
        std::string batch;
        for (int i = 0; i < 100 && opened < attack.count; ++i, ++opened, stream += 2)
          batch += h2_frame(kHeaders, kEndHeaders, stream, headers);
        gone = send(fd, batch.data(), batch.size(), MSG_NOSIGNAL) < 0 && errno != EAGAIN;
        streams += gone ? 0 : 100;
      } else if (nonread && Clock::now() >= next_call) {
        const std::string call = h2_frame(kHeaders, kEndHeaders, stream, headers) +
                                 h2_frame(kData, kEndStream, stream, message);
        gone = send(fd, call.data(), call.size(), MSG_NOSIGNAL) < 0 && errno != EAGAIN;
        stream += 2;
        ++streams;
        next_call += std::chrono::milliseconds(1000 / attack.count);
      }
      pollfd reply{fd, POLLIN | POLLRDHUP, 0};
      if (poll(&reply, 1, opened < attack.count && !nonread ? 0 : 20) > 0) {
        char byte;
        const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) spoke = true;  // what gRPC sent is left unread, as an attacker would
        if (n == 0 || (n < 0 && errno != EAGAIN) || (reply.revents & (POLLRDHUP | POLLHUP)))
          gone = true;
      }
    }
    close(fd);
    served += spoke;
    closed += gone;
    if (gone) std::this_thread::sleep_for(5ms);
  }
  attack.h2_served = served;
  attack.h2_closed = closed;
  attack.extra = "connections=" + std::to_string(attack.stats.opened.load()) +
                 " streams=" + std::to_string(streams) +
                 " served_by_grpc=" + std::to_string(served) +
                 " closed_by_daemon=" + std::to_string(closed);
}

// The attack `body` run in `attack.users` processes, each as its own uid from `first_uid` (no
// account needed: SO_PEERCRED reports the raw uid), as root. Each reports its kCounts numbers
// (`counts_of`); what comes back: their sums, and how many processes ran and reported.
template <size_t kCounts>
struct UserTotals {
  std::array<long, kCounts> sums{};
  size_t users = 0, reported = 0;
};
template <size_t kCounts>
UserTotals<kCounts> in_each_user(
    Attack& attack, const std::function<void(Attack&)>& body,
    const std::function<std::array<long, kCounts>(Attack&)>& counts_of) {
  UserTotals<kCounts> totals;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    attack.stats.note(std::string("pipe: ") + std::strerror(errno));
    return totals;
  }
  std::vector<pid_t> children;
  for (long i = 0; i < attack.users; ++i) {
    const uid_t uid = attack.first_uid + static_cast<uid_t>(i);
    const pid_t child = fork();
    if (child < 0) break;
    if (child == 0) {
      close(pipe_fds[0]);
      if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(3);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      body(attack);
      const std::array<long, kCounts> counts = counts_of(attack);
      if (write(pipe_fds[1], counts.data(), sizeof counts) != sizeof counts) _exit(4);
      _exit(0);
    }
    children.push_back(child);
  }
  close(pipe_fds[1]);
  for (std::array<long, kCounts> counts;
       read(pipe_fds[0], counts.data(), sizeof counts) == sizeof counts; ++totals.reported) {
    for (size_t k = 0; k < kCounts; ++k)
      totals.sums[k] += counts[k];
  }
  close(pipe_fds[0]);
  for (pid_t child : children)
    waitpid(child, nullptr, 0);
  totals.users = children.size();
  return totals;
}

// multiuser: `users` processes, each holding `count` connections that sent a compact header
// announcing 100 bytes and then nothing, re-opened as the daemon closes them.
void many_users(Attack& attack) {
  std::string header(compact::kMagic, sizeof compact::kMagic);
  header += static_cast<char>(compact::kVersion);
  char length[4];
  compact::put_length(length, 100);
  header.append(length, 4);
  const auto totals = in_each_user<3>(
      attack, [&](Attack& a) { hold_connections(a, header, false); },
      [](Attack& a) {
        return std::array<long, 3>{a.stats.opened, a.stats.refused, a.stats.dropped};
      });
  attack.extra =
      "users=" + std::to_string(totals.users) + " reported=" + std::to_string(totals.reported) +
      " opened=" + std::to_string(totals.sums[0]) + " refused=" + std::to_string(totals.sums[1]) +
      " closed_by_daemon=" + std::to_string(totals.sums[2]);
}

// How many of the attackers' costly plans have been answered, in memory every process of the run
// shares (mapped before the first fork): the probe reads it before and after each of its own.
std::atomic<long>* g_costly_answered = nullptr;

// queuefill, in one user's process: `count` connections, each asking back to back for a distinct
// plan the daemon must make (job ids differ; bypass_cache), reading every answer whole.
void ask_costly_plans(Attack& attack) {
  gpubind::v1::PlanRequest request;
  request.set_ntasks(1024);
  request.set_allowed_cpus("0-127");
  request.set_gpus_given(true);
  request.set_gpus_per_task(8);
  request.set_smt(2);
  request.set_omp_places(true);
  request.set_bypass_cache(true);
  for (int gpu = 0; gpu < 8; ++gpu) {
    auto* given = request.add_gpus();
    given->set_node_index(gpu);
    given->set_token(std::to_string(gpu) + std::string(127, 'x'));
  }
  std::vector<std::thread> threads;
  for (long t = 0; t < attack.count; ++t) {
    threads.emplace_back([&attack, request, t]() mutable {
      for (uint64_t k = 0; running(attack); ++k) {
        request.set_job_id((static_cast<uint64_t>(getuid()) << 32) + (t << 24) + k);
        ++attack.stats.sent;
        if (answer_size(attack, compact_frame(request))) {
          ++attack.stats.answered;
          g_costly_answered->fetch_add(1);
        } else {
          ++attack.stats.rejected;
          std::this_thread::sleep_for(5ms);
        }
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
}

// queuefill: `users` processes, each as its own uid, each asking for costly plans back to back.
void many_users_planning(Attack& attack) {
  const auto totals = in_each_user<2>(attack, ask_costly_plans, [](Attack& a) {
    return std::array<long, 2>{a.stats.answered, a.stats.rejected};
  });
  attack.extra = "users=" + std::to_string(totals.users) +
                 " reported=" + std::to_string(totals.reported) +
                 " plans_answered=" + std::to_string(totals.sums[0]) +
                 " refused_or_failed=" + std::to_string(totals.sums[1]);
  if (totals.sums[0] == 0)
    attack.stats.note("no costly plan was answered: the attack did not load the daemon");
}

void run_attack(Attack& attack, Mode mode) {
  switch (mode) {
    case Mode::kNone:
      std::this_thread::sleep_until(attack.stop);
      attack.extra = "attack=none";
      return;
    case Mode::kIdle:
      return hold_connections(attack, "", false);
    case Mode::kFresh:
      return fresh_connections(attack);
    case Mode::kSlowloris: {
      std::string header(compact::kMagic, sizeof compact::kMagic);
      header += static_cast<char>(compact::kVersion);
      char length[4];
      compact::put_length(length, 100);
      header.append(length, 4);
      return hold_connections(attack, header, true);
    }
    case Mode::kFlood:
      return flood(attack);
    case Mode::kH2idle:
      return hold_connections(attack,
                              std::string(kH2Preface, sizeof kH2Preface - 1) +
                                  std::string(kEmptySettings, sizeof kEmptySettings),
                              false);
    case Mode::kHeavy:
      return compact_heavy(attack);
    case Mode::kGrpcHeavy:
      return grpc_heavy(attack);
    case Mode::kCachemem:
      return cache_memory(attack);
    case Mode::kNonreadCached:
      return hold_unread(attack, compact_frame(large_answer_request(false)));
    case Mode::kNonreadBig:
      return hold_unread(attack, compact_frame(large_answer_request(true)));
    case Mode::kH2Streams:
      return h2_streams(attack, false);
    case Mode::kH2Nonread:
      return h2_streams(attack, true);
    case Mode::kMultiuser:
      return many_users(attack);
    case Mode::kQueuefill:
      return many_users_planning(attack);
  }
}

void write_report(int fd, const Report& report) {
  if (write(fd, &report, sizeof report) != static_cast<ssize_t>(sizeof report)) _exit(4);
}

// The forked child: drops to the attacker's user, attacks until `stop`, reports, exits.
[[noreturn]] void attacker_main(const Options& options, Clock::time_point stop, int report_fd) {
  Report report;
  auto fail = [&](const std::string& why) {
    report.setup_failed = 1;
    std::snprintf(report.text, sizeof report.text, "%s", why.c_str());
    write_report(report_fd, report);
    _exit(3);
  };
  // As many connections as the hard limit allows (idle and h2idle hold a thousand).
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  if (!options.attacker_cpus.empty()) {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    for (int cpu : options.attacker_cpus)
      CPU_SET(cpu, &cpus);
    if (sched_setaffinity(0, sizeof cpus, &cpus) != 0)
      fail(std::string("cannot confine the attacker to its CPUs: ") + std::strerror(errno));
  }
  const bool many_users =
      options.mode.mode == Mode::kMultiuser || options.mode.mode == Mode::kQueuefill;
  if (many_users && (!options.attacker_uid || geteuid() != 0))
    fail(std::string(options.mode.name) +
         " needs root and --attacker-uid (the first of its users)");
  if (options.attacker_uid && geteuid() == 0 && !many_users) {
    if (setgroups(0, nullptr) != 0 || setgid(options.attacker_gid) != 0 ||
        setuid(*options.attacker_uid) != 0) {
      fail("cannot become uid " + std::to_string(*options.attacker_uid) + ": " +
           std::strerror(errno));
    }
    if (getuid() != *options.attacker_uid || geteuid() != *options.attacker_uid)
      fail("still uid " + std::to_string(geteuid()) + " after setuid");
  }
  // Dies with the harness (set after setuid, which clears it).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) _exit(5);

  Attack attack;
  attack.socket = options.socket;
  attack.count = options.count;
  attack.stop = stop;
  attack.users = options.users;
  attack.first_uid = options.attacker_uid.value_or(0);
  if (options.mode.mode != Mode::kNone) {
    auto fd = protocol::connect_unix(attack.socket, Clock::now() + 2s);
    if (!fd && fd.error().message.find("Permission denied") != std::string::npos) {
      fail("the attacker (uid " + std::to_string(getuid()) + ") cannot connect: " +
           fd.error().message + " (is the socket's folder searchable by that user?)");
    }
    if (fd) close(*fd);
  }
  run_attack(attack, options.mode.mode);
  std::string text = attack.extra;
  if (!attack.stats.first_error.empty())
    text += "\n  attack's first error: " + attack.stats.first_error;
  report.unanswered = attack.unanswered;
  report.h2_served = attack.h2_served;
  report.h2_closed = attack.h2_closed;
  std::snprintf(report.text, sizeof report.text, "%s", text.c_str());
  write_report(report_fd, report);
  _exit(0);
}

// ---- The probe ---------------------------------------------------------------------------------

// The request of an ordinary job step: `tasks` tasks (8), the node's first 8 GPUs, no CPU
// restriction (nothing else node-specific), as the plugin encodes it. `uncached`: the same with
// bypass_cache, which the plugin never sends, so that every probe is planned as a launch of a
// shape the daemon has not seen is.
std::string probe_request(int tasks, bool uncached) {
  if (uncached) {
    gpubind::v1::PlanRequest request;
    request.set_job_id(1);
    request.set_ntasks(static_cast<uint32_t>(tasks));
    request.set_gpus_given(true);
    request.set_bypass_cache(true);
    for (int gpu = 0; gpu < 8; ++gpu) {
      auto* given = request.add_gpus();
      given->set_node_index(gpu);
      given->set_token(std::to_string(gpu));
    }
    return request.SerializeAsString();
  }
  protocol::StepRequest request;
  request.job_id = 1;
  request.step_id = 0;
  request.ntasks = tasks;
  request.gpus_given = true;
  for (int gpu = 0; gpu < 8; ++gpu)
    request.gpus.emplace_back(gpu, std::to_string(gpu));
  auto bytes = protocol::encode_request(request);
  if (!bytes) setup_error("cannot encode the probe request: " + bytes.error().message);
  return *bytes;
}

// One probe: its latency in ms, or the error. As `probe_uid` when given (the daemon knows its
// client by the uid it connected with; the rest of this process stays root, to read /proc).
std::pair<double, std::optional<std::string>> probe_once(const std::string& socket,
                                                         const std::string& request, int timeout_ms,
                                                         std::optional<uid_t> probe_uid,
                                                         size_t tasks) {
  if (probe_uid && seteuid(*probe_uid) != 0)
    setup_error("cannot probe as uid " + std::to_string(*probe_uid) + ": " + std::strerror(errno));
  const auto start = Clock::now();
  auto answer = protocol::exchange(socket, request, timeout_ms, {std::nullopt, false});
  if (probe_uid && seteuid(0) != 0) setup_error("cannot become root again after a probe");
  std::optional<std::string> error;
  if (!answer) {
    error = answer.error().message;
  } else if (auto plan = protocol::decode_plan(*answer); !plan) {
    error = "undecodable answer: " + plan.error().message;
  } else if (plan->tasks.size() != tasks) {
    error =
        "a plan of " + std::to_string(plan->tasks.size()) + " tasks, not " + std::to_string(tasks);
  }
  return {std::chrono::duration<double, std::milli>(Clock::now() - start).count(), error};
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p / 100.0 * values.size()))];
}

long mib(long kib) {
  return kib < 0 ? -1 : (kib + 512) / 1024;
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse_options(argc, argv);
  const pid_t pid = options.daemon_pid;
  if (!daemon_alive(pid)) setup_error("no running process with pid " + std::to_string(pid));
  if (options.attacker_uid) {
    if (geteuid() != 0 && *options.attacker_uid != geteuid()) {
      setup_error("--attacker-uid " + std::to_string(*options.attacker_uid) +
                  " needs root (this runs as uid " + std::to_string(geteuid()) + ")");
    }
    const passwd* user = getpwuid(*options.attacker_uid);
    options.attacker_gid = user ? user->pw_gid : static_cast<gid_t>(*options.attacker_uid);
  }
  signal(SIGPIPE, SIG_IGN);
  void* shared = mmap(nullptr, sizeof(std::atomic<long>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) setup_error(std::string("mmap: ") + std::strerror(errno));
  g_costly_answered = new (shared) std::atomic<long>(0);

  const std::string request = probe_request(options.probe_tasks, options.probe_uncached);
  const auto probe_tasks = static_cast<size_t>(options.probe_tasks);
  if (options.probe_uid && geteuid() != 0) setup_error("--probe-uid needs root");
  if (auto [ms, error] = probe_once(options.socket, request, options.probe_timeout_ms,
                                    options.probe_uid, probe_tasks);
      error)
    setup_error("the daemon does not answer the probe before any attack: " + *error);

  const long rss_before = rss_kib(pid);
  const double cpu_before = cpu_seconds(pid);
  long rss_peak = rss_before, fds_peak = fd_count(pid), threads_peak = thread_count(pid);

  int report_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) != 0) setup_error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(options.seconds));
  // Forked before this process starts any thread (gRPC's included): the child is a clean copy.
  const pid_t child = fork();
  if (child < 0) setup_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    close(report_pipe[0]);
    attacker_main(options, stop, report_pipe[1]);
  }
  close(report_pipe[1]);

  const bool until_done = options.mode.mode == Mode::kCachemem;
  const auto probe_end = until_done ? stop : stop - 500ms;
  std::vector<double> latencies, planned_while_waiting;
  long misses = 0, failed = 0;
  std::string first_failure;
  int child_status = 0;
  bool child_done = false;
  auto next = start + 1s;
  while (true) {
    std::this_thread::sleep_until(next);
    if (until_done && !child_done && waitpid(child, &child_status, WNOHANG) == child)
      child_done = true;
    if (Clock::now() >= probe_end || child_done) break;
    const long answered_before = g_costly_answered->load();
    auto [ms, error] = probe_once(options.socket, request, options.probe_timeout_ms,
                                  options.probe_uid, probe_tasks);
    planned_while_waiting.push_back(
        static_cast<double>(g_costly_answered->load() - answered_before));
    if (error) {
      ++failed;
      ms = std::max(ms, static_cast<double>(options.probe_timeout_ms));
      if (first_failure.empty()) first_failure = *error;
    }
    if (ms >= options.probe_timeout_ms) ++misses;
    latencies.push_back(ms);
    rss_peak = std::max(rss_peak, rss_kib(pid));
    fds_peak = std::max(fds_peak, fd_count(pid));
    threads_peak = std::max(threads_peak, thread_count(pid));
    next = std::max(next + 200ms, Clock::now());
  }

  // The attacker stops by itself at `stop` (a request in flight then, within 5 s more).
  bool attacker_killed = false;
  const auto kill_at = stop + 10s;
  while (!child_done) {
    const pid_t done = waitpid(child, &child_status, WNOHANG);
    if (done == child || (done < 0 && errno != EINTR)) {
      child_done = true;
    } else if (Clock::now() >= kill_at) {
      kill(child, SIGKILL);
      waitpid(child, &child_status, 0);
      attacker_killed = true;
      child_done = true;
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  Report report;
  const bool reported = read(report_pipe[0], &report, sizeof report) == sizeof report;
  close(report_pipe[0]);
  report.text[sizeof report.text - 1] = '\0';
  if (reported && report.setup_failed) setup_error(report.text);

  std::this_thread::sleep_for(500ms);  // what the daemon keeps once the attack has gone
  const bool alive = daemon_alive(pid);
  const long rss_after = rss_kib(pid);
  const long hwm = hwm_kib(pid);
  const double cpu_after = cpu_seconds(pid);
  rss_peak = std::max(rss_peak, rss_after);
  fds_peak = std::max(fds_peak, fd_count(pid));
  threads_peak = std::max(threads_peak, thread_count(pid));

  const double p99 = percentile(latencies, 99);
  std::string attack_text = reported ? report.text : "attacker reported nothing";
  std::string attack_detail;
  if (const size_t newline = attack_text.find('\n'); newline != std::string::npos) {
    attack_detail = attack_text.substr(newline);
    attack_text.resize(newline);
  }
  char cpu[32] = "?";
  if (cpu_before >= 0 && cpu_after >= 0)
    std::snprintf(cpu, sizeof cpu, "%.2f", cpu_after - cpu_before);
  std::printf(
      "mode=%s n=%ld seconds=%g probes=%zu p50_ms=%.2f p99_ms=%.2f max_ms=%.2f misses=%ld "
      "failed=%ld rss_mib=%ld->%ld(peak %ld) hwm_mib=%ld cpu_s=%s fds_peak=%ld threads_peak=%ld "
      "%s%s alive=%s\n",
      options.mode.name, options.count, options.seconds, latencies.size(),
      percentile(latencies, 50), p99, percentile(latencies, 100), misses, failed, mib(rss_before),
      mib(rss_after), mib(rss_peak), mib(hwm), cpu, fds_peak, threads_peak, attack_text.c_str(),
      attacker_killed ? " attacker_killed=yes" : "", alive ? "yes" : "no");
  const double waited_behind = percentile(planned_while_waiting, 99);
  if (options.mode.mode == Mode::kQueuefill) {
    std::printf("  attackers' plans answered while a probe waited: p50 %.0f p99 %.0f max %.0f\n",
                percentile(planned_while_waiting, 50), waited_behind,
                percentile(planned_while_waiting, 100));
  }
  if (!first_failure.empty()) std::printf("  first probe failure: %s\n", first_failure.c_str());
  if (!attack_detail.empty()) std::printf("%s\n", attack_detail.c_str() + 1);

  std::vector<std::string> exceeded;
  if (!alive) exceeded.push_back("the daemon died");
  if (options.max_misses && misses > *options.max_misses)
    exceeded.push_back("misses " + std::to_string(misses) + " > " +
                       std::to_string(*options.max_misses));
  if (options.max_planned_while_waiting && !planned_while_waiting.empty() &&
      waited_behind > static_cast<double>(*options.max_planned_while_waiting)) {
    exceeded.push_back("at p99 a probe waited while " +
                       std::to_string(static_cast<long>(waited_behind)) +
                       " of the attackers' plans were answered (at most " +
                       std::to_string(*options.max_planned_while_waiting) + ")");
  }
  if (options.max_p99_ms && !latencies.empty() && p99 > *options.max_p99_ms) {
    char text[96];
    std::snprintf(text, sizeof text, "p99_ms %.2f > %g", p99, *options.max_p99_ms);
    exceeded.push_back(text);
  }
  if (options.max_rss_mib && rss_peak > static_cast<long>(*options.max_rss_mib * 1024)) {
    char text[96];
    std::snprintf(text, sizeof text, "peak rss_mib %.1f > %g", rss_peak / 1024.0,
                  *options.max_rss_mib);
    exceeded.push_back(text);
  }
  if (options.max_hwm_mib && hwm > static_cast<long>(*options.max_hwm_mib * 1024)) {
    char text[96];
    std::snprintf(text, sizeof text, "peak resident memory since start (VmHWM) %.1f MiB > %g",
                  hwm / 1024.0, *options.max_hwm_mib);
    exceeded.push_back(text);
  }
  if (options.expect_grpc_refused && report.h2_served != 0) {
    exceeded.push_back("the daemon served HTTP/2 to the attacker on " +
                       std::to_string(report.h2_served) + " connections");
  }
  if (options.expect_grpc_refused && report.h2_closed == 0)
    exceeded.push_back("the daemon never closed the attacker's HTTP/2 connections");
  if (report.unanswered > 0)
    exceeded.push_back(std::to_string(report.unanswered) + " cachemem requests unanswered");
  for (const std::string& what : exceeded)
    std::printf("FAIL mode=%s: %s\n", options.mode.name, what.c_str());
  std::fflush(stdout);
  return exceeded.empty() ? 0 : 1;
}
