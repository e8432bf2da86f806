// The tasks of the Slurm job steps running on this node, as the audit judges them
// (gpubind/audit.h), read from /proc under a root (HWLOC_FSROOT, or a test bed) and nothing else:
// no GPU device is opened, no process is changed. A step is found by its step daemon
// ("slurmstepd: [JOB.STEP]", whatever the task and proctrack plugins), its tasks are the
// processes that daemon started, and each task's processes are those descended from them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpubind/audit.h"

namespace gpubind::discovery {

struct TaskScope {
  std::optional<int> uid;          // only tasks whose processes run as this user
  std::optional<std::string> job;  // only this job's steps
};

struct RunningTasks {
  std::vector<audit::TaskFacts> tasks;
  // Tasks in scope whose files could not all be read (a process that exited meanwhile, an
  // environ another user's process keeps from us): they are judged on what was read.
  int partly_read = 0;
};

RunningTasks read_running_tasks(const std::string& root, const TaskScope& scope);

// The file formats, one reader each (proc(5)), exposed for their tests.
struct ProcStat {
  std::string comm;  // between the parentheses: may hold spaces and ')'
  int ppid = -1;
};
std::optional<ProcStat> parse_proc_stat(const std::string& text);
// "slurmstepd: [123.0]" (its title in /proc/PID/cmdline) -> {"123", "0"}; nullopt for any other.
std::optional<std::pair<std::string, std::string>> parse_stepd_title(const std::string& cmdline);
// Name:, Uid: (the real one) and Cpus_allowed_list: of /proc/PID/status and
// /proc/PID/task/TID/status.
struct ProcStatus {
  std::string name;
  int uid = -1;
  std::optional<CpuSet> cpus;
};
ProcStatus parse_proc_status(const std::string& text);
// The pages each line's N<node>=<pages> gives, summed per node.
std::map<int, int64_t> parse_numa_maps(const std::string& text);
// The NUL-separated NAME=value entries whose names `keep` accepts.
std::map<std::string, std::string> parse_environ(const std::string& text,
                                                 bool (*keep)(std::string_view name));

}  // namespace gpubind::discovery
