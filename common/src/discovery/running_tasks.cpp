#include "gpubind/discovery/running_tasks.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <map>
#include <set>
#include <sstream>

#include "gpubind/discovery/fs_root.h"
#include "gpubind/discovery/gpu_drivers.h"
#include "gpubind/parse.h"

namespace gpubind::discovery {
namespace {

constexpr size_t kEnvironLimit = 4 << 20;    // ARG_MAX-sized environments are read whole
constexpr size_t kNumaMapsLimit = 16 << 20;  // a process of many mappings

// What the audit reads of a task's environment: gpubind's record, Slurm's task identity, node name
// and GPU list, the GPU visibility variables.
bool audited_variable(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "SLURM_PROCID",         "SLURM_LOCALID",        "SLURM_STEP_GPUS",
      "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
      "ZE_AFFINITY_MASK",     "GPU_DEVICE_ORDINAL",   "SLURMD_NODENAME"};
  return name.substr(0, 8) == "GPUBIND_" ||
         std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

std::optional<int> number(std::string_view text) {
  const auto value = parse_whole_number(text, 0, 1 << 30);
  return value ? std::optional<int>(static_cast<int>(*value)) : std::nullopt;
}

struct Process {
  int ppid = -1;
  std::string comm;
};

// Every process of the node, by pid.
std::map<int, Process> all_processes(const std::string& root) {
  std::map<int, Process> processes;
  for (const std::string& name : list_folder(root, "/proc")) {
    const auto pid = number(name);
    if (!pid) continue;
    const auto text = read_small_file(root, "/proc/" + name + "/stat");
    const auto stat = text ? parse_proc_stat(*text) : std::nullopt;
    if (stat) processes[*pid] = {stat->ppid, stat->comm};
  }
  return processes;
}

// The processes below `top` (itself included), breadth first. The parents were read one by one
// while processes came and went: a reused pid may close a loop, which is followed once.
std::vector<int> descendants(int top, const std::multimap<int, int>& children) {
  std::vector<int> out{top};
  std::set<int> seen{top};
  for (size_t i = 0; i < out.size(); ++i) {
    auto [first, last] = children.equal_range(out[i]);
    for (auto it = first; it != last; ++it)
      if (seen.insert(it->second).second) out.push_back(it->second);
  }
  return out;
}

struct TaskRead {
  bool whole = true;    // every file in scope was read
  bool environ = true;  // its first process's environment was
};

// Reads one task: its identity from its first process, threads and memory from all of them.
TaskRead read_task(const std::string& root, int pid, const std::vector<int>& processes,
                   audit::TaskFacts& task) {
  TaskRead read;
  bool& whole = read.whole;
  const std::string dir = "/proc/" + std::to_string(pid);
  if (const auto environ = read_small_file(root, dir + "/environ", kEnvironLimit))
    task.env = parse_environ(*environ, audited_variable);
  else
    whole = read.environ = false;
  if (const auto it = task.env.find("SLURM_PROCID"); it != task.env.end())
    task.rank = number(it->second).value_or(-1);
  if (const auto it = task.env.find("SLURM_LOCALID"); it != task.env.end())
    task.local_rank = number(it->second).value_or(-1);
  for (int process : processes) {
    const std::string pdir = "/proc/" + std::to_string(process);
    const std::vector<std::string> tids = list_folder(root, pdir + "/task");
    if (tids.empty()) whole = false;  // it ended while the task was read
    for (const std::string& tid : tids) {
      const auto text = read_small_file(root, pdir + "/task/" + tid + "/status");
      const ProcStatus status = text ? parse_proc_status(*text) : ProcStatus{};
      if (!status.cpus) {
        whole = false;
        continue;
      }
      task.threads.push_back({process, number(tid).value_or(0), status.name, *status.cpus});
    }
    if (const auto maps = read_small_file(root, pdir + "/numa_maps", kNumaMapsLimit)) {
      for (const auto& [node, pages] : parse_numa_maps(*maps))
        task.pages_per_numa[node] += pages;
    }
  }
  return read;
}

}  // namespace

std::optional<ProcStat> parse_proc_stat(const std::string& text) {
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcStat stat;
  stat.comm = text.substr(open + 1, close - open - 1);
  // After the name: the state, then the parent's pid.
  std::istringstream rest(text.substr(close + 1));
  std::string state, ppid;
  if (!(rest >> state >> ppid)) return std::nullopt;
  const auto parent = number(ppid);
  if (!parent) return std::nullopt;
  stat.ppid = *parent;
  return stat;
}

std::optional<std::pair<std::string, std::string>> parse_stepd_title(const std::string& cmdline) {
  // setproctitle writes the title over argv: "slurmstepd: [123.0]", NUL-padded.
  const std::string title = cmdline.substr(0, cmdline.find('\0'));
  const std::string prefix = "slurmstepd: [";
  if (title.rfind(prefix, 0) != 0 || title.find(']') == std::string::npos) return std::nullopt;
  const std::string id = title.substr(prefix.size(), title.find(']') - prefix.size());
  const size_t dot = id.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == id.size()) return std::nullopt;
  const std::string job = id.substr(0, dot), step = id.substr(dot + 1);
  const auto plain = [](const std::string& word) {
    return std::all_of(word.begin(), word.end(), [](unsigned char c) {
      return std::isalnum(c) != 0 || c == '+' || c == '_';
    });
  };
  if (!plain(job) || !plain(step)) return std::nullopt;
  return std::pair{job, step};
}

