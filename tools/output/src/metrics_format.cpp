#include "gpubind/output/metrics_format.h"

#include <charconv>
#include <cmath>

namespace gpubind::output {
namespace {

std::string number(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  char text[64];
  const auto result = std::to_chars(text, text + sizeof text, value);  // shortest round trip
  return std::string(text, result.ptr);
}

std::string number(uint64_t value) {
  return std::to_string(value);
}

class Exposition {
 public:
  void family(const std::string& name, const char* type, const char* help) {
    text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  template <typename T>
  void sample(const std::string& name, const std::string& labels, T value) {
    text_ += name;
    if (!labels.empty()) text_ += "{" + labels + "}";
    text_ += " " + number(value) + "\n";
  }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
};

std::string label(const std::string& name, const std::string& value) {
  return name + "=\"" + escape_label_value(value) + "\"";
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string metrics_text(const DaemonMetrics* m) {
  Exposition out;
  out.family("gpubind_daemon_up", "gauge",
             "Whether gpubindd answered when these metrics were collected (1) or not (0).");
  out.sample("gpubind_daemon_up", "", uint64_t{m ? 1u : 0u});
  if (!m) return out.take();

  out.family("gpubind_build_info", "gauge", "The gpubindd release serving, as its label; 1.");
  out.sample("gpubind_build_info", label("version", m->version), uint64_t{1});
  out.family("gpubind_daemon_start_time_seconds", "gauge",
             "When gpubindd started, in seconds since the Unix epoch.");
  out.sample("gpubind_daemon_start_time_seconds", "", m->start_time_s);

  out.family("gpubind_plans_total", "counter",
             "Plan requests by how they ended: answered from the cache, planned afresh by a "
             "worker, refused (bad request, limits, overload), or naming CPUs or GPUs the "
             "daemon's topology lacks.");
  out.sample("gpubind_plans_total", label("source", "cache"), m->plans_cache);
  out.sample("gpubind_plans_total", label("source", "worker"), m->plans_worker);
  out.sample("gpubind_plans_total", label("source", "refused"), m->plans_refused);
  out.sample("gpubind_plans_total", label("source", "node_mismatch"), m->plans_node_mismatch);

  out.family("gpubind_refusals_total", "counter",
             "Refused plan requests by cause: malformed, version, too_large, busy, unplannable, "
             "node_mismatch. Any local user can cause each at will; a stale topology shows as "
             "gpubind_fallbacks_total{reason=\"node_mismatch\"}, which only real launches report.");
  for (const auto& [cause, count] : m->refusals)
    out.sample("gpubind_refusals_total", label("cause", cause), count);

  const std::string duration = "gpubind_plan_duration_seconds";
  out.family(duration, "histogram", "Time gpubindd spent answering a plan request, in seconds.");
  for (const auto& [bound, count] : m->latency_buckets)
    out.sample(duration + "_bucket", label("le", number(bound)), count);
  out.sample(duration + "_bucket", label("le", "+Inf"), m->latency_count);
  out.sample(duration + "_sum", "", m->latency_sum_s);
  out.sample(duration + "_count", "", m->latency_count);

  out.family("gpubind_fallbacks_total", "counter",
             "Launches that planned in-process because gpubindd could not answer, as the launch "
             "side reported them, by reason.");
  for (const auto& [reason, count] : m->fallbacks)
    out.sample("gpubind_fallbacks_total", label("reason", reason), count);

  out.family("gpubind_policy_generation", "gauge",
             "Generation of the policy served; each successful reload raises it.");
  out.sample("gpubind_policy_generation", "", m->policy_generation);
  out.family("gpubind_topology_generation", "gauge",
             "Generation of the node topology served; each successful reload raises it.");
  out.sample("gpubind_topology_generation", "", m->topology_generation);
  out.family("gpubind_reloads_total", "counter",
             "Reloads (SIGHUP) by result: succeeded, or refused with the old state serving on.");
  out.sample("gpubind_reloads_total", label("result", "succeeded"), m->reloads);
  out.sample("gpubind_reloads_total", label("result", "refused"), m->reloads_refused);

  out.family("gpubind_resident_memory_bytes", "gauge", "Resident memory of gpubindd, in bytes.");
  out.sample("gpubind_resident_memory_bytes", "", m->rss_bytes);
  out.family("gpubind_cpu_seconds_total", "counter",
             "CPU time (user and system) gpubindd has used, in seconds.");
  out.sample("gpubind_cpu_seconds_total", "", m->cpu_s);
  return out.take();
}

std::string audit_metrics_text(const AuditMetrics& a) {
  Exposition out;
  out.family("gpubind_audit_up", "gauge",
             "Whether the audit of the node's running tasks ran (1) or not (0: no topology).");
  out.sample("gpubind_audit_up", "", uint64_t{a.read ? 1u : 0u});
  if (!a.read) return out.take();
  out.family("gpubind_audit_tasks", "gauge",
             "Tasks of Slurm job steps running on the node, by verdict: as-planned, re-pinned "
             "(threads moved off gpubind's CPUs), unbound-near, unbound-far (off its GPUs' "
             "domain), unbound-straddling, unbound-overlapping (another task's cores), unknown.");
  for (const auto& [verdict, count] : a.tasks_by_verdict)
    out.sample("gpubind_audit_tasks", label("verdict", verdict), count);
  out.family("gpubind_audit_memory_remote_tasks", "gauge",
             "Running tasks with most of their resident memory on NUMA nodes other than their "
             "CPUs'.");
  out.sample("gpubind_audit_memory_remote_tasks", "", a.memory_remote);
  out.family("gpubind_audit_steps", "gauge", "Slurm job steps running on the node.");
  out.sample("gpubind_audit_steps", "", a.steps);
  out.family("gpubind_audit_partly_read_tasks", "gauge",
             "Tasks the audit could not read whole (a process ended while it was read, or a "
             "file of it was not readable).");
  out.sample("gpubind_audit_partly_read_tasks", "", a.partly_read);
  return out.take();
}

}  // namespace gpubind::output
