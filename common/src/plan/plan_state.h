// What the planner's phases share: the usable cores, places and distances, and the Planner whose
// state each phase reads and fills in turn. Private to the planner's sources.
//   planner.cpp          the request check, the phases in order, the task plans
//   fixed_tasks.cpp      0. what Slurm or the user fixed before planning, kept as given
//   usable_cores.cpp     1. the step's CPUs minus reserved ones, trimmed to `smt` per core
//   gpu_names.cpp        2. the step's GPUs: which node GPU each token names, what runtimes call it
//   gpu_choice.cpp          their domains, GPUs per task
//   core_assignment.cpp  3. cores per task: split along domains, spill, share
//   nic_choice.cpp       4. NICs per task
//   env_render.cpp       then each task's environment (outside the Planner: env_render.h)
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gpubind/explain.h"
#include "gpubind/planner.h"
#include "plan_arena.h"

namespace gpubind::planning {

struct UsableCore {
  int core = 0;      // index into Topology::cores
  int pu_begin = 0;  // its usable PUs: Planner::usable_pus_[pu_begin, pu_begin + pu_count)
  int pu_count = 0;
  int first_pu = 0;
  int package = 0, numa = 0, l3 = -1;
};

// Indices into the usable-core list.
using Region = Scratch<int>;

// Cores [begin, end) of a region.
struct Range {
  int begin, end;
};

// std::stable_sort takes a heap buffer even for sorted input, which planning usually gives it.
template <class Vector, class Less>
void stable_sort_unless_sorted(Vector& v, Less less) {
  if (!std::is_sorted(v.begin(), v.end(), less)) std::stable_sort(v.begin(), v.end(), less);
}

// "1 task", "2 tasks".
std::string counted(size_t n, const std::string& noun);

// A request naming CPUs or GPUs this topology does not have.
Error node_mismatch(std::string message);

// `total` in `parts` sizes that differ by at most one, the larger first.
inline Scratch<int> even_split(int total, int parts) {
  Scratch<int> sizes(parts, total / parts);
  for (int i = 0; i < total % parts; ++i)
    ++sizes[i];
  return sizes;
}

// Where a task or device sits, for distances.
struct Place {
  const std::vector<int>* pci_path = nullptr;  // devices only
  int l3 = -1, numa = -1, package = -1;
  bool unknown = false;  // a device whose locality the node does not report
};

// Whether the place says where anything is (a task without GPUs or cores has no place yet).
inline bool is_placed(const Place& place) {
  return place.pci_path || place.l3 >= 0 || place.numa >= 0 || place.package >= 0 || place.unknown;
}

inline Place place_of(const Locality& locality) {
  return {&locality.pci_path, locality.l3_index, locality.numa_index, locality.package_index,
          !locality_known(locality)};
}

inline Place place_of(const UsableCore& core) {
  return {nullptr, core.l3, core.numa, core.package};
}

// Bridges two PCI devices share from the root port down; 0 when they meet only at the host.
inline int shared_pci_bridges(const Place& a, const Place& b) {
  if (!a.pci_path || !b.pci_path) return 0;
  const auto& x = *a.pci_path;
  const auto& y = *b.pci_path;
  const auto [end_x, end_y] = std::mismatch(x.begin(), x.end(), y.begin(), y.end());
  return static_cast<int>(end_x - x.begin());
}

// PU counts of each L3, NUMA node and package: a distance is the size of the smallest domain two
// places share, so "near" follows the node's own nesting (NUMA inside L3 with sub-NUMA
// clustering, L3 inside NUMA on AMD).
struct DomainSizes {
  Scratch<int> l3, numa, package;

  explicit DomainSizes(const Topology& topo)
      : l3(std::max(topo.l3_count, 0)),
        numa(std::max(topo.numa_count, 0)),
        package(std::max(topo.package_count, 0)) {
    auto grow = [](Scratch<int>& sizes, int index, int pus) {
      if (index < 0) return;
      if (index >= static_cast<int>(sizes.size())) sizes.resize(index + 1, 0);
      sizes[index] += pus;
    };
    for (const Core& core : topo.cores) {
      const int pus = static_cast<int>(core.pus.size());
      grow(l3, core.l3_index, pus);
      grow(numa, core.numa_index, pus);
      grow(package, core.package_index, pus);
    }
  }

