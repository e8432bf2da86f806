// gpubindctl audit: every task of every Slurm job step running on this node, as it runs now,
// judged against gpubind's plan for it or the planner's rules (gpubind/audit.h). Reads /proc
// only (under HWLOC_FSROOT where set, as live discovery does); root sees every job, anyone else
// their own tasks alone.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "ctl.h"
#include "gpubind/api/binder_client.h"
#include "gpubind/audit.h"
#include "gpubind/discovery/fs_root.h"
#include "gpubind/discovery/running_tasks.h"
#include "gpubind/output/json.h"
#include "gpubind/output/metrics_format.h"

namespace gpubind::ctl {
namespace {

output::Json task_json(const audit::TaskAudit& task) {
  output::Json gpus = output::Json::array();
  for (int g : task.gpus)
    gpus.push_back(g);
  return {{"rank", task.task->rank},
          {"local_rank", task.task->local_rank},
          {"pid", task.task->pid},
          {"threads", task.task->threads.size()},
          {"verdict", audit::verdict_name(task.verdict)},
          {"reason", task.reason},
          {"cpus", task.cpus.to_list()},
          {"gpus", gpus},
          {"remote_memory",
           task.remote_memory >= 0 ? output::Json(task.remote_memory) : output::Json()},
          {"memory_remote", task.memory_remote}};
}

output::Json step_json(const audit::StepAudit& step, bool with_tasks) {
  output::Json verdicts = output::Json::object();
  for (const auto& [verdict, count] : step.counts)
    verdicts[audit::verdict_name(verdict)] = count;
  output::Json json{{"job", step.job_id},   {"step", step.step},
                    {"uid", step.uid},      {"tasks", step.tasks.size()},
                    {"verdicts", verdicts}, {"memory_remote", step.memory_remote}};
  if (with_tasks) {
    output::Json tasks = output::Json::array();
    for (const audit::TaskAudit& task : step.tasks)
      tasks.push_back(task_json(task));
    json["task_list"] = tasks;
  }
  return json;
}

// The node the tasks are judged on: --topology's; else the daemon's, which planned them (it
// answers root and its own user); else the node's as the policy gives it.
Result<Topology> audit_topology(const Args& args) {
  if (!args.get("topology")) {
    if (auto access = daemon_access(args)) {
      auto fetched = api::BinderClient(access->socket).topology(access->timeout);
      if (fetched) return std::move(fetched->topology);
    }
  }
  NodeSources sources;
  sources.policy_path = policy_to_load(args.get("policy"));
  sources.topology_path = args.get("topology");
  auto node = load_node(sources);
  if (!node) return node.error();
  return std::move(node->topology);
}

// Root reads every user's tasks, anyone else their own.
discovery::TaskScope scope_of_caller() {
  discovery::TaskScope scope;
  if (::getuid() != 0) scope.uid = static_cast<int>(::getuid());
  return scope;
}

}  // namespace

std::string audit_metrics(const Args& args) {
  output::AuditMetrics metrics;
  const auto topology = audit_topology(args);
  if (!topology) return output::audit_metrics_text(metrics);
  const discovery::RunningTasks running =
      discovery::read_running_tasks(discovery::fs_root(), scope_of_caller());
  std::map<audit::Verdict, uint64_t> counts;
  for (const audit::StepAudit& step : audit::audit_tasks(*topology, running.tasks)) {
    ++metrics.steps;
    metrics.memory_remote += static_cast<uint64_t>(step.memory_remote);
    for (const auto& [verdict, count] : step.counts)
      counts[verdict] += static_cast<uint64_t>(count);
  }
  for (audit::Verdict verdict : audit::kVerdicts)
    metrics.tasks_by_verdict.emplace_back(audit::verdict_name(verdict), counts[verdict]);
  metrics.partly_read = static_cast<uint64_t>(running.partly_read);
  metrics.read = true;
  return output::audit_metrics_text(metrics);
}

int run_audit(const Args& args) {
  discovery::TaskScope scope = scope_of_caller();
  if (const auto job = args.get("job")) {
    if (job->empty() || job->find_first_not_of("0123456789_+") != std::string::npos)
      return fail("audit: --job: a job id, got '" + *job + "'");
    scope.job = *job;
  }
  const auto topology = audit_topology(args);
  if (!topology) return fail("audit: " + topology.error().message, kExitFailed);

  const discovery::RunningTasks running =
      discovery::read_running_tasks(discovery::fs_root(), scope);
  const std::vector<audit::StepAudit> steps = audit::audit_tasks(*topology, running.tasks);
  const bool with_tasks = args.has("tasks");
  if (args.has("json")) {
    output::Json list = output::Json::array();
    for (const audit::StepAudit& step : steps)
      list.push_back(step_json(step, with_tasks));
    std::cout << output::to_text(output::Json{{"steps", list},
                                              {"partly_read", running.partly_read},
                                              {"all_users", !scope.uid}})
              << "\n";
    return kExitOk;
  }
  if (steps.empty()) {
    std::printf("gpubind: no job step%s runs on this node\n", scope.uid ? " of yours" : "");
    return kExitOk;
  }
  for (const audit::StepAudit& step : steps) {
    std::printf("%s\n", audit::describe_step(step).c_str());
    if (!with_tasks) continue;
    for (const audit::TaskAudit& task : step.tasks)
      std::printf("%s\n", audit::describe_task(task).c_str());
  }
  if (running.partly_read > 0)
    std::printf("(%d task(s) partly read: a process exited while being read)\n",
                running.partly_read);
  return kExitOk;
}

}  // namespace gpubind::ctl
