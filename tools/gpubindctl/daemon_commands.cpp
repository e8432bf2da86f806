// gpubindctl status and bench: what the daemon serves, and how fast.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "ctl.h"
#include "gpubind/api/binder_client.h"
#include "gpubind/bench/load.h"
#include "gpubind/output/json.h"

namespace gpubind::ctl {
namespace {

output::Json bench_json(const bench::LoadResult& r) {
  return output::Json{{"p50_us", r.p50_us},
                      {"p99_us", r.p99_us},
                      {"p999_us", r.p999_us},
                      {"plans_per_s", r.plans_per_s},
                      {"errors", r.errors}};
}

}  // namespace

int run_status(const Args& args) {
  auto access = daemon_access(args);
  if (!access) return fail(access.error().message);
  auto status = api::BinderClient(access->socket).status(access->timeout);
  if (!status) return fail_from_daemon(access->socket, status.error());
  const api::DaemonStatus& s = *status;
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
  auto probe = api::BinderClient(access->socket).plan(request, {}, access->timeout);
  if (!probe) return fail_from_daemon(access->socket, probe.error());
  const bool bypass = args.has("no-cache");
  api::BinderClient status_client(access->socket);
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

}  // namespace gpubind::ctl