  static int size(const Scratch<int>& sizes, int a, int b) {
    return a >= 0 && a == b && a < static_cast<int>(sizes.size()) ? sizes[a] : kFar;
  }

  // Devices behind one PCI port or switch: the hops between them (under 64). Otherwise 64 plus
  // the PUs of the smallest domain both lie in; kFar when none.
  int distance(const Place& a, const Place& b) const {
    if (const int shared = shared_pci_bridges(a, b); shared > 0) {
      return static_cast<int>(a.pci_path->size() + b.pci_path->size()) - 2 * shared;
    }
    const int smallest = std::min(
        {size(l3, a.l3, b.l3), size(numa, a.numa, b.numa), size(package, a.package, b.package)});
    return smallest == kFar ? kFar : 64 + smallest;
  }

  // The smallest thing two places share, in the order distance() ranks them.
  Nearness nearness(const Place& a, const Place& b) const {
    if (shared_pci_bridges(a, b) > 0) return Nearness::kPciSwitch;
    const int l3_size = size(l3, a.l3, b.l3), numa_size = size(numa, a.numa, b.numa);
    const int package_size = size(package, a.package, b.package);
    const int smallest = std::min({l3_size, numa_size, package_size});
    if (smallest == kFar) return a.unknown || b.unknown ? Nearness::kUnknown : Nearness::kMachine;
    if (smallest == l3_size) return Nearness::kL3;
    return smallest == numa_size ? Nearness::kNuma : Nearness::kPackage;
  }

  static constexpr int kFar = 1 << 30;
};

// One plan in the making. Each phase is a group of methods in a source file of its own (above);
// they share the state below, which run() takes from the request to the finished plan.
class Planner {
 public:
  // `explanation`, when given, receives the reasons for each decision (explain.h).
  Planner(const Topology& topology, const SitePolicy& policy, const PlanRequest& request,
          PlanExplanation* explanation = nullptr)
      : topo_(topology),
        policy_(policy),
        request_(request),
        sizes_(topology),
        explain_(explanation) {}

  Result<Plan> run();

 private:
  // Domains of one kind within one parent domain; beyond this, cores are split evenly.
  static constexpr int kMaxDomainsPerLevel = 256;

  // planner.cpp
  Status check_request();
  void build_task_plans();
  void finish_explanation();

  // fixed_tasks.cpp
  Status check_fixed();
  void take_fixed_gpus();
  void take_fixed_cores();
  bool take_slurm_rule_gpus();
  void give_fixed_gpu(int task, int g);
  void keep_fixed_cpus(int task, TaskPlan& plan) const;
  void list_gpu_places();

  // usable_cores.cpp
  Status find_usable_cores();
  void warn_cores_and_cpus_disagree(const CpuSet& step_cpus);
  void explain_reserved(const CpuSet& step, int smt);
  void split_cores_into_threads();
  int cores_wanted_per_task();

  // gpu_names.cpp
  Status resolve_step_gpus();
  Status check_step_gpus() const;
  Status place_tokens();
  int mig_parent(const std::string& token, int slurm_index) const;
  void number_for_runtimes(bool whole_node);
  void hand_out_unplaced_gpus();
  std::string device_token(int step_gpu, int tile);

  // gpu_choice.cpp
  void find_gpu_domains();
  int gpu_distance(int step_a, int step_b) const;
  Scratch<Scratch<int>> gpu_chunks(const Scratch<int>& sizes) const;
  Scratch<int> tasks_per_gpu_by_room() const;
  void give_chunks_to_tasks(Scratch<Scratch<int>> chunks, const Scratch<int>& tasks_per_chunk);
  void assign_gpus_by_rank();
  void assign_gpus_by_cores();
  void explain_gpu_by_cores(int task, int g, int share);
  void warn_shared_gpus();
  void warn_tasks_far_from_gpus();
  void warn_unknown_locality();

