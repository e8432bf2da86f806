// gpubindctl audit: every task of every Slurm job step running on this node, as it runs now,
// judged against gpubind's plan for it or the planner's rules (gpubind/audit.h). Reads /proc
// only (under HWLOC_FSROOT where set, as live discovery does); root sees every job, anyone else
// their own tasks alone.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>

#include "ctl.h"
#include "gpubind/api/binder_client.h"
#include "gpubind/audit.h"
#include "gpubind/audit_record.h"
#include "gpubind/discovery/fs_root.h"
#include "gpubind/discovery/running_tasks.h"
#include "gpubind/output/json.h"
#include "gpubind/output/metrics_format.h"
#include "gpubind/parse.h"
#include "gpubind/printable.h"

namespace gpubind::ctl {
namespace {

// The running tasks judged on `topology`, with the device numbers of its GPUs on this node.
std::vector<audit::StepAudit> audit_on(const Topology& topology,
                                       const discovery::RunningTasks& running) {
  return audit::audit_tasks(topology, running.tasks,
                            discovery::read_gpu_devices(discovery::fs_root(), topology));
}

output::Json task_json(const audit::TaskAudit& task) {
  output::Json gpus = output::Json::array();
  for (int g : task.gpus)
    gpus.push_back(g);
  output::Json allowed;  // null: not known
  if (task.gpus_allowed) {
    allowed = output::Json::array();
    for (int g : *task.gpus_allowed)
      allowed.push_back(g);
  }
  return {{"rank", task.task->rank},
          {"local_rank", task.task->local_rank},
          {"pid", task.task->pid},
          {"threads", task.task->threads.size()},
          {"verdict", audit::verdict_name(task.verdict)},
          {"reason", task.reason},
          {"cpus", task.cpus.to_list()},
          {"gpus", gpus},
          {"gpus_allowed", allowed},
          {"remote_memory",
           task.remote_memory >= 0 ? output::Json(task.remote_memory) : output::Json()},
          {"memory_remote", task.memory_remote}};
}

output::Json step_json(const audit::StepAudit& step, bool with_tasks) {
  output::Json verdicts = output::Json::object();
  for (const auto& [verdict, count] : step.counts)
    verdicts[audit::verdict_name(verdict)] = count;
  output::Json json{{"job", step.job_id},
                    {"step", step.step},
                    {"node", step.node},
                    {"uid", step.uid},
                    {"tasks", step.tasks.size()},
                    {"verdicts", verdicts},
                    {"memory_remote", step.memory_remote}};
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

// The node a step runs on, to Slurm: its tasks' SLURMD_NODENAME (slurmstepd sets it), else the
// short host name.
std::string node_of(const audit::StepAudit& step) {
  if (!step.node.empty()) return step.node;
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  const std::string name = host;
  return name.substr(0, name.find('.'));
}

// A job id as slurmstepd names its job: the number Slurm gave it (an array task's and a
// heterogeneous component's own, SLURM_JOB_ID), never "123_4" or "123+1".
bool is_job_id(const std::string& text) {
  return parse_whole_number(text, 1, 0xFFFFFFFFLL).has_value();
}

// The records name every user's jobs: a folder of root's nobody else may enter, made so where
// missing; any other is refused.
Status check_record_folder(const std::string& dir, bool make) {
  if (::getuid() != 0) return Error{"--record: root only (the records hold every user's jobs)"};
  if (make && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Error{"--record: cannot make '" + dir + "': " + std::strerror(errno)};
  struct stat folder {};
  if (::lstat(dir.c_str(), &folder) != 0 || !S_ISDIR(folder.st_mode) || folder.st_uid != 0 ||
      (folder.st_mode & 077) != 0)
    return Error{"--record: '" + dir +
                 "' must be a folder of root's that nobody else may enter (mode 0700): the "
                 "records name every user's jobs"};
  return Ok{};
}

// --record DIR: one file per job running here, named by its id, one line per step (its node,
// its verdicts): each run replaces the lines of the steps it reads and keeps the last line of
// steps that have ended, for the job's epilog. A record two days old is removed.
Status record_jobs(const std::string& dir, const std::vector<audit::StepAudit>& steps) {
  if (auto folder = check_record_folder(dir, true); !folder) return folder;
  std::map<std::string, std::vector<std::string>> lines;  // job -> its steps' lines
  for (const audit::StepAudit& step : steps)
    lines[step.job_id].push_back(audit::record_line(step, node_of(step)));
  for (const auto& [job, now] : lines) {
    const std::string path = dir + "/" + job;
    const std::string previous = discovery::read_small_file("", path).value_or("");
    if (auto written = write_trusted_file(path, audit::merge_record(previous, now)); !written)
      return written;
  }
  // Records of jobs long ended (an epilog that never ran): only files named as records are.
  const auto now = std::filesystem::file_time_type::clock::now();
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    std::error_code stat_error;
    const auto written = it->last_write_time(stat_error);
    if (!stat_error && is_job_id(it->path().filename().string()) &&
        it->is_regular_file(stat_error) && now - written > std::chrono::hours(48))
      std::filesystem::remove(it->path(), stat_error);
  }
  return Ok{};
}

// --admin-comment JOB --record DIR: the job's AdminComment as read on standard input (sacct's),
// with this node's record of the job merged in, on standard output (the epilog stores it).
int print_admin_comment(const std::string& job, const std::string& dir) {
  if (!is_job_id(job)) return fail("audit: --admin-comment: a job id, got '" + job + "'");
  if (auto folder = check_record_folder(dir, false); !folder)
    return fail("audit: " + folder.error().message, kExitFailed);
  const auto record = discovery::read_small_file("", dir + "/" + job);
  if (!record || record->empty())
    return fail("audit: --admin-comment: no record of job " + job + " in " + dir +
                    " (no step of it was audited on this node)",
                kExitNothing);
  std::string comment;
  char buffer[4096];
  while (comment.size() < 256 * 1024 && std::cin.read(buffer, sizeof buffer).gcount() > 0)
    comment.append(buffer, static_cast<size_t>(std::cin.gcount()));
  while (!comment.empty() && (comment.back() == '\n' || comment.back() == '\r'))
    comment.pop_back();
  std::printf("%s\n", audit::merge_admin_comment(comment, *record).c_str());
  return kExitOk;
}

// A variable of the task's record, as the task's own environment holds it (its user may have
// written anything there): printable, and cut.
std::string record_of(const audit::TaskFacts& task, const std::string& name) {
  const auto found = task.env.find(name);
  return found == task.env.end() || found->second.empty() ? "-" : excerpt(found->second, 256);
}

// What a task's threads run on now, CPU set by CPU set: "0-7 (3 threads), 0-63 (1)".
std::string threads_now(const audit::TaskFacts& task) {
  std::map<std::string, int> by_cpus;
  for (const audit::ThreadFacts& thread : task.threads)
    ++by_cpus[thread.cpus.to_list()];
  std::string text;
  for (const auto& [cpus, count] : by_cpus)
    text += (text.empty() ? "" : ", ") + cpus + " (" + std::to_string(count) +
            (count == 1 ? " thread)" : " threads)");
  return text;
}

}  // namespace

AuditMetrics audit_metrics(const Args& args) {
  output::AuditMetrics metrics;
  AuditMetrics result;
  const auto topology = audit_topology(args);
  if (!topology) {
    result.text = output::audit_metrics_text(metrics);
    return result;
  }
  const discovery::RunningTasks running =
      discovery::read_running_tasks(discovery::fs_root(), scope_of_caller());
  const std::vector<audit::StepAudit> steps = audit_on(*topology, running);
  std::map<audit::Verdict, uint64_t> counts;
  for (const audit::StepAudit& step : steps) {
    ++metrics.steps;
    metrics.memory_remote += static_cast<uint64_t>(step.memory_remote);
    for (const auto& [verdict, count] : step.counts)
      counts[verdict] += static_cast<uint64_t>(count);
  }
  for (audit::Verdict verdict : audit::kVerdicts)
    metrics.tasks_by_verdict.emplace_back(audit::verdict_name(verdict), counts[verdict]);
  metrics.partly_read = static_cast<uint64_t>(running.partly_read);
  metrics.read = true;
  result.text = output::audit_metrics_text(metrics);
  if (const auto dir = args.get("record")) result.recorded = record_jobs(*dir, steps);
  return result;
}

int run_explain_job(const Args& args) {
  const std::string job = *args.get("job");
  if (!is_job_id(job)) return fail("explain: --job: a job id, got '" + job + "'");
  discovery::TaskScope scope = scope_of_caller();
  scope.job = job;
  const auto topology = audit_topology(args);
  if (!topology) return fail("explain: " + topology.error().message, kExitFailed);
  const discovery::RunningTasks running =
      discovery::read_running_tasks(discovery::fs_root(), scope);
  const std::vector<audit::StepAudit> steps = audit_on(*topology, running);
  if (steps.empty())
    return fail("explain: job " + job + " has no step running on this node" +
                    (scope.uid ? " of yours" : ""),
                kExitFailed);
  if (args.has("json")) {
    output::Json list = output::Json::array();
    for (const audit::StepAudit& step : steps) {
      for (const audit::TaskAudit& task : step.tasks) {
        output::Json entry = task_json(task);
        entry["step"] = step.step;
        entry["planned"] = output::Json{{"cpus", record_of(*task.task, "GPUBIND_CPUS")},
                                        {"gpus", record_of(*task.task, "GPUBIND_GPUS")},
                                        {"gpu_pci", record_of(*task.task, "GPUBIND_GPU_PCI")},
                                        {"nic", record_of(*task.task, "GPUBIND_NIC")},
                                        {"numa", record_of(*task.task, "GPUBIND_NUMA")}};
        entry["now"] = threads_now(*task.task);
        list.push_back(entry);
      }
    }
    std::cout << output::to_text(output::Json{{"job", job}, {"tasks", list}}) << "\n";
    return kExitOk;
  }
  for (const audit::StepAudit& step : steps) {
    std::printf("%s\n", audit::describe_step(step).c_str());
    for (const audit::TaskAudit& task : step.tasks) {
      const audit::TaskFacts& t = *task.task;
      std::printf("  rank %s (pid %d)\n", t.rank >= 0 ? std::to_string(t.rank).c_str() : "-",
                  t.pid);
      if (record_of(t, "GPUBIND_BOUND") == "1") {
        std::printf("    planned: CPUs %s, GPUs %s (%s), NIC %s, memory on NUMA %s\n",
                    record_of(t, "GPUBIND_CPUS").c_str(), record_of(t, "GPUBIND_GPUS").c_str(),
                    record_of(t, "GPUBIND_GPU_PCI").c_str(), record_of(t, "GPUBIND_NIC").c_str(),
                    record_of(t, "GPUBIND_NUMA").c_str());
      } else {
        std::printf("    planned: not bound by gpubind (Slurm's GPUs %s)\n",
                    record_of(t, "SLURM_STEP_GPUS").c_str());
      }
      std::printf("    now:     %s\n", threads_now(t).c_str());
      std::printf("    verdict: %s: %s\n", audit::verdict_name(task.verdict), task.reason.c_str());
    }
  }
  return kExitOk;
}

int run_audit(const Args& args) {
  if (const auto job = args.get("admin-comment")) {
    const auto dir = args.get("record");
    if (!dir) return fail("audit: --admin-comment JOB reads the job's record: give --record DIR");
    return print_admin_comment(*job, *dir);
  }
  discovery::TaskScope scope = scope_of_caller();
  if (const auto job = args.get("job")) {
    if (!is_job_id(*job)) return fail("audit: --job: a job id, got '" + *job + "'");
    scope.job = *job;
  }
  const auto topology = audit_topology(args);
  if (!topology) return fail("audit: " + topology.error().message, kExitFailed);

  const discovery::RunningTasks running =
      discovery::read_running_tasks(discovery::fs_root(), scope);
  const std::vector<audit::StepAudit> steps = audit_on(*topology, running);
  if (const auto dir = args.get("record")) {
    if (auto recorded = record_jobs(*dir, steps); !recorded)
      return fail("audit: " + recorded.error().message, kExitFailed);
    return kExitOk;
  }
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
    std::printf(
        "(%d task(s) partly read: a process ended while read, or a file of it was "
        "unreadable)\n",
        running.partly_read);
  return kExitOk;
}

}  // namespace gpubind::ctl
