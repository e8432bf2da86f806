// gpubindctl metrics: the daemon's monitoring counters in the Prometheus text format, on stdout
// or (--textfile) written atomically for node_exporter's textfile collector.
#include <iostream>
#include <string>

#include "ctl.h"
#include "gpubind/api/binder_client.h"
#include "gpubind/output/metrics_format.h"

namespace gpubind::ctl {
namespace {

output::DaemonMetrics metrics_of(const api::DaemonStatus& s) {
  output::DaemonMetrics m;
  m.version = s.version;
  m.start_time_s = s.start_time_s;
  m.plans_cache = s.plans_cache;
  m.plans_worker = s.plans_worker;
  m.plans_refused = s.plans_refused;
  m.plans_node_mismatch = s.plans_node_mismatch;
  m.latency_buckets = s.latency_buckets;
  m.latency_count = s.latency_count;
  m.latency_sum_s = s.latency_sum_s;
  m.refusals = s.refusals;
  m.fallbacks = s.fallbacks;
  m.policy_generation = s.policy_generation;
  m.topology_generation = s.topology_generation;
  m.reloads = s.reloads;
  m.reloads_refused = s.reloads_refused;
  m.rss_bytes = s.rss_bytes;
  m.cpu_s = s.cpu_s;
  return m;
}

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

}  // namespace

int run_metrics(const Args& args) {
  auto access = daemon_access(args);
  if (!access) return fail(access.error().message);
  const auto textfile = args.get("textfile");
  // node_exporter's textfile collector reads *.prom only.
  if (textfile && !ends_with(*textfile, ".prom"))
    return fail("--textfile: the file's name must end in .prom, got '" + *textfile + "'");
  auto status = api::BinderClient(access->socket).status(access->timeout);
  // A daemon that does not answer still gets its metrics written: gpubind_daemon_up 0.
  std::string text;
  if (status) {
    const output::DaemonMetrics metrics = metrics_of(*status);
    text = output::metrics_text(&metrics);
  } else {
    text = output::metrics_text(nullptr);
  }
  Status recorded = Ok{};
  if (args.has("audit")) {
    AuditMetrics audit = audit_metrics(args);
    text += audit.text;
    recorded = std::move(audit.recorded);
  } else if (args.get("record")) {
    return fail("--record DIR records what the audit reads: give --audit too");
  }
  if (textfile) {
    if (auto written = write_trusted_file(*textfile, text); !written)
      return fail(written.error().message, kExitFailed);
  } else {
    std::cout << text << std::flush;
  }
  if (!status) return fail_from_daemon(access->socket, status.error());
  if (!recorded) return fail(recorded.error().message, kExitFailed);
  return kExitOk;
}

}  // namespace gpubind::ctl
