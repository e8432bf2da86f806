#include "gpubind/output/explain_format.h"

#include <algorithm>
#include <cctype>

#include "gpubind/output/json.h"

namespace gpubind {
namespace {

using output::Json;

// One reason of a task, for both renderings: what it is about and the sentence.
struct Line {
  std::string topic;    // "GPU", "cores", "NIC", "memory", "env", "not met"
  std::string subject;  // what the line is about: a PCI id, a CPU list, a NIC, a variable
  std::string text;
};

std::string nearness_words(Nearness nearness) {
  switch (nearness) {
    case Nearness::kPciSwitch:
      return "behind the same PCIe switch";
    case Nearness::kL3:
      return "in the same L3";
    case Nearness::kNuma:
      return "on the same NUMA node";
    case Nearness::kPackage:
      return "on the same package";
    case Nearness::kMachine:
      return "on another package";
    case Nearness::kNoAnchor:
      return "with nothing to be near";
    case Nearness::kUnknown:
      return "nearness unknown (the node reports no locality for it)";
  }
  return "";
}

std::string plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string domain_words(const Locality& locality) {
  return describe_locality(locality) + " (CPUs " + locality.cpus.to_list() + ")";
}

// "FILE:LINE" of the `index`-th `field` of the policy, "FILE" where the line is not known, and
// "built-in defaults" for a group the file leaves to them.
std::string policy_place(const PlanExplanation& e, const PolicyLines& lines,
                         const std::string& field, int index = 0) {
  if (e.policy_source.rfind('(', 0) == 0) return "built-in defaults";
  if (lines.empty()) return e.policy_source;
  const auto found = lines.find(field);
  if (found == lines.end()) return "built-in defaults";
  if (index < 0 || index >= static_cast<int>(found->second.size())) return e.policy_source;
  return e.policy_source + ":" + std::to_string(found->second[index]);
}

std::string order_words(const PlanExplanation& e, const PolicyLines& lines) {
  const std::string order = std::string("order=") + order_name(e.order);
  switch (e.order_from) {
    case OrderFrom::kRequest:
      return order + ", as the step asked";
    case OrderFrom::kPolicy:
      return order + ", the site policy's (" + policy_place(e, lines, "order") + ")";
    case OrderFrom::kNoGpus:
      return order + ": the step has no GPUs, so tasks follow core order";
    case OrderFrom::kFixedGpus:
      return order + ": Slurm gave each task its GPUs, so cores follow them";
    case OrderFrom::kFixedCpus:
      return order + ": each task's CPUs were bound before planning, so GPUs follow them";
  }
  return order;
}

const char* order_from_name(OrderFrom from) {
  switch (from) {
    case OrderFrom::kRequest:
      return "request";
    case OrderFrom::kPolicy:
      return "policy";
    case OrderFrom::kNoGpus:
      return "no-gpus";
    case OrderFrom::kFixedGpus:
      return "fixed-gpus";
    case OrderFrom::kFixedCpus:
      return "fixed-cpus";
  }
  return "policy";
}

const TaskGpu* task_gpu(const TaskPlan& task, int step_index) {
  for (const TaskGpu& gpu : task.gpus)
    if (gpu.step_index == step_index) return &gpu;
  return nullptr;
}

// The GPU as the task's runtime numbers it, and where it sits: "2 (0000:c9:00.0)".
std::string gpu_name(const TaskGpu& gpu) {
  std::string name = gpu.token;
  if (!gpu.pci.empty()) {
    name += " (" + gpu.pci;
    if (gpu.tile_index >= 0) name += " tile " + std::to_string(gpu.tile_index);
    name += ")";
  }
  return name;
}

// Cores taken by nearness to the task's `anchor` ("its own cores", "its anchor"): the farthest
// only when nothing nearer was free; a task with nothing to be near (no GPU) says so.
std::string taken_words(Nearness nearness, const std::string& anchor) {
  if (nearness == Nearness::kNoAnchor) return "the task having no GPU to be near";
  return nearness_words(nearness) +
         (nearness == Nearness::kMachine ? " (nothing nearer was free)" : "") + " as " + anchor;
}

std::string gpu_text(const Topology& topology, const PlanExplanation& e, const PolicyLines& lines,
                     const TaskGpu& gpu, const GpuChoice& choice) {
  std::string text;
  const bool located = gpu.node_index < 0 ||
                       locality_known(topology.gpus[static_cast<size_t>(gpu.node_index)].locality);
  switch (choice.reason) {
    case GpuReason::kRankOrder:
      text = order_words(e, lines) + ": consecutive tasks take the step's GPUs in turn";
      if (choice.chunk > 1) {
        text += ", " + std::to_string(choice.chunk) +
                (located ? " GPUs that sit together per task"
                         : " GPUs per task (the node reports no locality to group them by)");
      }
      break;
    case GpuReason::kCoreShare:
      text =
          order_words(e, lines) + ": its domain holds " +
          (choice.share_permille >= 1000 ? std::string("all")
                                         : std::to_string((choice.share_permille + 5) / 10) + "%") +
          " of the task's cores, so it goes to this task before one that merely lies near it";
      break;
    case GpuReason::kNearest:
      text = order_words(e, lines) +
             ": none of the task's cores lie in the domain of a GPU with room; this one is the " +
             "nearest with room, " + nearness_words(choice.nearness) + " as its cores";
      break;
    case GpuReason::kLeastLoaded:
      text = order_words(e, lines) + ": every GPU it lacked was full; the least loaded one";
      break;
    case GpuReason::kUnplaced:
      text = "the step names it by a token this node cannot place (" + gpu.token +
             "): handed out in step order, cores not placed near it";
      break;
    case GpuReason::kFixed:
      text = "given to the task before planning (Slurm's per-task GPU binding): kept as given";
      break;
  }
  if (gpu.tile_index >= 0) {
    text += "; its tile " + std::to_string(gpu.tile_index) + " alone";
  } else if (choice.sharers > 1) {
    text += "; shared by " + plural(choice.sharers, "task");
  }
  return text;
}

std::string core_text(const Topology& topology, const CoreGrant& grant) {
  const std::string count = plural(grant.cpus.count(), "CPU");
  switch (grant.source) {
    case CoreSource::kGpuDomain:
      if (grant.domain_gpu >= 0 && grant.domain_gpu < static_cast<int>(topology.gpus.size())) {
        return "its GPU's own domain, " + domain_words(topology.gpus[grant.domain_gpu].locality) +
               ", split among the tasks of that GPU (" + count + ")";
      }
      return "its GPU's own domain (" + count + ")";
    case CoreSource::kNodeShare:
      return "its share of the node's usable cores, in core order (" + count + ")";
    case CoreSource::kSpare:
      return "spare cores no task's GPU domain gave out, nearest first over all tasks: " +
             taken_words(grant.nearness, "its own") + " (" + count + ")";
    case CoreSource::kSpill:
      return "cpus-per-task beyond its domain's share, from the nearest free L3: " +
             taken_words(grant.nearness, "its own") + " (" + count + ")";
    case CoreSource::kFromRicher:
      return "it had none left: the task holding most cores gave up one, " +
             taken_words(grant.nearness, "its anchor") + " (" + count + ")";
    case CoreSource::kShared:
      return "more tasks than hardware threads: a core shared with other tasks, " +
             std::string(grant.nearness == Nearness::kNoAnchor ? "the least loaded, " : "") +
             taken_words(grant.nearness, "its anchor") + " (" + count + ")";
    case CoreSource::kFixed:
      return "bound before planning (an explicit CPU binding): kept as given (" + count + ")";
  }
  return count;
}

std::string nic_text(const Topology& topology, const TaskPlan& task, const NicChoice& choice) {
  std::string text;
  if (const TaskGpu* gpu = task_gpu(task, choice.gpu_step_index)) {
    text = choice.nearness == Nearness::kUnknown
               ? "for its GPU " + gpu_name(*gpu) + ": " + nearness_words(choice.nearness)
               : "nearest to its GPU " + gpu_name(*gpu) + ": " + nearness_words(choice.nearness);
    if (choice.nearness == Nearness::kMachine) text += ", no NIC lies nearer";
    if (choice.equally_near > 1) {
      text += " (" + std::to_string(choice.equally_near) +
              (choice.nearness == Nearness::kUnknown ? " NICs alike" : " NICs equally near") +
              "; the node's GPUs take them in turn)";
    }
  } else {
    text = "the task has no GPU: the least used NIC nearest its cores, " +
           nearness_words(choice.nearness);
  }
  const Nic& nic = topology.nics[choice.nic_index];
  text += " (" + std::string(nic_kind_name(nic.kind)) + ")";
  if (choice.leads && task.nic_indices.size() > 1) text += "; it leads the task's NICs";
  return text;
}

std::string env_text(const PlanExplanation& e, const PolicyLines& lines, const EnvRule& rule) {
  if (rule.group == "gpubind") return "gpubind's own record of the binding";
  if (rule.group == "omp_places") return "omp_places is on (policy or --omp)";
  if (rule.group == "mixed-vendor")
    return "a node with NVIDIA and AMD GPUs: HIP must not read NVIDIA's list";
  std::string text = rule.group + "[" + std::to_string(rule.index) + "] \"" + rule.value_template +
                     "\"" + (rule.when.empty() ? " for every task" : " for " + rule.when) + " (" +
                     policy_place(e, lines, rule.group, rule.index) + ")";
  if (rule.emptied) text += ": set empty, the task holds none of that vendor's GPUs";
  return text;
}

// The rules the task's binding could not meet.
std::vector<Line> not_met(const TaskExplanation& why) {
  std::vector<Line> lines;
  if (why.far_from_gpu)
    lines.push_back({"not met", "GPU domain", "none of its CPUs lie in its GPUs' domains"});
  if (why.shares_cores) lines.push_back({"not met", "cores", "it shares a core with another task"});
  if (why.shares_gpu)
    lines.push_back({"not met", "GPU", "it shares a whole GPU with another task"});
  return lines;
}

std::vector<Line> task_lines(const Topology& topology, const Plan& plan, const PlanExplanation& e,
                             const PolicyLines& policy_lines, const TaskExplanation& why) {
  const TaskPlan& task = plan.tasks[why.rank];
  std::vector<Line> lines;
  for (const GpuChoice& choice : why.gpus) {
    if (const TaskGpu* gpu = task_gpu(task, choice.step_index))
      lines.push_back({"GPU", gpu_name(*gpu), gpu_text(topology, e, policy_lines, *gpu, choice)});
  }
  for (const CoreGrant& grant : why.cores)
    lines.push_back({"cores", grant.cpus.to_list(), core_text(topology, grant)});
  for (const NicChoice& choice : why.nics)
    lines.push_back(
        {"NIC", topology.nics[choice.nic_index].name, nic_text(topology, task, choice)});
  if (why.memory != MemoryReason::kNone) {
    lines.push_back({"memory", "NUMA " + std::to_string(task.numa_node),
                     why.memory == MemoryReason::kGpuNuma
                         ? "its GPU's NUMA node, where it has cores"
                         : "the NUMA node holding most of its CPUs"});
  }
  for (const EnvRule& rule : why.env) {
    const auto value = task.env.value_of(rule.name);
    lines.push_back({"env", rule.name + "=" + std::string(value.value_or("")),
                     env_text(e, policy_lines, rule)});
  }
  const std::vector<Line> unmet = not_met(why);
  lines.insert(lines.end(), unmet.begin(), unmet.end());
  return lines;
}

struct StepLine {
  std::string topic, cpus, text;
};

std::vector<StepLine> step_lines(const PlanExplanation& e, const PolicyLines& policy_lines) {
  std::vector<StepLine> lines;
  lines.push_back({"CPUs", e.step_cpus.to_list(), "the step's CPUs on this node"});
  if (!e.reserved_listed.empty()) {
    lines.push_back({"reserved", e.reserved_listed.to_list(),
                     "reserved_cpus in the site policy (" +
                         policy_place(e, policy_lines, "reserved_cpus") + ")"});
  }
  if (!e.reserved_first_core_per_l3.empty()) {
    lines.push_back({"reserved", e.reserved_first_core_per_l3.to_list(),
                     "the first core of each L3, kept for the system: "
                     "reserve_first_core_per_l3 in the site policy (" +
                         policy_place(e, policy_lines, "reserve_first_core_per_l3") + ")"});
  }
  if (!e.outside_cores.empty()) {
    lines.push_back({"not used", e.outside_cores.to_list(),
                     "on cores the step does not hold (Slurm's core list)"});
  }
  if (!e.smt_trimmed.empty()) {
    lines.push_back({"not used", e.smt_trimmed.to_list(),
                     "beyond " + plural(e.smt, "hardware thread") + " per core (smt: " +
                         policy_place(e, policy_lines, "smt") + ", or the step's)"});
  }
  if (e.threads_as_units) {
    lines.push_back(
        {"threads", "", "more tasks than cores: tasks get hardware threads of their own"});
  }
  return lines;
}

bool selected(std::optional<int> rank, int task) {
  return !rank || *rank == task;
}

std::string task_heading(const Topology& topology, const TaskPlan& task) {
  std::string head = "local task " + std::to_string(task.rank) + ": CPUs " + task.cpus.to_list() +
                     " (" + plural(task.ncores, "core") + ")";
  for (const TaskGpu& gpu : task.gpus)
    head += ", GPU " + gpu_name(gpu);
  for (int n : task.nic_indices)
    head += ", NIC " + topology.nics[n].name;
  return head;
}

}  // namespace

std::string explain_to_text(const Topology& topology, const Plan& plan,
                            const PlanExplanation& explanation, std::optional<int> rank,
                            const PolicyLines& policy_lines) {
  std::string out = "step: " + plural(plan.tasks.size(), "task") + " on " +
                    (topology.hostname.empty() ? topology.source : topology.hostname) + ", " +
                    order_words(explanation, policy_lines) + "\n";
  for (const StepLine& line : step_lines(explanation, policy_lines)) {
    out += "  " + line.topic + std::string(line.topic.size() < 9 ? 9 - line.topic.size() : 1, ' ') +
           line.cpus + (line.cpus.empty() ? "" : ": ") + line.text + "\n";
  }
  for (const std::string& warning : plan.warnings)
    out += "  not met  " + warning + "\n";
  for (const TaskExplanation& why : explanation.tasks) {
    if (!selected(rank, why.rank)) continue;
    out += "\n" + task_heading(topology, plan.tasks[why.rank]) + "\n";
    const std::vector<Line> lines = task_lines(topology, plan, explanation, policy_lines, why);
    size_t width = 0;
    for (const Line& line : lines)
      if (line.topic != "env") width = std::max(width, line.subject.size());
    for (const Line& line : lines) {
      std::string subject = line.subject;
      if (line.topic != "env" && subject.size() < width) subject.resize(width, ' ');
      out += "  " + line.topic +
             std::string(line.topic.size() < 8 ? 8 - line.topic.size() : 1, ' ') + subject + "  " +
             line.text + "\n";
    }
  }
  return out;
}

std::string explain_to_json(const Topology& topology, const Plan& plan,
                            const PlanExplanation& explanation, std::optional<int> rank,
                            const PolicyLines& policy_lines) {
  const PlanExplanation& e = explanation;
  Json step{{"ntasks", plan.tasks.size()},
            {"order", order_name(e.order)},
            {"order_from", order_from_name(e.order_from)},
            {"order_text", order_words(e, policy_lines)},
            {"policy", e.policy_source},
            {"cpus", e.step_cpus.to_list()},
            {"reserved_cpus", e.reserved_listed.to_list()},
            {"reserved_first_core_per_l3", e.reserved_first_core_per_l3.to_list()},
            {"outside_cores", e.outside_cores.to_list()},
            {"smt", e.smt},
            {"smt_trimmed", e.smt_trimmed.to_list()},
            {"threads_as_units", e.threads_as_units}};
  Json step_text = Json::array();
  for (const StepLine& line : step_lines(e, policy_lines))
    step_text.push_back(Json{{"topic", line.topic}, {"cpus", line.cpus}, {"text", line.text}});
  step["lines"] = std::move(step_text);
  Json tasks = Json::array();
  for (const TaskExplanation& why : e.tasks) {
    if (!selected(rank, why.rank)) continue;
    const TaskPlan& task = plan.tasks[why.rank];
    Json gpus = Json::array(), cores = Json::array(), nics = Json::array(), env = Json::array();
    for (const GpuChoice& choice : why.gpus) {
      const TaskGpu* gpu = task_gpu(task, choice.step_index);
      if (!gpu) continue;
      gpus.push_back(Json{{"step_index", choice.step_index},
                          {"node_index", gpu->node_index},
                          {"pci", gpu->pci},
                          {"token", gpu->token},
                          {"tile_index", gpu->tile_index},
                          {"reason", gpu_reason_name(choice.reason)},
                          {"share_permille", choice.share_permille},
                          {"nearness", nearness_name(choice.nearness)},
                          {"sharers", choice.sharers},
                          {"text", gpu_text(topology, e, policy_lines, *gpu, choice)}});
    }
    for (const CoreGrant& grant : why.cores) {
      Json entry{{"cpus", grant.cpus.to_list()},
                 {"source", core_source_name(grant.source)},
                 {"nearness", nearness_name(grant.nearness)}};
      if (grant.domain_gpu >= 0 && grant.domain_gpu < static_cast<int>(topology.gpus.size()))
        entry["domain"] = describe_locality(topology.gpus[grant.domain_gpu].locality);
      entry["text"] = core_text(topology, grant);
      cores.push_back(std::move(entry));
    }
    for (const NicChoice& choice : why.nics) {
      const TaskGpu* gpu = task_gpu(task, choice.gpu_step_index);
      nics.push_back(Json{{"nic_index", choice.nic_index},
                          {"name", topology.nics[choice.nic_index].name},
                          {"gpu_pci", gpu ? gpu->pci : ""},
                          {"nearness", nearness_name(choice.nearness)},
                          {"equally_near", choice.equally_near},
                          {"leads", choice.leads},
                          {"text", nic_text(topology, task, choice)}});
    }
    for (const EnvRule& rule : why.env) {
      env.push_back(Json{{"name", rule.name},
                         {"value", std::string(task.env.value_of(rule.name).value_or(""))},
                         {"group", rule.group},
                         {"index", rule.index},
                         {"when", rule.when},
                         {"template", rule.value_template},
                         {"emptied", rule.emptied},
                         {"text", env_text(e, policy_lines, rule)}});
    }
    Json unmet = Json::array();
    for (const Line& line : not_met(why))
      unmet.push_back(line.text);
    Json entry{{"rank", why.rank},      {"cpus", task.cpus.to_list()},
               {"ncores", task.ncores}, {"gpus", gpus},
               {"cores", cores},        {"nics", nics},
               {"numa", task.numa_node}};
    entry["memory"] = why.memory == MemoryReason::kGpuNuma    ? "gpu-numa"
                      : why.memory == MemoryReason::kMostCpus ? "most-cpus"
                                                              : "none";
    entry["env"] = std::move(env);
    entry["not_met"] = std::move(unmet);
    tasks.push_back(std::move(entry));
  }
  Json all{{"step", std::move(step)}, {"warnings", plan.warnings}, {"tasks", std::move(tasks)}};
  return output::to_text(all) + "\n";
}

PolicyLines policy_field_lines(const std::string& text) {
  PolicyLines lines;
  int depth = 0, number = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (depth == 0) {
      size_t name_end = first;
      while (name_end < line.size() &&
             (std::isalnum(static_cast<unsigned char>(line[name_end])) || line[name_end] == '_'))
        ++name_end;
      if (name_end > first) lines[line.substr(first, name_end - first)].push_back(number);
    }
    // Braces outside quoted strings open and close nested messages (expect { ... }).
    bool quoted = false;
    for (size_t i = first; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted && c == '\\') {
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (!quoted && c == '#') {
        break;
      } else if (!quoted) {
        depth += c == '{' || c == '<';
        depth -= (c == '}' || c == '>') && depth > 0;
      }
    }
  }
  return lines;
}

}  // namespace gpubind
