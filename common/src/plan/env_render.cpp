// Each task's environment, from the site policy's templates and the finished task plans: GPU
// visibility, NIC, OpenMP variables and gpubind's own. Templates are compiled once per plan, each
// the first time a task needs it; placeholder values are computed when a template asks.
#include "plan/env_render.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>

#include "gpubind/env.h"
#include "plan_arena.h"

namespace gpubind {
namespace {

// Cray MPICH numbers the NICs it finds (libfabric's CXI devices, in device order) from 0: a
// node whose cxi1 is missing has NICs 0 and 1 for cxi0 and cxi2. So a NIC's number is its place
// among the node's NICs of its kind ordered by their own ordinals, not the digit in its name.
// NICs in the order their stacks count them: by ordinal (cxiN, mlx5_N), then index.
std::pair<int, int> nic_order(const Nic& nic) {
  return {nic_ordinal(nic), nic.index};
}

int mpich_nic_number(const Topology& topo, int nic) {
  const Nic& mine = topo.nics[nic];
  int before = 0;
  for (const Nic& other : topo.nics) {
    if (other.kind == mine.kind && nic_order(other) < nic_order(mine)) ++before;
  }
  return before;
}

std::string nic_mapping(const Topology& topo, const std::vector<TaskPlan>& tasks) {
  std::vector<std::pair<int, std::vector<int>>> by_ordinal;  // formatted by format_int_list
  for (const TaskPlan& task : tasks) {
    if (task.nic_index < 0) continue;
    const int ordinal = mpich_nic_number(topo, task.nic_index);
    auto it = std::find_if(by_ordinal.begin(), by_ordinal.end(),
                           [&](const auto& entry) { return entry.first == ordinal; });
    if (it == by_ordinal.end()) {
      by_ordinal.push_back({ordinal, {}});
      it = by_ordinal.end() - 1;
    }
    it->second.push_back(task.rank);
  }
  std::sort(by_ordinal.begin(), by_ordinal.end());
  std::string text;
  for (const auto& [ordinal, ranks] : by_ordinal) {
    if (!text.empty()) text += "; ";
    text += std::to_string(ordinal) + ":" + format_int_list(ranks);
  }
  return text;
}

// Appends the non-empty results of `field` over NIC indices to `text`, comma-separated.
template <class Field>
void append_nics(const Topology& topo, std::span<const int> nics, Field field, std::string& text) {
  const size_t start = text.size();
  for (int n : nics) {
    const std::string item = field(topo.nics[n]);
    if (item.empty()) continue;
    if (text.size() > start) text.push_back(',');
    text += item;
  }
}

template <class Field>
std::string join_nics(const Topology& topo, std::span<const int> nics, Field field) {
  std::string text;
  append_nics(topo, nics, field, text);
  return text;
}

// GPU devices a task's runtime sees: a whole tiled card under FLAT counts each tile.
int visible_devices(const TaskPlan& task) {
  int devices = 0;
  for (const TaskGpu& gpu : task.gpus)
    devices += 1 + static_cast<int>(std::count(gpu.token.begin(), gpu.token.end(), ','));
  return devices;
}

// oneCCL's workers, one per oneCCL process on the node in local-rank order: a task runs one
// process per GPU device it sees (one, or a worker each), each worker pinned to the last CPU of
// that process's share of the task's own set, so a worker never lands on another task's cores.
std::string ccl_worker_cpus(const std::vector<TaskPlan>& tasks) {
  std::string text;
  for (const TaskPlan& task : tasks) {
    const std::vector<int> cpus = task.cpus.to_vector();
    if (cpus.empty()) return "";
    const int processes = std::max(1, visible_devices(task));
    const int n = static_cast<int>(cpus.size());
    for (int p = 0; p < processes; ++p) {
      const int last = std::max(0, (p + 1) * n / processes - 1);
      text += (text.empty() ? "" : ",") + std::to_string(cpus[last]);
    }
  }
  return text;
}

// Placeholder values that are the same in every task of the step, each computed the first time
// a template asks for it (most policies use none of them).
class NodeValues {
 public:
  NodeValues(const Topology& topo, const std::vector<TaskPlan>& tasks)
      : topo_(topo), tasks_(tasks) {}

  const std::string& get(Placeholder p) {
    const size_t slot = std::find(kNodeWide.begin(), kNodeWide.end(), p) - kNodeWide.begin();
    if (slot == kNodeWide.size()) return empty_;
    std::optional<std::string>& value = values_[slot];
    if (!value) value = compute(p);
    return *value;
  }

 private:
  std::string compute(Placeholder p) const {
    switch (p) {
      case Placeholder::kNicMapping:
        return nic_mapping(topo_, tasks_);
      case Placeholder::kNodeNics:
        return join_nics(topo_, nics_in_order(), [](const Nic& n) { return n.name; });
      case Placeholder::kNodeNicsNetdev:
        return join_nics(topo_, nics_in_order(), [](const Nic& n) { return n.netdev; });
      case Placeholder::kNodeNicsRdma:
        return join_nics(topo_, nics_in_order(), [](const Nic& n) { return n.rdma; });
      case Placeholder::kCclWorkerAffinity:
        return ccl_worker_cpus(tasks_);
      default:
        return {};
    }
  }