ProcStatus parse_proc_status(const std::string& text) {
  ProcStatus status;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    const std::string value = trimmed(line.substr(colon + 1));
    if (key == "Name") {
      status.name = value;
    } else if (key == "Uid") {
      status.uid = number(value.substr(0, value.find_first_of(" \t"))).value_or(-1);
    } else if (key == "Cpus_allowed_list") {
      auto cpus = CpuSet::parse_list(value);
      if (cpus) status.cpus = std::move(*cpus);
    }
  }
  return status;
}

std::map<int, int64_t> parse_numa_maps(const std::string& text) {
  std::map<int, int64_t> pages;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    // N<node>= counts pages of the mapping's own size (kernelpagesize_kB: huge pages on hugetlb
    // and THP mappings): counted here in 4 KiB pages, so shares weigh bytes.
    std::map<int, int64_t> counts;
    int64_t scale = 1;
    std::istringstream words(line);
    for (std::string word; words >> word;) {
      const size_t equals = word.find('=');
      if (equals == std::string::npos) continue;
      const std::string_view key = std::string_view(word).substr(0, equals);
      const std::string_view value = std::string_view(word).substr(equals + 1);
      if (key == "kernelpagesize_kB") {
        scale =
            std::max<int64_t>(1, parse_whole_number(value, 0, int64_t{1} << 30).value_or(4) / 4);
      } else if (key.size() >= 2 && key[0] == 'N') {
        const auto node = number(key.substr(1));
        const auto count = parse_whole_number(value, 0, int64_t{1} << 40);
        if (node && count) counts[*node] += *count;
      }
    }
    for (const auto& [node, count] : counts)
      pages[node] += count * scale;
  }
  return pages;
}

std::map<std::string, std::string> parse_environ(const std::string& text,
                                                 bool (*keep)(std::string_view name)) {
  std::map<std::string, std::string> env;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\0', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view entry(text.data() + at, end - at);
    const size_t equals = entry.find('=');
    if (equals != std::string_view::npos && keep(entry.substr(0, equals)))
      env.emplace(std::string(entry.substr(0, equals)), std::string(entry.substr(equals + 1)));
    at = end + 1;
  }
  return env;
}

// The rules of `pid`'s device cgroup under the devices controller at `mount`; nullopt where
// they cannot be read.
std::optional<std::vector<audit::DeviceRule>> device_rules_of(const std::string& root,
                                                              const std::string& mount, int pid) {
  const auto cgroups = read_small_file(root, "/proc/" + std::to_string(pid) + "/cgroup");
  const auto path = cgroups ? devices_cgroup_of(*cgroups) : std::nullopt;
  if (!path || path->find("..") != std::string::npos) return std::nullopt;
  const auto list = read_small_file(root, mount + *path + "/devices.list");
  if (!list) return std::nullopt;
  return parse_devices_list(*list);
}

