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
#include "gpubind/env_names.h"
#include "gpubind/gpu_vendors.h"
#include "gpubind/parse.h"
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

// The devices a GPU token is to its runtime: a whole tiled card under FLAT is each of its tiles.
int device_count(const TaskGpu& gpu) {
  return 1 + static_cast<int>(std::count(gpu.token.begin(), gpu.token.end(), ','));
}

// GPU devices a task's runtimes see.
int visible_devices(const TaskPlan& task) {
  int devices = 0;
  for (const TaskGpu& gpu : task.gpus)
    devices += device_count(gpu);
  return devices;
}

// The placeholders that name a task's GPUs.
constexpr std::array kGpuPlaceholders = {Placeholder::kGpus, Placeholder::kGpuPci,
                                         Placeholder::kNgpus, Placeholder::kGpuOrdinals};

// oneCCL's CCL_WORKER_AFFINITY: a CPU for each worker of each oneCCL process on the node, entry
// local rank x CCL_WORKER_COUNT + worker, and exactly that many (oneCCL refuses the list
// otherwise). Its processes on the node are the step's tasks, as MPI and PMIx count them, or
// CCL_LOCAL_SIZE under launcher "none". A task's workers take the last CPUs of its own set.
// Where the count cannot be known, `why_not` says so and nothing is set.
struct CclAffinity {
  std::string list;
  std::string why_not;
};

CclAffinity ccl_worker_cpus(const std::vector<TaskPlan>& tasks, const PlanRequest::Ccl& ccl) {
  const int ntasks = static_cast<int>(tasks.size());
  const std::string& launcher = ccl.launcher;
  if (launcher == "torchrun")
    return {"",
            "CCL_PROCESS_LAUNCHER=torchrun: oneCCL counts torchrun's workers "
            "(LOCAL_WORLD_SIZE), which are not known before torchrun starts them"};
  if (launcher == "none" && ccl.local_size != ntasks)
    return {"", "CCL_PROCESS_LAUNCHER=none: CCL_LOCAL_SIZE=" + std::to_string(ccl.local_size) +
                    " is not the step's " + std::to_string(ntasks) + " tasks on this node"};
  if (!launcher.empty() && launcher != "none" && launcher != "hydra" && launcher != "pmix")
    return {"", "CCL_PROCESS_LAUNCHER=" + launcher + " is not a launcher gpubind knows"};
  constexpr long kMaxEntries = 1 << 16;
  const int workers = ccl.worker_count;
  if (workers < 1 || static_cast<long>(workers) * ntasks > kMaxEntries)
    return {"", "CCL_WORKER_COUNT=" + std::to_string(workers) + " x " + std::to_string(ntasks) +
                    " tasks is not a list gpubind writes"};
  CclAffinity out;
  for (const TaskPlan& task : tasks) {
    const std::vector<int> cpus = task.cpus.to_vector();
    if (cpus.empty()) return {"", "a task has no CPU"};
    const int n = static_cast<int>(cpus.size());
    for (int w = 0; w < workers; ++w) {
      // The last `workers` CPUs, in order; a task with fewer CPUs than workers repeats them.
      const int at = n >= workers ? n - workers + w : w % n;
      out.list += (out.list.empty() ? "" : ",") + std::to_string(cpus[at]);
    }
  }
  return out;
}

// Placeholder values that are the same in every task of the step, each computed the first time
// a template asks for it (most policies use none of them).
class NodeValues {
 public:
  NodeValues(const Topology& topo, const std::vector<TaskPlan>& tasks, const PlanRequest::Ccl& ccl)
      : topo_(topo), tasks_(tasks), ccl_(ccl) {}

  // Why a placeholder asked for is empty where the step cannot have it, "" otherwise.
  const std::string& why_not() const { return why_not_; }

  const std::string& get(Placeholder p) {
    const size_t slot = std::find(kNodeWide.begin(), kNodeWide.end(), p) - kNodeWide.begin();
    if (slot == kNodeWide.size()) return empty_;
    std::optional<std::string>& value = values_[slot];
    if (!value) value = compute(p);
    return *value;
  }

