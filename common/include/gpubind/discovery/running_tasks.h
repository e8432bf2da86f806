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
#include "gpubind/topology.h"

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

// Each GPU's device nodes, from its driver's files: NVIDIA's /dev/nvidia<minor> (195:<minor>,
// /proc/driver/nvidia/gpus/<bus>/information), the DRM card and render nodes
// (/sys/bus/pci/devices/<bus>/drm/*/dev). GPUs without either are left out.
audit::GpuDevices read_gpu_devices(const std::string& root, const Topology& topology);

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
// Where the cgroup v1 devices controller is mounted (/proc/mounts: a "cgroup" file system
// with the "devices" option); nullopt where it is not (cgroup v2 alone).
std::optional<std::string> devices_mount_of(const std::string& proc_mounts);
// A process's cgroup in the devices hierarchy (/proc/PID/cgroup: "5:devices:/slurm/uid_0/...").
std::optional<std::string> devices_cgroup_of(const std::string& proc_cgroup);
// devices.list: "TYPE MAJOR:MINOR ACCESS" lines, '*' for any number.
std::vector<audit::DeviceRule> parse_devices_list(const std::string& text);
// The NUL-separated NAME=value entries whose names `keep` accepts.
std::map<std::string, std::string> parse_environ(const std::string& text,
                                                 bool (*keep)(std::string_view name));

}  // namespace gpubind::discovery
