#include "gpubind/audit.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <tuple>

#include "gpubind/parse.h"
#include "gpubind/printable.h"

namespace gpubind::audit {
namespace {

// Below this many resident pages (16 MiB of 4 KiB pages) where memory lies says nothing.
constexpr int64_t kMinPagesToJudge = 4096;
// Threads named in a reason; the rest are counted.
constexpr size_t kThreadsNamed = 3;

// The domains a set of CPUs touches, by the cores that hold them.
struct Domains {
  std::set<int> l3s, numas;  // L3 indices; NUMA nodes by their Linux numbers
};

Domains domains_of(const Topology& topology, const CpuSet& cpus) {
  Domains out;
  for (const Core& core : topology.cores) {
    const bool touched =
        std::any_of(core.pus.begin(), core.pus.end(), [&](int pu) { return cpus.test(pu); });
    if (!touched) continue;
    if (core.l3_index >= 0) out.l3s.insert(core.l3_index);
    out.numas.insert(topology.numa_os_number(core.numa_index));
  }
  return out;
}

// The most PUs one L3 (else NUMA node) holds: how many CPUs fit in one domain.
int pus_per_domain(const Topology& topology, bool by_l3) {
  std::map<int, int> counts;
  for (const Core& core : topology.cores)
    counts[by_l3 ? core.l3_index : core.numa_index] += static_cast<int>(core.pus.size());
  int most = 1;
  for (const auto& [domain, count] : counts)
    most = std::max(most, count);
  return most;
}

// Whether `cpus` spread over more L3s (NUMA nodes where the node has no L3s) than they need.
bool straddles(const Topology& topology, const CpuSet& cpus, int* spread) {
  const Domains d = domains_of(topology, cpus);
  const bool by_l3 = !d.l3s.empty();
  const int touched = static_cast<int>(by_l3 ? d.l3s.size() : d.numas.size());
  const int per = pus_per_domain(topology, by_l3);
  const int needed = (cpus.count() + per - 1) / per;
  if (spread) *spread = touched;
  return touched > std::max(needed, 1);
}

CpuSet gpu_domain(const Topology& topology, const std::vector<int>& gpus) {
  CpuSet near;
  for (int g : gpus) {
    if (g >= 0 && g < static_cast<int>(topology.gpus.size()) &&
        locality_known(topology.gpus[g].locality))
      near |= topology.gpus[g].locality.cpus;
  }
  return near;
}

std::string env_or(const TaskFacts& task, const std::string& name) {
  const auto found = task.env.find(name);
  return found == task.env.end() ? "" : found->second;
}

// The task's node GPUs: those gpubind recorded by bus id (every partition of a partitioned
// card: they share one), else Slurm's SLURM_STEP_GPUS (node indices; under ConstrainDevices a
// narrowed task's names the step's first GPUs).
std::vector<int> gpus_of(const Topology& topology, const TaskFacts& task) {
  std::set<int> gpus;
  std::istringstream pcis(env_or(task, "GPUBIND_GPU_PCI"));
  for (std::string pci; std::getline(pcis, pci, ',');) {
    if (pci.empty()) continue;
    const std::string wanted = canonical_bus_id(pci);
    for (const Gpu& gpu : topology.gpus)
      if (!gpu.pci_bus_id.empty() && canonical_bus_id(gpu.pci_bus_id) == wanted)
        gpus.insert(gpu.index);
  }
  if (gpus.empty()) {
    // Index lists read like CPU lists ("0,2", "0-3").
    const auto indices = CpuSet::parse_list(env_or(task, "SLURM_STEP_GPUS"));
    for (int g : indices ? indices->to_vector() : std::vector<int>{})
      if (g < static_cast<int>(topology.gpus.size())) gpus.insert(g);
  }
  return {gpus.begin(), gpus.end()};
}

bool bound_by_gpubind(const TaskFacts& task) {
  return env_or(task, "GPUBIND_BOUND") == "1";
}

std::string task_name(const TaskFacts& task) {
  return "job " + task.job_id + " step " + task.step +
         (task.rank >= 0 ? " rank " + std::to_string(task.rank) : "");
}

// What every task is judged against, read once: the node, every task running on it (with the
// union of its threads' CPUs) and its GPUs' device nodes.
struct Scene {
  const Topology& topology;
  const std::vector<TaskFacts>& all;
  const GpuDevices& gpu_devices;
  std::map<const TaskFacts*, CpuSet> cpus_of;
  std::set<int> numas_with_cpus;  // the NUMA nodes (Linux numbers) that have CPUs