  Scratch<int> nics_in_order() const {
    Scratch<int> all(topo_.nics.size());
    std::iota(all.begin(), all.end(), 0);
    std::sort(all.begin(), all.end(),
              [&](int a, int b) { return nic_order(topo_.nics[a]) < nic_order(topo_.nics[b]); });
    return all;
  }

  const Topology& topo_;
  const std::vector<TaskPlan>& tasks_;
  static constexpr std::array kNodeWide = {Placeholder::kNicMapping, Placeholder::kNodeNics,
                                           Placeholder::kNodeNicsNetdev, Placeholder::kNodeNicsRdma,
                                           Placeholder::kCclWorkerAffinity};
  std::array<std::optional<std::string>, kNodeWide.size()> values_;  // in kNodeWide's order
  const std::string empty_;
};

// A number's decimal digits.
class Digits {
 public:
  explicit Digits(long n)
      : size_(static_cast<size_t>(std::to_chars(text_, text_ + sizeof text_, n).ptr - text_)) {}
  std::string_view view() const { return {text_, size_}; }

 private:
  char text_[24];
  size_t size_;
};

// A task's placeholder values, each computed the first time a template asks for it.
class TaskPlaceholders final : public PlaceholderSource {
 public:
  TaskPlaceholders(const Topology& topo, int ntasks, NodeValues& node)
      : topo_(topo), ntasks_(ntasks), node_(node) {}

  // Values for `task` from now on (one object serves every task of the plan).
  void start(const TaskPlan& task) {
    task_ = &task;
    done_.fill(false);
  }

  const std::string& get(Placeholder p) override {
    const size_t i = static_cast<size_t>(p);
    if (!done_[i]) {
      // Written into the last task's string: its room is reused, task after task.
      values_[i].clear();
      compute(p, values_[i]);
      done_[i] = true;
    }
    return values_[i];
  }

 private:
  void append_gpus(bool pci, std::string& text) const {
    for (const TaskGpu& gpu : task_->gpus) {
      const std::string& item = pci ? gpu.pci : gpu.token;
      if (item.empty()) continue;  // a MIG instance has no bus id here
      if (!text.empty()) text.push_back(',');
      text += item;
    }
  }

  // `out` is empty on entry.
  void compute(Placeholder p, std::string& out) const {
    auto nics = [&](auto field) { append_nics(topo_, task_->nic_indices, field, out); };
    switch (p) {
      case Placeholder::kGpus:
        return append_gpus(false, out);
      case Placeholder::kGpuPci:
        return append_gpus(true, out);
      case Placeholder::kNics:
        return nics([](const Nic& n) { return n.name; });
      case Placeholder::kNicsNetdev:
        return nics([](const Nic& n) { return n.netdev; });
      case Placeholder::kNicsRdma:
        return nics([](const Nic& n) { return n.rdma; });
      case Placeholder::kNicsUcx:
        return nics([](const Nic& n) {
          return n.rdma.empty() ? n.netdev : n.rdma + ":" + std::to_string(n.rdma_port);
        });
      case Placeholder::kCpus:
        return task_->cpus.append_list(out);
      default:
        return append_value(p, out);
    }
  }

  // Appends a number; nothing when `ok` is false (the placeholder is then empty).
  static void append_number(std::string& out, long n, bool ok = true) {
    if (ok) out.append(Digits(n).view());
  }

  void append_value(Placeholder p, std::string& out) const {
    const Nic* nic = task_->nic_index >= 0 ? &topo_.nics[task_->nic_index] : nullptr;
    switch (p) {
      case Placeholder::kNgpus:
        return append_number(out, static_cast<long>(task_->gpus.size()), !task_->gpus.empty());
      case Placeholder::kNic:
        if (nic) out += nic->name;
        return;
      case Placeholder::kNicNetdev:
        if (nic) out += nic->netdev;
        return;
      case Placeholder::kNicRdma:
        if (nic) out += nic->rdma;
        return;
      case Placeholder::kNicIndex:
        return append_number(out, nic ? nic_ordinal(*nic) : 0, nic != nullptr);
      case Placeholder::kNicMapping:
        if (nic) out += node_.get(p);
        return;
      case Placeholder::kNodeNics:
      case Placeholder::kNodeNicsNetdev:
      case Placeholder::kNodeNicsRdma:
      case Placeholder::kCclWorkerAffinity:
        out += node_.get(p);
        return;
      case Placeholder::kOmpThreads:
        return append_number(out, omp_threads());
      case Placeholder::kCpuMask:
        out += task_->cpus.to_mask();
        return;
      case Placeholder::kNcpus:
        return append_number(out, task_->cpus.count());
      case Placeholder::kNcores:
        return append_number(out, task_->ncores);
      case Placeholder::kNuma:
        return append_number(out, task_->numa_index, task_->numa_index >= 0);
      case Placeholder::kL3:
        return append_number(out, task_->l3_index, task_->l3_index >= 0);
      case Placeholder::kLocalRank:
        return append_number(out, task_->rank);
      case Placeholder::kNtasks:
        return append_number(out, ntasks_);
      default:  // written by compute()
        return;
    }
  }