  // core_assignment.cpp
  void assign_cores();
  Scratch<Range> split(const Region& cores, const Scratch<int>& weights) const;
  void distribute(const Region& cores, int begin, int end, int tasks, int level,
                  Scratch<Range>& out) const;
  void deal(const Region& cores, int begin, int end, int tasks, int level,
            Scratch<Range>& out) const;
  int numa_straddles(const Region& cores, const Scratch<Range>& ranges) const;
  bool numa_counts_off(const Region& cores, int begin, int end, const Scratch<Range>& ranges) const;
  int avoidable_straddles(const Region& cores, int begin, int end,
                          const Scratch<Range>& ranges) const;
  void record_home_shares(const CpuSet& domain, const Scratch<int>& tasks,
                          const Scratch<int>& weights);
  void share_spare_cores();
  void hand_out_spares_nearest(const Scratch<int>& target, const Scratch<int>& weight);
  void fill_empty_tasks();
  void spill(int task, int wanted, const Place& anchor);
  void build_groups();
  // Distances from `anchor` to every usable unit, computed once per distinct anchor.
  const Scratch<int>& unit_distances(const Place& anchor);
  void share_core(int task, const Place& anchor, int spread_unit);
  bool take_from_richest(int task);

  // nic_choice.cpp
  void assign_nics();
  void explain_nics(int task, const Scratch<int>& gpu_nic, const Scratch<int>& equally_near);

  // Where a task sits: its first core, else its first GPU.
  Place task_place(int task) const {
    if (!task_cores_.empty() && !task_cores_[task].empty()) {
      return place_of(usable_[task_cores_[task][0]]);
    }
    if (!task_gpus_.empty() && !task_gpus_[task].empty())
      return place_of(gpu_locality(task_gpus_[task][0]));
    return {};
  }
  int distance(const Place& a, const Place& b) const { return sizes_.distance(a, b); }
  const Locality& gpu_locality(int step_gpu) const {
    return topo_.gpus[step_gpus_[step_gpu].node_index].locality;
  }
  void warn(std::string message) { plan_.warnings.push_back(std::move(message)); }

  // Explaining (only with an explanation to fill): how `unit` came to `task`; the last record
  // of a (task, unit) pair counts.
  void record_grant(int task, int unit, CoreSource source, Nearness nearness = Nearness::kMachine,
                    int domain_gpu = -1) {
    if (explain_) grant_records_.push_back({task, unit, source, nearness, domain_gpu});
  }
  void record_gpu(int task, const GpuChoice& choice) {
    if (explain_) explain_->tasks[task].gpus.push_back(choice);
  }
  Nearness unit_nearness(const Place& anchor, int unit) const {
    if (!is_placed(anchor)) return Nearness::kNoAnchor;
    return sizes_.nearness(anchor, place_of(usable_[unit]));
  }

  PlanArena arena_;  // first: every Scratch member below takes its memory from it
  const Topology& topo_;
  const SitePolicy& policy_;
  const PlanRequest& request_;
  const DomainSizes sizes_;
  Order order_ = Order::kGpu;
  int ntasks_ = 0;
  Scratch<UsableCore> usable_;  // cores, or single threads when tasks outnumber cores
  Scratch<int> usable_pus_;
  Scratch<StepGpu> step_gpus_;
  bool unplaced_ = false;    // the step's GPUs stay tokens (request_.unplaced_gpus), not placed
  bool fixed_gpus_ = false;  // every task's GPUs were fixed before planning (request_.fixed)
  bool fixed_cpus_ = false;  // every task's CPUs were
  // Per step GPU, the FLAT device number of its first tile (Level Zero), -1 when not known.
  Scratch<int> flat_first_device_;
  // Per step GPU, its domain: the first step GPU with the same locality CPUs.
  Scratch<int> gpu_domain_;
  Scratch<Scratch<int>> task_gpus_;  // step GPU indices per task
  Scratch<int> task_tiles_;          // tile per task when it holds one GPU's tile, else -1
  Scratch<Region> task_cores_;
  CpuSet all_pus_;
  CpuSet reserved_;
  Scratch<int> core_owners_;  // tasks per usable core
  struct Group {
    Region units;
    int free = 0;
    int next = 0;  // position of the first free unit
  };
  Scratch<Group> groups_;    // usable units by (package, NUMA, L3), built for spill()
  Scratch<int> home_share_;  // cores a task's GPU domains hold for it
  struct AnchorDistances {
    Place anchor;
    Scratch<int> to_unit;
  };
  Scratch<AnchorDistances> anchor_distances_;  // few: one per GPU locality at most
  PlanExplanation* explain_ = nullptr;
  struct GrantRecord {
    int task, unit;
    CoreSource source;
    Nearness nearness;
    int domain_gpu;
  };
  Scratch<GrantRecord> grant_records_;  // explaining only
  Plan plan_;
};

}  // namespace gpubind::planning