  Scene(const Topology& t, const std::vector<TaskFacts>& tasks, const GpuDevices& devices)
      : topology(t), all(tasks), gpu_devices(devices) {
    for (const TaskFacts& task : tasks) {
      CpuSet cpus;
      for (const ThreadFacts& thread : task.threads)
        cpus |= thread.cpus;
      cpus_of[&task] = cpus;
    }
    numas_with_cpus = domains_of(t, t.all_pus()).numas;
  }
};

// Other tasks whose CPUs meet `cpus`, named.
std::vector<std::string> sharing_with(const Scene& scene, const TaskFacts& self,
                                      const CpuSet& cpus) {
  std::vector<std::string> names;
  for (const TaskFacts& other : scene.all) {
    if (&other == &self) continue;
    if (cpus.intersects(scene.cpus_of.at(&other))) names.push_back(task_name(other));
  }
  return names;
}

std::string listed(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < kThreadsNamed; ++i)
    text += (i ? ", " : "") + names[i];
  if (names.size() > kThreadsNamed)
    text += " and " + std::to_string(names.size() - kThreadsNamed) + " more";
  return text;
}

// What running on `cpus` costs a task with `gpus`: off its GPUs' domain, across domains, on
// another task's cores; each cost said in words.
struct Costs {
  bool locality_known = false;  // its GPUs' domain is known
  bool far = false;             // none of the CPUs in it
  bool straddling = false;      // over more domains than its CPUs need
  bool overlapping = false;     // on cores another task runs on
  std::vector<std::string> said;
};

Costs costs_of(const Scene& scene, const TaskFacts& task, const CpuSet& cpus,
               const std::vector<int>& gpus) {
  Costs costs;
  const CpuSet near = gpu_domain(scene.topology, gpus);
  costs.locality_known = !near.empty();
  if (costs.locality_known) {
    const int off = cpus.minus(near).count();
    costs.far = off == cpus.count();
    if (costs.far)
      costs.said.push_back("none of its CPUs is next to its GPU");
    else if (off > 0)
      costs.said.push_back(std::to_string(off) + " of its " + std::to_string(cpus.count()) +
                           " CPUs are off its GPU's domain");
  }
  int spread = 0;
  costs.straddling = straddles(scene.topology, cpus, &spread);
  if (costs.straddling)
    costs.said.push_back("spread over " + std::to_string(spread) + " domains (L3 or NUMA)");
  const std::vector<std::string> others = sharing_with(scene, task, cpus);
  costs.overlapping = !others.empty();
  if (costs.overlapping) costs.said.push_back("shares cores with " + listed(others));
  return costs;
}

std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string text;
  for (const std::string& part : parts)
    text += (text.empty() ? "" : separator) + part;
  return text;
}

// Remote: on a NUMA node with CPUs other than those of the task's CPUs. A node without CPUs
// (a GPU's memory as a NUMA node: GH200, MI300A; CXL memory) is where the task's GPU or the
// site put that memory on purpose: counted in neither share.
void judge_memory(const Scene& scene, const TaskFacts& task, TaskAudit& out) {
  int64_t total = 0, remote = 0;
  const std::set<int> local = domains_of(scene.topology, out.cpus).numas;
  for (const auto& [node, pages] : task.pages_per_numa) {
    if (!scene.numas_with_cpus.count(node)) continue;
    total += pages;
    if (!local.count(node)) remote += pages;
  }
  if (total < kMinPagesToJudge) return;
  out.remote_memory = static_cast<double>(remote) / static_cast<double>(total);
  out.memory_remote = out.remote_memory > 0.5;
}