 private:
  std::string compute(Placeholder p) {
    switch (p) {
      case Placeholder::kNicMapping:
        return nic_mapping(topo_, tasks_);
      case Placeholder::kNodeNics:
        return join_nics(topo_, nics_in_order(), [](const Nic& n) { return n.name; });
      case Placeholder::kNodeNicsNetdev:
        return join_nics(topo_, nics_in_order(), [](const Nic& n) { return n.netdev; });
      case Placeholder::kNodeNicsRdma:
        return join_nics(topo_, nics_in_order(), [](const Nic& n) { return n.rdma; });
      case Placeholder::kCclWorkerAffinity: {
        CclAffinity affinity = ccl_worker_cpus(tasks_, ccl_);
        if (!affinity.why_not.empty())
          why_not_ = "CCL_WORKER_AFFINITY is not set: " + affinity.why_not;
        return std::move(affinity.list);
      }
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
  const PlanRequest::Ccl& ccl_;
  std::string why_not_;
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
    vendor_ = std::nullopt;
    done_.fill(false);
  }

  // GPU placeholders from now on name only the task's GPUs of `vendor` (each vendor's
  // variables hold its own GPUs); nullopt: all of them.
  void select_vendor(std::optional<Vendor> vendor) {
    if (vendor == vendor_) return;
    vendor_ = vendor;
    for (Placeholder p : kGpuPlaceholders)
      done_[static_cast<size_t>(p)] = false;
  }

  // CPU placeholders stay empty (their templates unset): each task's CPUs are bound as it starts.
  void leave_cpus_unknown(bool unknown) { cpus_unknown_ = unknown; }

  const std::string& get(Placeholder p) override {
    const size_t i = static_cast<size_t>(p);
    if (cpus_unknown_ && names_cpus(p)) return none_;
    if (!done_[i]) {
      // Written into the last task's string: its room is reused, task after task.
      values_[i].clear();
      compute(p, values_[i]);
      done_[i] = true;
    }
    return values_[i];
  }

 private:
  bool selected(const TaskGpu& gpu) const { return !vendor_ || gpu.vendor == *vendor_; }

  static bool names_cpus(Placeholder p) {
    switch (p) {
      case Placeholder::kOmpThreads:
      case Placeholder::kCclWorkerAffinity:
      case Placeholder::kCpus:
      case Placeholder::kCpuMask:
      case Placeholder::kNcpus:
      case Placeholder::kNcores:
      case Placeholder::kNuma:
      case Placeholder::kL3:
        return true;
      default:
        return false;
    }
  }

  void append_gpus(bool pci, std::string& text) const {
    for (const TaskGpu& gpu : task_->gpus) {
      if (!selected(gpu)) continue;
      const std::string& item = pci ? gpu.pci : gpu.token;
      if (item.empty()) continue;  // an unplaced MIG instance has no bus id here
      if (!text.empty()) text.push_back(',');
      text += item;
    }
  }

  // The selected GPUs' devices once a visibility variable narrowed the task to them: 0..k-1.
  void append_ordinals(std::string& text) const {
    int devices = 0;
    for (const TaskGpu& gpu : task_->gpus) {
      if (selected(gpu)) devices += device_count(gpu);
    }
    for (int d = 0; d < devices; ++d) {
      if (d) text.push_back(',');
      text.append(Digits(d).view());
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
      case Placeholder::kGpuOrdinals:
        return append_ordinals(out);
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
      case Placeholder::kNgpus: {
        const long n = std::count_if(task_->gpus.begin(), task_->gpus.end(),
                                     [&](const TaskGpu& gpu) { return selected(gpu); });
        return append_number(out, n, n > 0);
      }
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
        return append_number(out, task_->numa_node, task_->numa_node >= 0);
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
  bool cpus_unknown_ = false;
  const std::string none_;
  std::optional<Vendor> vendor_;
  int ntasks_;
  NodeValues& node_;
  PlaceholderValues values_;
  std::array<bool, static_cast<size_t>(Placeholder::kCount)> done_{};
};

// A group of templates, each parsed once per plan when a task first needs it (most apply to
// one GPU vendor or NIC kind only).
class CompiledGroup {
 public:
  CompiledGroup(const char* name, const std::vector<EnvTemplate>& group)
      : name_(name), templates_(group), compiled_(group.size()) {}

  // Explaining: the rule behind each variable this group sets, until told otherwise.
  void record_into(std::vector<EnvRule>* rules) { rules_ = rules; }

  // Leaves out every template setting a GPU visibility variable (Slurm names the tasks' GPUs).
  void leave_visibility_to_slurm(bool slurms) { slurms_visibility_ = slurms; }

  // `selector` is a vendor or NIC kind name (vendor_name, nic_kind_name: one string each, so
  // tasks of the same kind are told by its address), or "" for templates that apply to every
  // task. Without `naming_gpus`, templates that name GPUs are left out (no-gpu-env).
  // With `own_only`, only the templates whose `when` is `selector` (not those for every task).
  void append(const char* selector, TaskPlaceholders& values, EnvList& env, bool naming_gpus = true,
              bool own_only = false) {
    if (selector != selected_ || naming_gpus != naming_gpus_ || own_only != own_only_)
      select(selector, naming_gpus, own_only);
    for (int i : chosen_) {
      const EnvTemplate& tmpl = templates_[i];
      const bool added = env.add_written(
          tmpl.name, tmpl.only_if_unset,
          [&](EnvList::ValueWriter& out) { return compiled_[i]->render_to(values, out); });
      if (rules_ && added) rules_->push_back({tmpl.name, name_, i, tmpl.when, tmpl.value, false});
    }
  }

  // The variables of `selector`'s templates that name GPUs, set to show none (`hidden`, the
  // vendor's way: gpu_vendors.h): a task given none of a vendor's GPUs must not see that
  // vendor's GPUs through a list meant for another.
  void append_emptied(const char* selector, const std::string& hidden, EnvList& env) {
    for (size_t i = 0; i < templates_.size(); ++i) {
      const EnvTemplate& tmpl = templates_[i];
      if (tmpl.when != std::string_view(selector) || !compile(i).uses(Placeholder::kGpus)) continue;
      if (env.value_of(tmpl.name)) continue;
      env.add(tmpl.name, hidden);
      if (rules_)
        rules_->push_back({tmpl.name, name_, static_cast<int>(i), tmpl.when, tmpl.value, true});
    }
  }

 private:
  const CompiledTemplate& compile(size_t i) {
    if (!compiled_[i]) compiled_[i].emplace(templates_[i].value);
    return *compiled_[i];
  }

  static bool names_gpus(const CompiledTemplate& tmpl) {
    return std::any_of(kGpuPlaceholders.begin(), kGpuPlaceholders.end(),
                       [&](Placeholder p) { return tmpl.uses(p); });
  }

  // The templates for `selector`, compiled. Tasks of a step mostly share one selector.
  void select(const char* selector, bool naming_gpus, bool own_only) {
    selected_ = selector;
    naming_gpus_ = naming_gpus;
    own_only_ = own_only;
    chosen_.clear();
    for (size_t i = 0; i < templates_.size(); ++i) {
      const EnvTemplate& tmpl = templates_[i];
      if (tmpl.when.empty() ? own_only : tmpl.when != std::string_view(selector)) continue;
      if (!naming_gpus && names_gpus(compile(i))) continue;
      if (slurms_visibility_ && is_gpu_visibility_var(tmpl.name)) continue;
      compile(i);
      chosen_.push_back(static_cast<int>(i));
    }
  }

  bool slurms_visibility_ = false;
  const char* name_;  // the policy's name for the group, "gpu_env"
  const std::vector<EnvTemplate>& templates_;
  Scratch<std::optional<CompiledTemplate>> compiled_;
  std::vector<EnvRule>* rules_ = nullptr;
  const char* selected_ = nullptr;
  bool naming_gpus_ = true;
  bool own_only_ = false;
  Scratch<int> chosen_;
};

// The vendors of a task's GPUs, in the order they first appear.
SmallVector<Vendor, kVendorCount> vendors_of(const TaskPlan& task) {
  SmallVector<Vendor, kVendorCount> vendors;
  for (const TaskGpu& gpu : task.gpus)
    if (std::find(vendors.begin(), vendors.end(), gpu.vendor) == vendors.end())
      vendors.push_back(gpu.vendor);
  return vendors;
}

// The vendors of a node's GPUs (runtimes that may see GPUs the task was not given).
SmallVector<Vendor, kVendorCount> vendors_of(const Topology& topology) {
  SmallVector<Vendor, kVendorCount> vendors;
  for (const Gpu& gpu : topology.gpus)
    if (gpu.vendor != Vendor::kUnknown &&
        std::find(vendors.begin(), vendors.end(), gpu.vendor) == vendors.end())
      vendors.push_back(gpu.vendor);
  return vendors;
}

// Each vendor's GPU variables for its own GPUs of the task; on a node with GPUs of several
// vendors, the visibility variables of the others emptied, and HIP kept off NVIDIA's list.
bool gpus_fixed(const PlanRequest& request) {
  return !request.fixed.empty() && !request.fixed[0].gpus.empty();
}

// Slurm names each task's GPUs in the variables it sets: where it chose them per task (fixed
// GPUs, closest, single: in the task's own numbering under ConstrainDevices) or was told to keep
// its own (--gpu-bind=none). The plan sets none of the visibility variables then.
bool slurm_names_gpus(const PlanRequest& request) {
  return request.gpus_named_by_slurm || gpus_fixed(request);
}

// The user's inherited HIP_VISIBLE_DEVICES for an AMD task: HIP counts its entries in the list
// ROCR_VISIBLE_DEVICES leaves, and the inherited entries count the step's AMD GPUs (`amd_steps`:
// their positions in the step's list, in order), so each entry naming one of the task's GPUs
// becomes that GPU's position in the task's own list, the others go. nullopt where an entry is
// not such an index (left as the user set it).
std::optional<std::string> narrowed_hip_list(const TaskPlan& task, const std::string& inherited,
                                             const std::vector<int>& amd_steps) {
  std::string out;
  for (size_t begin = 0; begin <= inherited.size();) {
    const size_t comma = std::min(inherited.find(',', begin), inherited.size());
    const std::string_view entry = std::string_view(inherited).substr(begin, comma - begin);
    begin = comma + 1;
    const auto index = parse_whole_number(entry, 0, static_cast<long long>(amd_steps.size()) - 1);
    if (!index) return std::nullopt;
    int position = 0;
    for (const TaskGpu& gpu : task.gpus) {
      if (gpu.vendor != Vendor::kAmd) continue;
      if (gpu.step_index == amd_steps[static_cast<size_t>(*index)]) {
        out += (out.empty() ? "" : ",") + std::to_string(position);
        break;
      }
      ++position;
    }
  }
  return out;
}

void append_gpu_env(const TaskPlan& task, const PlanRequest& request,
                    const SmallVector<Vendor, kVendorCount>& node_vendors,
                    const std::array<int, kVendorCount>& node_devices, CompiledGroup& gpu_env,
                    TaskPlaceholders& values, const std::vector<int>& amd_steps,
                    std::vector<int>& hip_sees_none, EnvList& env) {
  const SmallVector<Vendor, kVendorCount> mine = vendors_of(task);
  const bool naming = request.gpu_env;
  if (mine.size() == 1) {
    gpu_env.append(vendor_name(mine[0]), values, env, naming);
  } else {
    // Each vendor's templates with its own GPUs, then those for every task with all of them.
    for (Vendor vendor : mine) {
      values.select_vendor(vendor);
      gpu_env.append(vendor_name(vendor), values, env, naming, true);
    }
    values.select_vendor(std::nullopt);
    gpu_env.append("", values, env, naming);
  }
  // The inherited HIP list, where the task's narrowed list is known here: the plan's own (it
  // narrows ROCR_VISIBLE_DEVICES), or the GPUs Slurm's per-task binding fixed. Not under closest
  // or single (which GPUs Slurm gives is known only at launch) or --gpu-bind=none (nothing is
  // narrowed), nor where the site's policy sets HIP_VISIBLE_DEVICES itself.
  const bool amd = std::find(mine.begin(), mine.end(), Vendor::kAmd) != mine.end();
  const bool narrowed_here = request.gpu_env && (gpus_fixed(request) || !slurm_names_gpus(request));
  if (narrowed_here && amd && request.inherited_hip_visible_devices &&
      !env.value_of("HIP_VISIBLE_DEVICES")) {
    const std::string& inherited = *request.inherited_hip_visible_devices;
    if (auto hip = narrowed_hip_list(task, inherited, amd_steps)) {
      env.add("HIP_VISIBLE_DEVICES", *hip);
      if (hip->empty() && !inherited.empty()) hip_sees_none.push_back(task.rank);
    }
  }
  if (naming && !slurm_names_gpus(request) && node_vendors.size() > 1) {
    auto has = [&](Vendor v) { return std::find(mine.begin(), mine.end(), v) != mine.end(); };
    for (Vendor vendor : node_vendors) {
      const GpuVendorRow* row = gpu_vendor(vendor);
      if (!has(vendor) && row)
        gpu_env.append_emptied(vendor_name(vendor),
                               hidden_gpus_value(*row, node_devices[static_cast<size_t>(vendor)]),
                               env);
    }
    // HIP reads CUDA_VISIBLE_DEVICES when HIP_VISIBLE_DEVICES is unset; here that list is
    // NVIDIA's, so HIP gets the task's AMD devices as ROCR_VISIBLE_DEVICES numbers them (a
    // user's own HIP_VISIBLE_DEVICES already keeps HIP off it).
    const bool nvidia =
        std::find(node_vendors.begin(), node_vendors.end(), Vendor::kNvidia) != node_vendors.end();
    if (nvidia && has(Vendor::kAmd) && env.value_of("ROCR_VISIBLE_DEVICES") &&
        !env.value_of("HIP_VISIBLE_DEVICES")) {
      values.select_vendor(Vendor::kAmd);
      env.add("HIP_VISIBLE_DEVICES", values.get(Placeholder::kGpuOrdinals), true);
    }
  }
  values.select_vendor(std::nullopt);
}

// Each variable the task gets whatever its own environment holds, again under the runtime's
// prefix, so that --cleanenv keeps the binding. One a user's own value wins over is not twinned:
// inside the container the twin would replace the user's value.
void add_container_twins(std::string_view prefix, EnvList& env) {
  std::vector<std::pair<std::string, std::string>> twins;
  for (const EnvVar var : env) {
    if (!var.only_if_unset)
      twins.emplace_back(std::string(prefix) + std::string(var.name), std::string(var.value));
  }
  for (const auto& [name, value] : twins)
    env.add(name, value);
}

// Explaining: each variable of the task's environment, in order, with the rule that set it;
// the templates' rules are in `rules` already, the rest are gpubind's own.
void order_env_rules(const EnvList& env, std::vector<EnvRule>& rules) {
  std::vector<EnvRule> ordered;
  ordered.reserve(env.size());
  for (const EnvVar var : env) {
    auto found = std::find_if(rules.begin(), rules.end(),
                              [&](const EnvRule& rule) { return rule.name == var.name; });
    if (found != rules.end()) {
      ordered.push_back(std::move(*found));
      found->name.clear();
      continue;
    }
    EnvRule own;
    own.name = std::string(var.name);
    own.group = own.name.rfind("OMP_", 0) == 0         ? "omp_places"
                : own.name.rfind("GPUBIND_", 0) == 0   ? "gpubind"
                : !container_twin_of(own.name).empty() ? "container"
                                                       : "mixed-vendor";
    ordered.push_back(std::move(own));
  }
  rules = std::move(ordered);
}

}  // namespace

void render_env(const Topology& topology, const SitePolicy& policy, const PlanRequest& request,
                std::vector<TaskPlan>& tasks, std::vector<std::string>& warnings,
                PlanExplanation* explanation, const std::vector<GpuPlace>& step_gpus) {
  NodeValues node(topology, tasks, request.ccl);
  const bool omp_places = request.omp_places.value_or(policy.omp_places);
  CompiledGroup gpu_env("gpu_env", policy.gpu_env), nic_env("nic_env", policy.nic_env),
      omp_env("omp_env", policy.omp_env);
  gpu_env.leave_visibility_to_slurm(slurm_names_gpus(request));
  size_t bytes = 0;  // the last task's: tasks of a step are alike, so one allocation each
  TaskPlaceholders v(topology, static_cast<int>(tasks.size()), node);
  v.leave_cpus_unknown(request.cpus_bound_at_launch);
  const SmallVector<Vendor, kVendorCount> node_vendors = vendors_of(topology);
  // The devices each vendor's runtime counts on the node (a tiled card is a device per tile
  // under Level Zero's FLAT default: the larger count).
  std::array<int, kVendorCount> node_devices{};
  for (const Gpu& gpu : topology.gpus)
    node_devices[static_cast<size_t>(gpu.vendor)] += std::max(gpu.tiles, 1);
  // The step's AMD GPUs, as positions in its list: what an inherited HIP list counts.
  std::vector<int> amd_steps;
  for (size_t g = 0; g < step_gpus.size(); ++g) {
    const int node = step_gpus[g].node_index;
    if (node >= 0 && node < static_cast<int>(topology.gpus.size()) &&
        topology.gpus[node].vendor == Vendor::kAmd)
      amd_steps.push_back(static_cast<int>(g));
  }
  std::vector<int> hip_sees_none;  // AMD tasks holding none of the GPUs the user's HIP list names
  for (TaskPlan& task : tasks) {
    v.start(task);
    EnvList& env = task.env;
    std::vector<EnvRule>* rules = explanation ? &explanation->tasks[task.rank].env : nullptr;
    if (rules) {
      for (CompiledGroup* group : {&gpu_env, &nic_env, &omp_env})
        group->record_into(rules);
    }
    const bool nics = request.nic_env && task.nic_index >= 0;
    const char* nic_kind = nics ? nic_kind_name(topology.nics[task.nic_index].kind) : "";
    env.reserve(bytes ? bytes + bytes / 4 : 512);
    if (!task.gpus.empty())
      append_gpu_env(task, request, node_vendors, node_devices, gpu_env, v, amd_steps,
                     hip_sees_none, env);
    if (nics) nic_env.append(nic_kind, v, env);
    omp_env.append("", v, env);
    if (omp_places) {
      // A user's own placement wins, as every other variable of theirs does.
      env.add("OMP_PLACES", "cores", /*only_if_unset=*/true);
      env.add("OMP_PROC_BIND", "close", /*only_if_unset=*/true);
    }
    // Information for users and tools, and the marker that binding was done.
    env.add("GPUBIND_BOUND", "1");
    env.add("GPUBIND_LOCAL_RANK", Digits(task.rank).view());
    if (!request.cpus_bound_at_launch) env.add("GPUBIND_CPUS", v.get(Placeholder::kCpus));
    if (!task.gpus.empty()) {
      env.add("GPUBIND_GPUS", v.get(Placeholder::kGpus));
      // MIG instances have no bus id of their own here.
      if (const std::string& pci = v.get(Placeholder::kGpuPci); !pci.empty())
        env.add("GPUBIND_GPU_PCI", pci);
    }
    if (task.nic_index >= 0) env.add("GPUBIND_NIC", v.get(Placeholder::kNics));
    if (task.numa_node >= 0) env.add("GPUBIND_NUMA", Digits(task.numa_node).view());
    if (const std::string_view prefix = container_env_prefix_of(request.task_command);
        !prefix.empty())
      add_container_twins(prefix, env);
    bytes = env.bytes();
    if (rules) order_env_rules(env, *rules);
  }
  if (!node.why_not().empty()) warnings.push_back(node.why_not());
  if (!hip_sees_none.empty()) {
    std::string which = "local task " + std::to_string(hip_sees_none[0]);
    if (hip_sees_none.size() > 1)
      which += " and " + std::to_string(hip_sees_none.size() - 1) + " more";
    warnings.push_back(
        which + ": HIP_VISIBLE_DEVICES=" + request.inherited_hip_visible_devices->substr(0, 64) +
        " (counting the step's AMD GPUs) names none of its GPUs: HIP shows it none");
  }
}

}  // namespace gpubind