  // A task with k > 1 visible GPU devices runs one worker per device (torchrun, accelerate,
  // DeepSpeed): each gets an equal share of the task's CPUs.
  int omp_threads() const {
    const int devices = visible_devices(*task_);
    const int cpus = task_->cpus.count();
    return devices > 1 ? std::max(1, cpus / devices) : cpus;
  }

  const Topology& topo_;
  const TaskPlan* task_ = nullptr;
  int ntasks_;
  NodeValues& node_;
  PlaceholderValues values_;
  std::array<bool, static_cast<size_t>(Placeholder::kCount)> done_{};
};

// A group of templates, each parsed once per plan when a task first needs it (most apply to
// one GPU vendor or NIC kind only).
class CompiledGroup {
 public:
  explicit CompiledGroup(const std::vector<EnvTemplate>& group)
      : templates_(group), compiled_(group.size()) {}

  // `selector` is a vendor or NIC kind name (vendor_name, nic_kind_name: one string each, so
  // tasks of the same kind are told by its address), or "" for templates that apply to every task.
  void append(const char* selector, TaskPlaceholders& values, EnvList& env) {
    if (selector != selected_) select(selector);
    for (int i : chosen_) {
      const EnvTemplate& tmpl = templates_[i];
      env.add_written(tmpl.name, tmpl.only_if_unset, [&](EnvList::ValueWriter& out) {
        return compiled_[i]->render_to(values, out);
      });
    }
  }

 private:
  // The templates for `selector`, compiled. Tasks of a step mostly share one selector.
  void select(const char* selector) {
    selected_ = selector;
    chosen_.clear();
    for (size_t i = 0; i < templates_.size(); ++i) {
      const EnvTemplate& tmpl = templates_[i];
      if (!tmpl.when.empty() && tmpl.when != std::string_view(selector)) continue;
      if (!compiled_[i]) compiled_[i].emplace(tmpl.value);
      chosen_.push_back(static_cast<int>(i));
    }
  }

  const std::vector<EnvTemplate>& templates_;
  Scratch<std::optional<CompiledTemplate>> compiled_;
  const char* selected_ = nullptr;
  Scratch<int> chosen_;
};

}  // namespace

void render_env(const Topology& topology, const SitePolicy& policy, const PlanRequest& request,
                std::vector<TaskPlan>& tasks) {
  NodeValues node(topology, tasks);
  const bool omp_places = request.omp_places.value_or(policy.omp_places);
  CompiledGroup gpu_env(policy.gpu_env), nic_env(policy.nic_env), omp_env(policy.omp_env);
  size_t bytes = 0;  // the last task's: tasks of a step are alike, so one allocation each
  TaskPlaceholders v(topology, static_cast<int>(tasks.size()), node);
  for (TaskPlan& task : tasks) {
    v.start(task);
    EnvList& env = task.env;
    const bool gpus = request.gpu_env && !task.gpus.empty();
    const bool nics = request.nic_env && task.nic_index >= 0;
    const char* vendor = gpus ? vendor_name(task.gpus[0].vendor) : "";
    const char* nic_kind = nics ? nic_kind_name(topology.nics[task.nic_index].kind) : "";
    env.reserve(bytes ? bytes + bytes / 4 : 512);
    if (gpus) gpu_env.append(vendor, v, env);
    if (nics) nic_env.append(nic_kind, v, env);
    omp_env.append("", v, env);
    if (omp_places) {
      env.add("OMP_PLACES", "cores");
      env.add("OMP_PROC_BIND", "close");
    }
    // Information for users and tools, and the marker that binding was done.
    env.add("GPUBIND_BOUND", "1");
    env.add("GPUBIND_LOCAL_RANK", Digits(task.rank).view());
    env.add("GPUBIND_CPUS", v.get(Placeholder::kCpus));
    if (!task.gpus.empty()) {
      env.add("GPUBIND_GPUS", v.get(Placeholder::kGpus));
      // MIG instances have no bus id of their own here.
      if (const std::string& pci = v.get(Placeholder::kGpuPci); !pci.empty())
        env.add("GPUBIND_GPU_PCI", pci);
    }
    if (task.nic_index >= 0) env.add("GPUBIND_NIC", v.get(Placeholder::kNics));
    if (task.numa_index >= 0) env.add("GPUBIND_NUMA", Digits(task.numa_index).view());
    bytes = env.bytes();
  }
}

}  // namespace gpubind