// Judged on `gpus`: against its record where gpubind bound it, else the planner's rules.
TaskAudit judge_binding(const Scene& scene, const TaskFacts& task, const std::vector<int>& gpus) {
  TaskAudit out;
  out.task = &task;
  out.cpus = scene.cpus_of.at(&task);
  out.gpus = gpus;
  judge_memory(scene, task, out);
  if (bound_by_gpubind(task)) {
    const auto planned = CpuSet::parse_list(env_or(task, "GPUBIND_CPUS"));
    if (!planned || planned->empty()) {
      out.verdict = Verdict::kUnknown;
      out.reason = "bound by gpubind, but its record names no CPUs (GPUBIND_CPUS)";
      return out;
    }
    std::vector<std::string> moved;
    CpuSet moved_cpus;
    for (const ThreadFacts& thread : task.threads) {
      if (thread.cpus.is_subset_of(*planned)) continue;
      moved.push_back("thread " + std::to_string(thread.tid) + " (" + excerpt(thread.name, 32) +
                      ") on CPUs " + thread.cpus.to_list());
      moved_cpus |= thread.cpus;
    }
    if (moved.empty()) {
      out.verdict = Verdict::kAsPlanned;
      out.reason = "every thread on its planned CPUs " + planned->to_list();
      return out;
    }
    out.verdict = Verdict::kRepinned;
    out.reason = "planned on CPUs " + planned->to_list() + "; " + listed(moved);
    const Costs costs = costs_of(scene, task, moved_cpus, out.gpus);
    if (!costs.said.empty()) out.reason += ": " + joined(costs.said, ", ");
    return out;
  }
  if (out.gpus.empty()) {
    out.verdict = Verdict::kUnknown;
    out.reason = "not bound by gpubind, on CPUs " + out.cpus.to_list() + "; no GPU known";
    return out;
  }
  const Costs costs = costs_of(scene, task, out.cpus, out.gpus);
  if (costs.far)
    out.verdict = Verdict::kUnboundFar;
  else if (costs.straddling)
    out.verdict = Verdict::kUnboundStraddling;
  else if (costs.overlapping)
    out.verdict = Verdict::kUnboundOverlapping;
  else if (!costs.locality_known)
    out.verdict = Verdict::kUnknown;  // nearness is not known, so never claimed
  else
    out.verdict = Verdict::kUnboundNear;
  const char* fine = costs.locality_known ? ", next to its GPU" : ", its GPUs' locality unknown";
  out.reason = "not bound by gpubind, on CPUs " + out.cpus.to_list() +
               (costs.said.empty() ? std::string(fine) : ": " + joined(costs.said, ", "));
  return out;
}

// What its device cgroup lets it open, where known: its GPUs where its variables name none (a
// task under ConstrainDevices may open its own alone), and any GPU of its own it may not open.
TaskAudit judge(const Scene& scene, const TaskFacts& task) {
  const GpuDevices& gpu_devices = scene.gpu_devices;
  std::vector<int> gpus = gpus_of(scene.topology, task);
  std::optional<std::vector<int>> allowed;
  if (task.device_rules && !gpu_devices.empty()) {
    allowed = gpus_allowed_by(*task.device_rules, gpu_devices);
    if (gpus.empty() && allowed->size() < gpu_devices.size()) gpus = *allowed;
  }
  TaskAudit out = judge_binding(scene, task, gpus);
  out.gpus_allowed = allowed;
  if (!allowed) return out;
  std::vector<std::string> barred;
  for (int g : out.gpus)
    if (gpu_devices.count(g) && !std::binary_search(allowed->begin(), allowed->end(), g))
      barred.push_back(std::to_string(g));
  if (!barred.empty())
    out.reason += std::string("; its device cgroup keeps it from its GPU") +
                  (barred.size() > 1 ? "s " : " ") + joined(barred, ",");
  return out;
}

}  // namespace

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAsPlanned:
      return "as-planned";
    case Verdict::kRepinned:
      return "re-pinned";
    case Verdict::kUnboundNear:
      return "unbound-near";
    case Verdict::kUnboundFar:
      return "unbound-far";
    case Verdict::kUnboundStraddling:
      return "unbound-straddling";
    case Verdict::kUnboundOverlapping:
      return "unbound-overlapping";
    case Verdict::kUnknown:
      break;
  }
  return "unknown";
}

