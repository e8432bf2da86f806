// The daemon's side of the compact protocol on arbitrary bytes, as the plugin's path reaches it:
// the bytes arrive on gpubindd's listening socket (magic, version, length, PlanRequest), its
// Router reads and frames them, a PlanWorkers thread plans on the LUMI-G fixture through the real
// BinderService, and the Router answers. Whatever the bytes, the answer is absent (the request
// never arrived whole), or one well-framed answer; a plan answered has one binding per task, each
// inside the step's CPUs. Inputs that do not begin with the compact magic are gRPC's, not
// fuzzed here (the Router hands them over untouched).
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "gpubind/cpuset.h"
#include "gpubind/daemon/binder_service.h"
#include "gpubind/daemon/daemon_state.h"
#include "gpubind/daemon/listener.h"
#include "gpubind/daemon/log.h"
#include "gpubind/daemon/plan_workers.h"
#include "gpubind/daemon/router.h"
#include "gpubind/protocol/client.h"
#include "gpubind/protocol/compact.h"

using namespace gpubind;

namespace {

daemon::BinderService& service() {
  static daemon::BinderService* instance = [] {
    log::set_level(log::Level::kError);
    auto state = daemon::load_state({std::string(GPUBIND_FIXTURES) + "/lumi-g.policy",
                                     std::string(GPUBIND_FIXTURES) + "/lumi-g.xml"},
                                    nullptr);
    if (!state) std::abort();
    return new daemon::BinderService(*state, false);
  }();
  return *instance;
}

// The daemon's socket, served for the whole run by a Router and its planning workers.
const std::string& socket_path() {
  static const std::string* path = [] {
    char dir[] = "/tmp/gpubind-fuzz-XXXXXX";
    if (!mkdtemp(dir)) std::abort();
    auto* where = new std::string(std::string(dir) + "/gpubindd.sock");
    auto fd = daemon::open_listener({*where});
    if (!fd) std::abort();
    auto* workers = new daemon::PlanWorkers({});
    auto* router = new daemon::Router(service(), *workers, {});
    if (!router->start(*fd, nullptr)) std::abort();  // no gRPC: only compact inputs are sent
    return where;
  }();
  return *path;
}

int connect_to_daemon() {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) std::abort();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path().c_str(), sizeof addr.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) std::abort();
  return fd;
}

std::string read_all(int fd) {
  std::string out;
  char chunk[4096];
  while (true) {
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n > 0) {
      out.append(chunk, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {  // libFuzzer's timer interrupts reads
      return out;
    }
  }
}

void check_plan(const std::string& request_bytes, const std::string& plan_bytes) {
  auto plan = protocol::decode_plan(plan_bytes);
  if (!plan) std::abort();  // the daemon answered a plan the plugin cannot read
  v1::PlanRequest request;
  if (!request.ParseFromString(request_bytes)) std::abort();  // planned what does not decode
  if (plan->tasks.size() != request.ntasks()) std::abort();
  if (request.allowed_cpus().empty()) return;
  auto allowed = CpuSet::parse_list(request.allowed_cpus());
  if (!allowed) std::abort();
  for (const auto& task : plan->tasks) {
    auto cpus = CpuSet::parse_list(task.cpus);
    if (!cpus || cpus->empty() || !cpus->is_subset_of(*allowed)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kHeader = compact::kRequestHeaderBytes;
  if (size < sizeof compact::kMagic || std::memcmp(data, compact::kMagic, sizeof compact::kMagic))
    return 0;
  // Inputs stay below a socket buffer, so writing them all before reading cannot block.
  if (size > 64 * 1024) return 0;
  const int fd = connect_to_daemon();
  const auto started = std::chrono::steady_clock::now();
  if (write(fd, data, size) != static_cast<ssize_t>(size)) std::abort();
  shutdown(fd, SHUT_WR);  // the client has said everything: no waiting for the deadline
  const std::string answer = read_all(fd);  // until the daemon closes
  close(fd);
  // The daemon gives up an exchange after 2 s (planning included): an answer cut there is the
  // deadline working, on a machine too loaded to plan in time.
  const bool hit_deadline =
      std::chrono::steady_clock::now() - started > std::chrono::milliseconds(1900);

  const uint32_t length =
      size >= kHeader
          ? compact::get_length(reinterpret_cast<const char*>(data) + sizeof compact::kMagic + 1)
          : 0;
  const uint8_t version = size >= kHeader ? data[sizeof compact::kMagic] : compact::kVersion;
  // A first-release plugin is answered nothing (it falls back); any other version is told.
  if (version == compact::kFirstReleaseVersion) {
    if (!answer.empty()) std::abort();
    return 0;
  }
  const bool other_version = version != compact::kVersion;
  const bool too_long = size >= kHeader && length > compact::kMaxRequestBytes;
  const bool whole = size >= kHeader && size - kHeader >= length;
  if (!too_long && !whole && !other_version) {
    if (!answer.empty()) std::abort();  // answered a request that never arrived whole
    return 0;
  }
  if (hit_deadline) return 0;
  if (answer.size() < 5) std::abort();
  const auto status = static_cast<uint8_t>(answer[0]);
  const uint32_t text_size = compact::get_length(answer.data() + 1);
  if (text_size != answer.size() - 5) std::abort();
  if (text_size > compact::kMaxAnswerBytes) std::abort();  // the plugin would refuse it
  if (other_version) {
    if (status != compact::kStatusUnsupportedVersion) std::abort();
    return 0;
  }
  // A refusal, or a step the daemon's topology cannot hold, always says why.
  if (status == compact::kStatusRefused || status == compact::kStatusNodeMismatch) {
    if (text_size == 0) std::abort();
    return 0;
  }
  if (status != compact::kStatusPlan || too_long) std::abort();
  check_plan(std::string(reinterpret_cast<const char*>(data) + kHeader, length), answer.substr(5));
  return 0;
}