RunningTasks read_running_tasks(const std::string& root, const TaskScope& scope) {
  RunningTasks out;
  const auto mounts = read_small_file(root, "/proc/mounts", 1 << 20);
  const std::optional<std::string> devices_mount =
      mounts ? devices_mount_of(*mounts) : std::nullopt;
  const std::map<int, Process> processes = all_processes(root);
  std::multimap<int, int> children;
  for (const auto& [pid, process] : processes)
    children.emplace(process.ppid, pid);
  for (const auto& [stepd, process] : processes) {
    if (process.comm != "slurmstepd") continue;
    const auto cmdline = read_small_file(root, "/proc/" + std::to_string(stepd) + "/cmdline");
    const auto id = cmdline ? parse_stepd_title(*cmdline) : std::nullopt;
    // The extern step holds no task of the job's (its child is slurmstepd's own sleep).
    if (!id || id->second == "extern") continue;
    if (scope.job && *scope.job != id->first) continue;
    auto [first, last] = children.equal_range(stepd);
    for (auto it = first; it != last; ++it) {
      const int pid = it->second;
      // slurmstepd's own helpers (a forked slurmstepd) are no task of the job's.
      if (processes.at(pid).comm == "slurmstepd") continue;
      const auto status_text = read_small_file(root, "/proc/" + std::to_string(pid) + "/status");
      if (!status_text) continue;  // gone
      const ProcStatus status = parse_proc_status(*status_text);
      // Another user's task is not read at all: nothing of it is shown or counted.
      if (scope.uid && status.uid != *scope.uid) continue;
      audit::TaskFacts task;
      task.job_id = id->first;
      task.step = id->second;
      task.uid = status.uid;
      task.pid = pid;
      const TaskRead read = read_task(root, pid, descendants(pid, children), task);
      // Slurm gives every task (the batch script too) its rank: a child without one, whose
      // environment could be read, is slurmstepd's own. One that ended meanwhile (or a fork
      // of slurmstepd's that became the task's program) is no task to judge.
      if (read.environ && !task.env.count("SLURM_PROCID")) continue;
      // No thread read: it ended meanwhile; judging it would judge nothing.
      if (task.threads.empty()) continue;
      if (!read.environ && !read_small_file(root, "/proc/" + std::to_string(pid) + "/status"))
        continue;
      if (devices_mount) task.device_rules = device_rules_of(root, *devices_mount, pid);
      if (!read.whole) ++out.partly_read;
      out.tasks.push_back(std::move(task));
    }
  }
  return out;
}

std::optional<std::string> devices_mount_of(const std::string& proc_mounts) {
  std::istringstream lines(proc_mounts);
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string> words = split_words(line);
    if (words.size() < 4 || words[2] != "cgroup") continue;
    std::istringstream options(words[3]);
    for (std::string option; std::getline(options, option, ',');)
      if (option == "devices") return words[1];
  }
  return std::nullopt;
}

std::optional<std::string> devices_cgroup_of(const std::string& proc_cgroup) {
  std::istringstream lines(proc_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // "ID:CONTROLLERS:PATH", the controllers a comma list.
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    std::istringstream controllers(line.substr(first + 1, second - first - 1));
    for (std::string controller; std::getline(controllers, controller, ',');)
      if (controller == "devices") return line.substr(second + 1);
  }
  return std::nullopt;
}

std::vector<audit::DeviceRule> parse_devices_list(const std::string& text) {
  std::vector<audit::DeviceRule> rules;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string> words = split_words(line);
    if (words.size() < 2 || words[0].size() != 1 ||
        std::string_view("abc").find(words[0][0]) == std::string_view::npos)
      continue;
    const size_t colon = words[1].find(':');
    if (colon == std::string::npos) continue;
    const auto part = [](std::string_view text) -> std::optional<int> {
      if (text == "*") return -1;
      return number(text);
    };
    const auto major = part(std::string_view(words[1]).substr(0, colon));
    const auto minor = part(std::string_view(words[1]).substr(colon + 1));
    if (major && minor) rules.push_back({words[0][0], *major, *minor});
  }
  return rules;
}

audit::GpuDevices read_gpu_devices(const std::string& root, const Topology& topology) {
  audit::GpuDevices devices;
  for (const Gpu& gpu : topology.gpus) {
    if (gpu.pci_bus_id.empty()) continue;
    const std::string bus = canonical_bus_id(gpu.pci_bus_id);
    std::vector<audit::DeviceNumber>& numbers = devices[gpu.index];
    if (const auto nvidia = read_nvidia_gpu_info(root, bus); nvidia && nvidia->minor >= 0)
      numbers.push_back({195, nvidia->minor});  // the NVIDIA driver's fixed major
    const std::string drm = "/sys/bus/pci/devices/" + bus + "/drm";
    for (const std::string& node : list_folder(root, drm)) {
      const auto dev = read_small_file(root, drm + "/" + node + "/dev");
      const std::string text = dev ? trimmed(*dev) : "";
      const size_t colon = text.find(':');
      const auto major = colon == std::string::npos ? std::nullopt : number(text.substr(0, colon));
      const auto minor = colon == std::string::npos ? std::nullopt : number(text.substr(colon + 1));
      if (major && minor) numbers.push_back({*major, *minor});
    }
    if (numbers.empty()) devices.erase(gpu.index);
  }
  return devices;
}

}  // namespace gpubind::discovery