std::vector<int> gpus_allowed_by(const std::vector<DeviceRule>& rules, const GpuDevices& devices) {
  const auto allows = [&](const DeviceNumber& number) {
    return std::any_of(rules.begin(), rules.end(), [&](const DeviceRule& rule) {
      return rule.type == 'a' ||
             (rule.type == 'c' && (rule.major < 0 || rule.major == number.major) &&
              (rule.minor < 0 || rule.minor == number.minor));
    });
  };
  std::vector<int> allowed;
  for (const auto& [gpu, numbers] : devices)
    if (std::any_of(numbers.begin(), numbers.end(), allows)) allowed.push_back(gpu);
  return allowed;
}

std::vector<StepAudit> audit_tasks(const Topology& topology, const std::vector<TaskFacts>& tasks,
                                   const GpuDevices& gpu_devices) {
  const Scene scene(topology, tasks, gpu_devices);
  // A step's tasks on one node: one step daemon each (several slurmd on one machine run a
  // step's tasks of each node under its own).
  std::map<std::tuple<std::string, std::string, std::string>, StepAudit> steps;
  for (const TaskFacts& task : tasks) {
    const std::string node = env_or(task, "SLURMD_NODENAME");
    StepAudit& step = steps[{task.job_id, task.step, node}];
    step.job_id = task.job_id;
    step.step = task.step;
    step.node = node;
    step.uid = task.uid;
    step.tasks.push_back(judge(scene, task));
  }
  std::vector<StepAudit> out;
  for (auto& [key, step] : steps) {
    std::sort(step.tasks.begin(), step.tasks.end(), [](const TaskAudit& a, const TaskAudit& b) {
      return std::tie(a.task->rank, a.task->pid) < std::tie(b.task->rank, b.task->pid);
    });
    for (const TaskAudit& task : step.tasks) {
      ++step.counts[task.verdict];
      if (task.memory_remote) ++step.memory_remote;
    }
    out.push_back(std::move(step));
  }
  // Jobs in numeric order where their ids are numbers.
  std::sort(out.begin(), out.end(), [](const StepAudit& a, const StepAudit& b) {
    return std::make_tuple(a.job_id.size(), a.job_id, a.step, a.node) <
           std::make_tuple(b.job_id.size(), b.job_id, b.step, b.node);
  });
  return out;
}

std::string describe_step(const StepAudit& step) {
  std::string text = "job " + step.job_id + " step " + step.step + ": " +
                     std::to_string(step.tasks.size()) + " task" +
                     (step.tasks.size() == 1 ? "" : "s") + ":";
  bool first = true;
  for (const auto& [verdict, count] : step.counts) {
    text += std::string(first ? " " : ", ") + std::to_string(count) + " " + verdict_name(verdict);
    first = false;
  }
  if (step.memory_remote > 0)
    text += "; " + std::to_string(step.memory_remote) + " with memory mostly remote";
  return text;
}

std::string describe_task(const TaskAudit& task) {
  std::string text = "  rank " + (task.task->rank >= 0 ? std::to_string(task.task->rank) : "-") +
                     " (pid " + std::to_string(task.task->pid) +
                     "): " + verdict_name(task.verdict) + ": " + task.reason;
  if (task.remote_memory >= 0) {
    char share[32];
    std::snprintf(share, sizeof share, "%.0f%%", 100 * task.remote_memory);
    text += std::string("; memory ") + share + " remote" + (task.memory_remote ? " (mostly)" : "");
  }
  return text;
}

}  // namespace gpubind::audit
