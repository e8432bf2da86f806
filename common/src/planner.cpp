// The planner works in four steps:
//   1. usable cores: the step's CPUs minus reserved ones, trimmed to `smt` threads per core;
//   2. GPUs per task: consecutive ranks share a GPU, or a task gets GPUs that sit together;
//   3. cores per task: tasks with the same home domain (their GPUs' L3/NUMA, or the whole node
//      for order=cpu) split it along package > NUMA > L3 > core, so a task stays inside one L3
//      whenever its share fits; shortfalls spill to the nearest free L3 that holds them whole;
//   4. NIC per GPU (nearest, balanced), then the task's environment.
#include "gpubind/planner.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <numeric>
#include <optional>
#include <span>
#include <tuple>

#include "gpubind/env.h"
#include "plan_arena.h"

namespace gpubind {
namespace {

struct UsableCore {
  int core = 0;      // index into Topology::cores
  int pu_begin = 0;  // its usable PUs: Planner::usable_pus_[pu_begin, pu_begin + pu_count)
  int pu_count = 0;
  int first_pu = 0;
  int package = 0, numa = 0, l3 = -1;
};

// std::stable_sort takes a heap buffer even for sorted input, which planning usually gives it.
template <class Vector, class Less>
void stable_sort_unless_sorted(Vector& v, Less less) {
  if (!std::is_sorted(v.begin(), v.end(), less)) std::stable_sort(v.begin(), v.end(), less);
}

// Indices into the usable-core list.
using Region = Scratch<int>;

// "1 task", "2 tasks".
std::string counted(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// A PCI bus id as "dddd:bb:dd.f" in lower case: hwloc writes a 4-digit domain, NVIDIA's tools
// 8 digits ("00000000:C1:00.0"), and some tools none ("c1:00.0").
std::string canonical_bus_id(const std::string& text) {
  std::string lower;
  for (char c : text)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  const size_t first = lower.find(':');
  if (first == std::string::npos || lower.find(':', first + 1) == std::string::npos)
    return "0000:" + lower;
  const std::string domain = lower.substr(0, first);
  const size_t digits = domain.find_first_not_of('0');
  const std::string value = digits == std::string::npos ? "0" : domain.substr(digits);
  return std::string(value.size() < 4 ? 4 - value.size() : 0, '0') + value + lower.substr(first);
}

// The GPU whose PCI bus id is `bus_id`, -1 if none.
int gpu_with_bus_id(const Topology& topology, const std::string& bus_id) {
  const std::string wanted = canonical_bus_id(bus_id);
  for (const Gpu& gpu : topology.gpus)
    if (!gpu.pci_bus_id.empty() && canonical_bus_id(gpu.pci_bus_id) == wanted) return gpu.index;
  return -1;
}

// A request naming CPUs or GPUs this topology does not have.
Error node_mismatch(std::string message) {
  Error error = make_error(std::move(message));
  error.node_mismatch = true;
  return error;
}

// Where a task or device sits, for distances.
struct Place {
  const std::vector<int>* pci_path = nullptr;  // devices only
  int l3 = -1, numa = -1, package = -1;
};

Place place_of(const Locality& locality) {
  return {&locality.pci_path, locality.l3, locality.numa, locality.package};
}

Place place_of(const UsableCore& core) {
  return {nullptr, core.l3, core.numa, core.package};
}

// Bridges two PCI devices share from the root port down; 0 when they meet only at the host.
int shared_pci_bridges(const Place& a, const Place& b) {
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
      grow(l3, core.l3, pus);
      grow(numa, core.numa, pus);
      grow(package, core.package, pus);
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

  static constexpr int kFar = 1 << 30;
};

// Cores [begin, end) of a region.
struct Range {
  int begin, end;
};

class Planner {
 public:
  Planner(const Topology& topology, const SitePolicy& policy, const PlanRequest& request)
      : topo_(topology), policy_(policy), request_(request), sizes_(topology) {}

  Result<Plan> run();

 private:
  // Domains of one kind within one parent domain; beyond this, cores are split evenly.
  static constexpr int kMaxDomainsPerLevel = 256;

  Status check_request();
  Status find_usable_cores();
  void split_cores_into_threads();
  Status resolve_step_gpus();
  void find_gpu_domains();
  void assign_gpus_by_rank();
  void assign_gpus_by_cores();
  void assign_cores();
  void assign_nics();
  void render_env();
  void hand_out_unplaced_gpus();
  void warn_tasks_far_from_gpus();
  std::string device_token(const Gpu& gpu, const std::string& step_token, int tile);

  int cores_wanted_per_task();
  Scratch<Scratch<int>> gpu_chunks(const Scratch<int>& sizes) const;
  void give_chunks_to_tasks(Scratch<Scratch<int>> chunks, const Scratch<int>& tasks_per_chunk);
  Scratch<Range> split(const Region& cores, const Scratch<int>& weights) const;
  void distribute(const Region& cores, int begin, int end, int tasks, int level,
                  Scratch<Range>& out) const;
  void deal(const Region& cores, int begin, int end, int tasks, int level,
            Scratch<Range>& out) const;
  int avoidable_straddles(const Region& cores, int begin, int end,
                          const Scratch<Range>& ranges) const;
  void record_home_shares(const CpuSet& domain, const Scratch<int>& tasks,
                          const Scratch<int>& weights);
  void share_spare_cores();
  void fill_empty_tasks();
  void spill(int task, int wanted, const Place& anchor);
  void build_groups();
  // Distances from `anchor` to every usable unit, computed once per distinct anchor.
  const Scratch<int>& unit_distances(const Place& anchor);
  void share_core(int task, const Place& anchor);
  bool take_from_richest(int task);
  Place task_place(int task) const;
  int gpu_distance(int step_a, int step_b) const;
  int distance(const Place& a, const Place& b) const { return sizes_.distance(a, b); }
  const Locality& gpu_locality(int step_gpu) const {
    return topo_.gpus[step_gpus_[step_gpu].gpu].locality;
  }
  void warn(std::string message) { plan_.warnings.push_back(std::move(message)); }

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
  Plan plan_;
};

Status Planner::check_request() {
  ntasks_ = request_.ntasks;
  if (ntasks_ < 1)
    return make_error("ntasks must be at least 1 (got " + std::to_string(ntasks_) + ")");
  if (ntasks_ > kMaxTasks) {
    return make_error("ntasks " + std::to_string(ntasks_) + " exceeds the limit of " +
                      std::to_string(kMaxTasks) + " tasks per node");
  }
  for (auto [value, name] : {std::pair{request_.cpus_per_task, "cpus-per-task"},
                             std::pair{request_.gpus_per_task, "gpus-per-task"},
                             std::pair{request_.tasks_per_gpu, "tasks-per-gpu"}}) {
    if (value < 0) return make_error(std::string(name) + " must not be negative");
  }
  if (request_.smt && *request_.smt < 0) return make_error("smt must not be negative");
  order_ = request_.order.value_or(policy_.order);
  return Ok{};
}

Status Planner::find_usable_cores() {
  all_pus_ = topo_.all_pus();
  const CpuSet& all = all_pus_;
  const CpuSet allowed = request_.allowed_cpus.value_or(all);
  const CpuSet unknown = allowed.minus(all);
  if (!unknown.empty()) {
    warn("allowed CPUs " + unknown.to_list() + " are not in the node's topology; ignored");
  }
  const CpuSet& reserved = reserved_ = reserved_cpus(topo_, policy_);
  const int smt = request_.smt.value_or(policy_.smt);
  if (request_.allowed_cores &&
      request_.allowed_cores->last() >= static_cast<int>(topo_.cores.size())) {
    warn("allowed cores " +
         request_.allowed_cores->minus(CpuSet::range(0, static_cast<int>(topo_.cores.size()) - 1))
             .to_list() +
         " are not in the node's topology (" + std::to_string(topo_.cores.size()) +
         " cores); ignored");
  }
  usable_.reserve(topo_.cores.size());
  usable_pus_.reserve(all.count());
  for (const Core& core : topo_.cores) {
    if (request_.allowed_cores && !request_.allowed_cores->test(core.index)) continue;
    UsableCore usable;
    usable.core = core.index;
    usable.package = core.package;
    usable.numa = core.numa;
    usable.l3 = core.l3;
    usable.pu_begin = static_cast<int>(usable_pus_.size());
    for (int pu : core.pus) {
      if (!allowed.test(pu) || reserved.test(pu)) continue;
      if (smt > 0 && usable.pu_count == smt) break;
      usable_pus_.push_back(pu);
      ++usable.pu_count;
    }
    if (usable.pu_count == 0) continue;
    usable.first_pu = usable_pus_[usable.pu_begin];
    usable_.push_back(usable);
  }
  if (usable_.empty()) {
    if (!allowed.empty() && !allowed.intersects(all)) {
      return node_mismatch("none of the step's CPUs (" + allowed.to_list() +
                           ") is in the node's topology (" + all.to_list() + ")");
    }
    std::string step = "CPUs " + (allowed & all).to_list();
    if (request_.allowed_cores) step += " on cores " + request_.allowed_cores->to_list();
    // Only the reserved CPUs the step holds: the node's whole reserved list says nothing here.
    return make_error("no usable CPUs: the step's " + step +
                      " are all reserved by the site policy (reserved: " +
                      (allowed & all & reserved).to_list() + ")");
  }
  split_cores_into_threads();
  core_owners_.assign(usable_.size(), 0);
  return Ok{};
}

// More tasks than cores but no more than hardware threads: tasks get threads of their own before
// any thread is shared, so each thread becomes a unit of its own (its core's threads side by side).
void Planner::split_cores_into_threads() {
  const int threads = static_cast<int>(usable_pus_.size());
  if (ntasks_ <= static_cast<int>(usable_.size()) || ntasks_ > threads) return;
  Scratch<UsableCore> units;
  units.reserve(threads);
  for (const UsableCore& core : usable_) {
    for (int i = 0; i < core.pu_count; ++i) {
      UsableCore unit = core;
      unit.pu_begin = core.pu_begin + i;
      unit.pu_count = 1;
      unit.first_pu = usable_pus_[unit.pu_begin];
      units.push_back(unit);
    }
  }
  warn(counted(ntasks_, "task") + " on " + counted(usable_.size(), "usable core") +
       ": some tasks share cores, on hardware threads of their own");
  usable_ = std::move(units);
}

Status Planner::resolve_step_gpus() {
  if (!request_.unplaced_gpus.empty()) {
    if (request_.gpus && !request_.gpus->empty())
      return make_error("a step's GPUs are either node GPUs or unplaced tokens, not both");
    for (const std::string& token : request_.unplaced_gpus) {
      if (token.empty()) return make_error("an unplaced GPU has an empty token");
    }
    return Ok{};
  }
  if (!request_.gpus) {
    // Each vendor's runtime counts its own GPUs only: an AMD GPU after an NVIDIA one is ROCm's 0.
    step_gpus_.reserve(topo_.gpus.size());
    std::array<int, kVendorCount> before{};  // GPUs of each vendor so far
    for (const Gpu& gpu : topo_.gpus)
      step_gpus_.push_back({gpu.index, std::to_string(before[static_cast<size_t>(gpu.vendor)]++)});
    return Ok{};
  }
  step_gpus_.assign(request_.gpus->begin(), request_.gpus->end());
  for (StepGpu& gpu : step_gpus_) {
    if (gpu.pci.empty()) continue;
    const int found = gpu_with_bus_id(topo_, gpu.pci);
    if (found < 0) return node_mismatch("no GPU of this node has PCI bus id '" + gpu.pci + "'");
    gpu.gpu = found;
  }
  Scratch<bool> seen(topo_.gpus.size(), false);
  for (const StepGpu& gpu : step_gpus_) {
    if (gpu.gpu < 0) return make_error("GPU index " + std::to_string(gpu.gpu) + " is negative");
    if (gpu.gpu >= static_cast<int>(topo_.gpus.size())) {
      return node_mismatch("GPU " + std::to_string(gpu.gpu) + " does not exist (the node has " +
                           std::to_string(topo_.gpus.size()) + " GPUs)");
    }
    if (seen[gpu.gpu]) return make_error("GPU " + std::to_string(gpu.gpu) + " is listed twice");
    if (gpu.token.empty())
      return make_error("GPU " + std::to_string(gpu.gpu) + " has an empty token");
    seen[gpu.gpu] = true;
  }
  return Ok{};
}

void Planner::find_gpu_domains() {
  const int count = static_cast<int>(step_gpus_.size());
  gpu_domain_.resize(count);
  for (int g = 0; g < count; ++g) {
    gpu_domain_[g] = g;
    for (int h = 0; h < g; ++h) {
      if (gpu_domain_[h] == h && gpu_locality(h).cpus == gpu_locality(g).cpus) {
        gpu_domain_[g] = h;
        break;
      }
    }
  }
}

int Planner::gpu_distance(int step_a, int step_b) const {
  const Gpu& a = topo_.gpus[step_gpus_[step_a].gpu];
  const Gpu& b = topo_.gpus[step_gpus_[step_b].gpu];
  if (!a.pci_bus_id.empty() && a.pci_bus_id == b.pci_bus_id) return 0;
  return 1 + distance(place_of(a.locality), place_of(b.locality));
}

// Groups step GPUs into chunks of the given sizes so a multi-GPU task gets GPUs that sit
// together: first every chunk one domain can hold whole (grown from the first free GPU of such
// a domain), then the rest from the nearest free GPUs. Chunks come out in step GPU order.
Scratch<Scratch<int>> Planner::gpu_chunks(const Scratch<int>& sizes) const {
  const int count = static_cast<int>(step_gpus_.size());
  const Scratch<int>& domain = gpu_domain_;
  Scratch<int> free_in_domain(count, 0);
  for (int g = 0; g < count; ++g)
    ++free_in_domain[domain[g]];
  Scratch<bool> taken(count, false);
  auto grow = [&](Scratch<int>& chunk, int seed, int size, bool same_domain) {
    chunk.reserve(size);
    chunk.push_back(seed);
    taken[seed] = true;
    --free_in_domain[domain[seed]];
    while (static_cast<int>(chunk.size()) < size) {
      int best = -1, best_distance = 0;
      for (int g = 0; g < count; ++g) {
        if (taken[g] || (same_domain && domain[g] != domain[seed])) continue;
        const int d = gpu_distance(seed, g);
        if (best < 0 || d < best_distance) {
          best = g;
          best_distance = d;
        }
      }
      if (best < 0) return;
      taken[best] = true;
      --free_in_domain[domain[best]];
      chunk.push_back(best);
    }
  };
  Scratch<Scratch<int>> chunks(sizes.size());
  for (size_t c = 0; c < sizes.size(); ++c) {
    for (int seed = 0; seed < count; ++seed) {
      if (!taken[seed] && free_in_domain[domain[seed]] >= sizes[c]) {
        grow(chunks[c], seed, sizes[c], true);
        break;
      }
    }
  }
  for (size_t c = 0; c < sizes.size(); ++c) {
    if (!chunks[c].empty()) continue;
    const auto seed = std::find(taken.begin(), taken.end(), false);
    if (seed == taken.end()) break;
    grow(chunks[c], static_cast<int>(seed - taken.begin()), sizes[c], false);
  }
  std::erase_if(chunks, [](const Scratch<int>& chunk) { return chunk.empty(); });
  stable_sort_unless_sorted(chunks, [](const auto& a, const auto& b) {
    return *std::min_element(a.begin(), a.end()) < *std::min_element(b.begin(), b.end());
  });
  return chunks;
}

// Consecutive ranks share a chunk; a chunk of one GPU with tiles hands each sharer its tiles.
void Planner::give_chunks_to_tasks(Scratch<Scratch<int>> chunks,
                                   const Scratch<int>& tasks_per_chunk) {
  task_gpus_.assign(ntasks_, {});
  task_tiles_.assign(ntasks_, -1);
  int rank = 0;
  for (size_t c = 0; c < chunks.size() && rank < ntasks_; ++c) {
    const int sharers = std::min(tasks_per_chunk[c], ntasks_ - rank);
    const int tiles = chunks[c].size() == 1 ? topo_.gpus[step_gpus_[chunks[c][0]].gpu].tiles : 0;
    for (int j = 0; j < sharers; ++j, ++rank) {
      task_gpus_[rank] = j + 1 < sharers ? chunks[c] : std::move(chunks[c]);
      if (sharers > 1 && tiles > 1) task_tiles_[rank] = j * tiles / sharers;
    }
  }
}

Scratch<int> even_split(int total, int parts) {
  Scratch<int> sizes(parts, total / parts);
  for (int i = 0; i < total % parts; ++i)
    ++sizes[i];
  return sizes;
}

void Planner::assign_gpus_by_rank() {
  const int gpus = static_cast<int>(step_gpus_.size());
  Scratch<int> chunk_sizes;
  Scratch<int> tasks_per_chunk;
  if (request_.gpus_per_task > 0) {
    const int per_task = std::min(request_.gpus_per_task, gpus);
    const int chunks = std::max(1, std::min(ntasks_, gpus / per_task));
    if (request_.gpus_per_task * ntasks_ > gpus) {
      warn(counted(ntasks_, "task") + " x " + std::to_string(request_.gpus_per_task) +
           " GPUs per task exceeds the step's " + counted(gpus, "GPU") + "; tasks share GPUs");
    }
    chunk_sizes.assign(chunks, per_task);
    tasks_per_chunk = even_split(ntasks_, chunks);
  } else if (request_.tasks_per_gpu > 0) {
    int chunks = (ntasks_ + request_.tasks_per_gpu - 1) / request_.tasks_per_gpu;
    if (chunks > gpus) {
      warn(counted(ntasks_, "task") + " at " + std::to_string(request_.tasks_per_gpu) +
           " per GPU need " + counted(chunks, "GPU") + " but the step has " + std::to_string(gpus) +
           "; tasks are spread evenly");
      chunks = gpus;
      tasks_per_chunk = even_split(ntasks_, chunks);
    } else {
      tasks_per_chunk.assign(chunks, request_.tasks_per_gpu);
    }
    chunk_sizes.assign(chunks, 1);
  } else if (ntasks_ >= gpus) {
    chunk_sizes.assign(gpus, 1);
    tasks_per_chunk = even_split(ntasks_, gpus);
  } else {
    chunk_sizes = even_split(gpus, ntasks_);
    tasks_per_chunk.assign(ntasks_, 1);
  }
  give_chunks_to_tasks(gpu_chunks(chunk_sizes), tasks_per_chunk);
}

// order=cpu: each task takes the GPUs nearest its cores. GPU capacities are an even share of the
// demand (or the requested tasks-per-gpu), so every GPU is used before any takes one more task.
void Planner::assign_gpus_by_cores() {
  const int gpus = static_cast<int>(step_gpus_.size());
  int per_task = request_.gpus_per_task;
  if (per_task == 0) per_task = ntasks_ >= gpus ? 1 : gpus / ntasks_;
  per_task = std::min(per_task, gpus);
  const int demand = ntasks_ * per_task;
  int base = demand / gpus, extra = demand % gpus;
  if (request_.tasks_per_gpu > 0 && request_.tasks_per_gpu * gpus >= demand) {
    base = request_.tasks_per_gpu;
    extra = 0;
  }
  Scratch<int> load(gpus, 0);
  task_gpus_.assign(ntasks_, {});
  task_tiles_.assign(ntasks_, -1);
  Scratch<int> local_cores(gpus);
  for (int task = 0; task < ntasks_; ++task) {
    const Place here = task_place(task);
    // Nearest first: the GPU whose domain holds most of the task's cores, then by distance.
    for (int g = 0; g < gpus; ++g) {
      const CpuSet& domain = gpu_locality(g).cpus;
      local_cores[g] =
          static_cast<int>(std::count_if(task_cores_[task].begin(), task_cores_[task].end(),
                                         [&](int u) { return domain.test(usable_[u].first_pu); }));
    }
    Scratch<int>& mine = task_gpus_[task];
    for (int n = 0; n < per_task; ++n) {
      // Within capacity first; past it only if capacities leave this task nothing new.
      for (bool capped : {true, false}) {
        int best = -1;
        std::array<int, 4> best_key{};
        for (int g = 0; g < gpus; ++g) {
          if (std::find(mine.begin(), mine.end(), g) != mine.end()) continue;
          if (capped && !(load[g] < base || (load[g] == base && extra > 0))) continue;
          const std::array<int, 4> key = {-local_cores[g],
                                          distance(here, place_of(gpu_locality(g))), load[g], g};
          if (best < 0 || key < best_key) {
            best = g;
            best_key = key;
          }
        }
        if (best < 0) continue;
        if (load[best] == base && extra > 0) --extra;
        ++load[best];
        mine.push_back(best);
        break;
      }
    }
  }
}

int Planner::cores_wanted_per_task() {
  if (request_.cpus_per_task == 0) return 0;
  int threads = 1;
  for (const UsableCore& core : usable_)
    threads = std::max(threads, core.pu_count);
  const int wanted = (request_.cpus_per_task + threads - 1) / threads;
  const int usable = static_cast<int>(usable_.size());
  if (wanted * ntasks_ <= usable) return wanted;
  const int fitted = std::max(1, usable / ntasks_);
  warn("cpus-per-task " + std::to_string(request_.cpus_per_task) + " needs " +
       counted(wanted * ntasks_, "core") + " for " + counted(ntasks_, "task") + " but only " +
       std::to_string(usable) + (usable == 1 ? " is" : " are") + " usable; each task gets " +
       counted(fitted, "core"));
  return fitted;
}

// Sizes in proportion to weights, largest remainder first (lower index on ties).
Scratch<int> proportional_split(int total, const Scratch<int>& weights) {
  const long sum = std::accumulate(weights.begin(), weights.end(), 0L);
  Scratch<int> sizes(weights.size(), 0);
  if (sum <= 0) return sizes;
  Scratch<std::pair<long, int>> remainders(weights.size());
  int given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const long scaled = static_cast<long>(total) * weights[i];
    sizes[i] = static_cast<int>(scaled / sum);
    given += sizes[i];
    remainders[i] = {-(scaled % sum), static_cast<int>(i)};
  }
  std::sort(remainders.begin(), remainders.end());
  for (int i = 0; i < total - given; ++i)
    ++sizes[remainders[i].second];
  return sizes;
}

// Consecutive ranges of the given sizes from `begin`.
void append_ranges(int begin, const Scratch<int>& sizes, Scratch<Range>& out) {
  for (int size : sizes) {
    out.push_back({begin, begin + size});
    begin += size;
  }
}

// Splits `cores` (in topology order) among tasks, in proportion to their weights.
Scratch<Range> Planner::split(const Region& cores, const Scratch<int>& weights) const {
  Scratch<Range> out;
  out.reserve(weights.size());
  const int n = static_cast<int>(cores.size());
  if (std::adjacent_find(weights.begin(), weights.end(), std::not_equal_to<>()) == weights.end()) {
    distribute(cores, 0, n, static_cast<int>(weights.size()), 0, out);
  } else {
    append_ranges(0, proportional_split(n, weights), out);
  }
  return out;
}

// Tasks in `ranges` that span two L3s of cores[begin, end) although one of them has room for the
// whole task.
int Planner::avoidable_straddles(const Region& cores, int begin, int end,
                                 const Scratch<Range>& ranges) const {
  auto l3 = [&](int i) { return usable_[cores[i]].l3; };
  int largest = 0;  // the most cores of one L3 (a run, as cores are in topology order)
  for (int i = begin, run = 0; i < end; ++i) {
    run = i > begin && l3(i) == l3(i - 1) ? run + 1 : 1;
    largest = std::max(largest, run);
  }
  int count = 0;
  for (const Range& r : ranges) {
    const int size = r.end - r.begin;
    count += size > 1 && size <= largest && l3(r.begin) != l3(r.end - 1);
  }
  return count;
}

// Splits cores[begin, end) among `tasks` equal tasks: core counts differ by at most one, unless
// that makes a task straddle an L3 that could hold it whole; then domains are dealt out (deal),
// whichever straddles less. `cores` is sorted by (package, NUMA, L3), so every
// domain and every region is a range.
void Planner::distribute(const Region& cores, int begin, int end, int tasks, int level,
                         Scratch<Range>& out) const {
  if (tasks <= 0) return;
  const size_t first = out.size();
  append_ranges(begin, even_split(end - begin, tasks), out);
  if (level == 3 || tasks >= end - begin) return;
  const Scratch<Range> balanced(out.begin() + first, out.end());
  const int balanced_straddles = avoidable_straddles(cores, begin, end, balanced);
  if (balanced_straddles == 0) return;
  Scratch<Range> dealt;
  dealt.reserve(tasks);
  deal(cores, begin, end, tasks, level, dealt);
  if (avoidable_straddles(cores, begin, end, dealt) < balanced_straddles) {
    std::copy(dealt.begin(), dealt.end(), out.begin() + first);
  }
}

// Splits along the domains of `level` (package > NUMA > L3): fewer tasks than domains get whole
// domains; more tasks are dealt out in proportion to the domains' sizes and split within them.
void Planner::deal(const Region& cores, int begin, int end, int tasks, int level,
                   Scratch<Range>& out) const {
  auto key = [&](int i) {
    const UsableCore& c = usable_[cores[i]];
    return level == 0 ? c.package : level == 1 ? c.numa : c.l3;
  };
  Scratch<int> bounds = {begin};
  for (int i = begin + 1; i <= end; ++i) {
    if (i == end || key(i) != key(i - 1)) bounds.push_back(i);
  }
  const int m = static_cast<int>(bounds.size()) - 1;
  if (m > kMaxDomainsPerLevel) return distribute(cores, begin, end, tasks, 3, out);
  if (m == 1) return distribute(cores, begin, end, tasks, level + 1, out);
  if (tasks <= m) {
    for (int t = 0; t < tasks; ++t)
      out.push_back({bounds[t * m / tasks], bounds[(t + 1) * m / tasks]});
    return;
  }
  Scratch<int> domain_sizes(m);
  for (int d = 0; d < m; ++d)
    domain_sizes[d] = bounds[d + 1] - bounds[d];
  const Scratch<int> shares = proportional_split(tasks, domain_sizes);
  for (int d = 0; d < m; ++d)
    distribute(cores, bounds[d], bounds[d + 1], shares[d], level + 1, out);
}

Place Planner::task_place(int task) const {
  if (!task_cores_.empty() && !task_cores_[task].empty()) {
    return place_of(usable_[task_cores_[task][0]]);
  }
  if (!task_gpus_.empty() && !task_gpus_[task].empty())
    return place_of(gpu_locality(task_gpus_[task][0]));
  return {};
}

// Takes free cores nearest `anchor`, preferring an L3 that holds everything still wanted, then
// the cores next to the task's own.
void Planner::spill(int task, int wanted, const Place& anchor) {
  if (groups_.empty()) build_groups();
  Region& mine = task_cores_[task];
  const int own = mine.empty() ? 0 : mine.front();
  mine.reserve(wanted);
  while (static_cast<int>(mine.size()) < wanted) {
    const int missing = wanted - static_cast<int>(mine.size());
    Group* best = nullptr;
    std::array<int, 4> best_key{};
    for (Group& group : groups_) {
      if (group.free == 0) continue;
      const int first = group.units[group.next];
      const std::array<int, 4> key = {distance(anchor, place_of(usable_[first])),
                                      group.free >= missing ? 0 : 1, std::abs(first - own), first};
      if (!best || key < best_key) {
        best = &group;
        best_key = key;
      }
    }
    if (!best) return;  // nothing free anywhere
    // Free units of a group are taken in order, and nothing frees one, so `next` only advances.
    for (; best->next < static_cast<int>(best->units.size()); ++best->next) {
      const int u = best->units[best->next];
      if (core_owners_[u] != 0) continue;
      if (static_cast<int>(mine.size()) == wanted) break;
      core_owners_[u] = 1;
      --best->free;
      mine.push_back(u);
    }
  }
}

// Usable units that share an L3, NUMA node and package, with their free count and first free one.
void Planner::build_groups() {
  // Units come in topology order, so a group's units are usually adjacent: try the last group
  // first, then the others.
  auto same = [&](const Group& group, const UsableCore& c) {
    const UsableCore& first = usable_[group.units.front()];
    return first.package == c.package && first.numa == c.numa && first.l3 == c.l3;
  };
  for (size_t u = 0; u < usable_.size(); ++u) {
    const UsableCore& c = usable_[u];
    auto it = !groups_.empty() && same(groups_.back(), c)
                  ? groups_.end() - 1
                  : std::find_if(groups_.begin(), groups_.end(),
                                 [&](const Group& group) { return same(group, c); });
    if (it == groups_.end()) {
      groups_.emplace_back();
      it = groups_.end() - 1;
    }
    it->units.push_back(static_cast<int>(u));
  }
  for (Group& group : groups_) {
    for (int u : group.units)
      group.free += core_owners_[u] == 0;
    while (group.next < static_cast<int>(group.units.size()) &&
           core_owners_[group.units[group.next]] != 0)
      ++group.next;
  }
}

// A task left with no core while others hold several: the task holding most cores (nearest
// first) gives up its last one, so no core is shared while there are enough.
bool Planner::take_from_richest(int task) {
  const Place anchor = task_place(task);
  int donor = -1;
  std::array<int, 3> best_key{};
  for (int other = 0; other < ntasks_; ++other) {
    const int held = static_cast<int>(task_cores_[other].size());
    if (held < 2) continue;
    const std::array<int, 3> key = {
        -held, distance(anchor, place_of(usable_[task_cores_[other].back()])), other};
    if (donor < 0 || key < best_key) {
      donor = other;
      best_key = key;
    }
  }
  if (donor < 0) return false;
  Region& from = task_cores_[donor];
  std::sort(from.begin(), from.end());
  task_cores_[task].push_back(from.back());
  from.pop_back();
  return true;
}

// More tasks than threads: the task shares a core near its anchor (its GPU's), the least loaded
// of those, while no core carries more than an even share of the tasks.
const Scratch<int>& Planner::unit_distances(const Place& anchor) {
  for (const AnchorDistances& known : anchor_distances_) {
    const Place& a = known.anchor;
    if (a.pci_path == anchor.pci_path && a.l3 == anchor.l3 && a.numa == anchor.numa &&
        a.package == anchor.package)
      return known.to_unit;
  }
  Scratch<int> to_unit(usable_.size());
  for (size_t u = 0; u < usable_.size(); ++u)
    to_unit[u] = distance(anchor, place_of(usable_[u]));
  anchor_distances_.push_back({anchor, std::move(to_unit)});
  return anchor_distances_.back().to_unit;
}

void Planner::share_core(int task, const Place& anchor) {
  const int units = static_cast<int>(usable_.size());
  const int even_load = (ntasks_ + units - 1) / units;
  const Scratch<int>& to_unit = unit_distances(anchor);
  int best = -1;
  std::array<int, 4> best_key{};
  for (int u = 0; u < units; ++u) {
    const std::array<int, 4> key = {core_owners_[u] >= even_load, to_unit[u], core_owners_[u], u};
    if (best < 0 || key < best_key) {
      best = u;
      best_key = key;
    }
  }
  ++core_owners_[best];
  task_cores_[task].push_back(best);
}

void Planner::assign_cores() {
  task_cores_.assign(ntasks_, {});
  const int wanted = cores_wanted_per_task();

  // Domains: each GPU's locality (order=gpu), or the whole node. A task's weight in a domain is
  // the number of its GPUs there, so its cores follow its GPUs.
  struct Domain {
    CpuSet cpus;
    Scratch<int> tasks, weights;
  };
  Scratch<Domain> domains;
  domains.reserve(step_gpus_.size() + 1);
  // By id: a GPU domain (gpu_domain_), or the whole node (the last id).
  const int node_id = static_cast<int>(step_gpus_.size());
  Scratch<int> domain_of_id(node_id + 1, -1);
  auto index_of = [&](int id) {
    int& slot = domain_of_id[id];
    if (slot < 0) {
      slot = static_cast<int>(domains.size());
      domains.push_back({id == node_id ? all_pus_ : gpu_locality(id).cpus, {}, {}});
    }
    return slot;
  };
  auto join = [&](int id, int task) {
    // A GPU whose domain is the whole node shares the node's.
    if (id != node_id && domain_of_id[id] < 0 && gpu_locality(id).cpus == all_pus_)
      domain_of_id[id] = index_of(node_id);
    const int index = index_of(id);
    Domain& domain = domains[index];
    if (!domain.tasks.empty() && domain.tasks.back() == task) {
      ++domain.weights.back();
    } else {
      domain.tasks.push_back(task);
      domain.weights.push_back(1);
    }
  };
  for (int task = 0; task < ntasks_; ++task) {
    if (order_ == Order::kGpu && !task_gpus_[task].empty()) {
      for (int g : task_gpus_[task])
        join(gpu_domain_[g], task);
    } else {
      join(node_id, task);
    }
  }
  // Smaller domains first, so a domain nested in another keeps its cores.
  stable_sort_unless_sorted(
      domains, [](const Domain& a, const Domain& b) { return a.cpus.count() < b.cpus.count(); });

  home_share_.assign(ntasks_, 0);
  Region free;
  free.reserve(usable_.size());
  auto topology_order = [&](int a, int b) {
    const UsableCore &x = usable_[a], &y = usable_[b];
    return std::tie(x.package, x.numa, x.l3, a) < std::tie(y.package, y.numa, y.l3, b);
  };
  for (const Domain& domain : domains) {
    free.clear();
    for (size_t u = 0; u < usable_.size(); ++u) {
      if (core_owners_[u] == 0 && domain.cpus.test(usable_[u].first_pu)) {
        free.push_back(static_cast<int>(u));
      }
    }
    if (!std::is_sorted(free.begin(), free.end(), topology_order)) {
      std::sort(free.begin(), free.end(), topology_order);
    }
    const Scratch<Range> ranges = split(free, domain.weights);
    if (policy_.gpu_domain_only) record_home_shares(domain.cpus, domain.tasks, domain.weights);
    for (size_t j = 0; j < domain.tasks.size(); ++j) {
      Region& mine = task_cores_[domain.tasks[j]];
      int end = ranges[j].end;
      if (wanted > 0)
        end = std::min(end, ranges[j].begin + std::max(0, wanted - static_cast<int>(mine.size())));
      mine.reserve(mine.size() + std::max(0, end - ranges[j].begin));
      for (int i = ranges[j].begin; i < end; ++i) {
        core_owners_[free[i]] = 1;
        mine.push_back(free[i]);
      }
    }
  }

  if (wanted > 0) {
    for (int task = 0; task < ntasks_; ++task) {
      if (static_cast<int>(task_cores_[task].size()) < wanted)
        spill(task, wanted, task_place(task));
    }
  } else {
    share_spare_cores();
  }
  fill_empty_tasks();
  for (Region& region : task_cores_)
    std::sort(region.begin(), region.end());
}

// What a domain holds for each of its tasks, whatever the step's allocation: under
// gpu_domain_only, a task whose domain the step left without cores gets as many elsewhere.
void Planner::record_home_shares(const CpuSet& domain, const Scratch<int>& tasks,
                                 const Scratch<int>& weights) {
  int capacity = 0;
  for (const Core& core : topo_.cores)
    capacity += domain.test(core.pus[0]) && !reserved_.test(core.pus[0]);
  const Scratch<int> shares = proportional_split(capacity, weights);
  for (size_t j = 0; j < tasks.size(); ++j)
    home_share_[tasks[j]] += shares[j];
}

// Cores no task's domain gave out (no GPU near them, or the step's CPUs lie elsewhere) go to the
// nearest tasks: each task's count in proportion to its GPUs, the poorest first. With
// gpu_domain_only they stay idle, except for tasks left with nothing.
void Planner::share_spare_cores() {
  int spare = static_cast<int>(std::count(core_owners_.begin(), core_owners_.end(), 0));
  if (spare == 0) return;
  Scratch<int> target(ntasks_), weight(ntasks_);
  for (int task = 0; task < ntasks_; ++task) {
    target[task] = static_cast<int>(task_cores_[task].size());
    weight[task] = std::max<int>(1, task_gpus_[task].size());
  }
  if (policy_.gpu_domain_only) {
    Scratch<int> empty;
    for (int task = 0; task < ntasks_; ++task) {
      if (target[task] == 0) empty.push_back(task);
    }
    const Scratch<int> shares =
        empty.empty() ? Scratch<int>{} : even_split(spare, static_cast<int>(empty.size()));
    for (size_t i = 0; i < empty.size(); ++i)
      target[empty[i]] = std::max(1, std::min(shares[i], home_share_[empty[i]]));
  } else {
    // Water-filling: each spare core to the task with the fewest cores per GPU (lowest rank on
    // ties).
    auto richer = [&](int a, int b) {
      const long x = static_cast<long>(target[a]) * weight[b];
      const long y = static_cast<long>(target[b]) * weight[a];
      return x != y ? x > y : a > b;
    };
    Scratch<int> heap(ntasks_);
    std::iota(heap.begin(), heap.end(), 0);
    std::make_heap(heap.begin(), heap.end(), richer);
    for (; spare > 0; --spare) {
      std::pop_heap(heap.begin(), heap.end(), richer);
      ++target[heap.back()];
      std::push_heap(heap.begin(), heap.end(), richer);
    }
  }
  for (int task = 0; task < ntasks_; ++task) {
    if (static_cast<int>(task_cores_[task].size()) < target[task])
      spill(task, target[task], task_place(task));
  }
  // Tasks get fewer CPUs than the step holds: say why.
  const auto idle = std::count(core_owners_.begin(), core_owners_.end(), 0);
  if (idle > 0) {
    warn(counted(idle, "usable core") + " of the step " + (idle == 1 ? "stays" : "stay") +
         " idle: no task's GPU is near " + (idle == 1 ? "it" : "them") + " (gpu_domain_only)");
  }
}

// Tasks still without a core: one from the richest task, or a shared core when there are more
// tasks than threads.
void Planner::fill_empty_tasks() {
  bool shared = false;
  for (int task = 0; task < ntasks_; ++task) {
    if (!task_cores_[task].empty()) continue;
    // Once no task has a core to spare, none will again: sharing only adds one-core tasks.
    if (shared || !take_from_richest(task)) {
      share_core(task, task_place(task));
      shared = true;
    }
  }
  if (shared) {
    warn(counted(ntasks_, "task") + " on " + counted(usable_.size(), "usable core") +
         ": some tasks share cores");
  }
}

// Each node GPU's NIC, whatever the step: the i-th of the GPUs with the same equally nearest NICs
// takes the i-th of them, round robin. Jobs sharing a node thus spread over the NICs instead of
// all taking the first, and a task of two such GPUs gets two NICs.
Scratch<int> gpu_nics(const Topology& topo, const DomainSizes& sizes) {
  const int gpus = static_cast<int>(topo.gpus.size());
  Scratch<Scratch<int>> nearest(gpus);
  for (int g = 0; g < gpus; ++g) {
    int best = DomainSizes::kFar + 1;
    for (const Nic& nic : topo.nics) {
      const int d = sizes.distance(place_of(topo.gpus[g].locality), place_of(nic.locality));
      if (d < best) nearest[g].clear();
      if (d <= best) {
        best = d;
        nearest[g].push_back(nic.index);
      }
    }
  }
  Scratch<int> nic(gpus, -1);
  for (int g = 0; g < gpus; ++g) {
    if (nearest[g].empty()) continue;
    const auto before = std::count(nearest.begin(), nearest.begin() + g, nearest[g]);
    nic[g] = nearest[g][before % nearest[g].size()];
  }
  return nic;
}

void Planner::assign_nics() {
  if (topo_.nics.empty()) return;
  const Scratch<int> gpu_nic = gpu_nics(topo_, sizes_);
  Scratch<int> load(topo_.nics.size(), 0);
  for (int task = 0; task < ntasks_; ++task) {
    for (int g : task_gpus_[task])
      ++load[gpu_nic[step_gpus_[g].gpu]];
  }
  // Tasks without GPUs: the nearest NIC to their cores, the least used among equals.
  auto nearest_nic = [&](const Place& from) {
    int best = -1;
    std::array<int, 3> best_key{};
    for (size_t n = 0; n < topo_.nics.size(); ++n) {
      const std::array<int, 3> key = {distance(from, place_of(topo_.nics[n].locality)), load[n],
                                      static_cast<int>(n)};
      if (best < 0 || key < best_key) {
        best = static_cast<int>(n);
        best_key = key;
      }
    }
    ++load[best];
    return best;
  };
  // A task's NICs: its GPUs' NICs, in GPU order, each once. The first (where one NIC per task is
  // used, as by Cray MPICH) is, of those as near its first GPU as that GPU's own, the one fewest
  // earlier tasks lead with: tasks of several GPUs sharing NICs do not all lead with one.
  Scratch<int> leading(topo_.nics.size(), 0);
  for (int task = 0; task < ntasks_; ++task) {
    TaskPlan& plan = plan_.tasks[task];
    if (task_gpus_[task].empty()) plan.nics.push_back(nearest_nic(task_place(task)));
    for (int g : task_gpus_[task]) {
      const int nic = gpu_nic[step_gpus_[g].gpu];
      if (std::find(plan.nics.begin(), plan.nics.end(), nic) == plan.nics.end())
        plan.nics.push_back(nic);
    }
    if (!task_gpus_[task].empty()) {
      // Among the NICs as near the task's first GPU as its own.
      const Place gpu = place_of(gpu_locality(task_gpus_[task][0]));
      const int near = distance(gpu, place_of(topo_.nics[plan.nics.front()].locality));
      auto first = plan.nics.begin();
      for (auto it = plan.nics.begin(); it != plan.nics.end(); ++it) {
        if (leading[*it] < leading[*first] &&
            distance(gpu, place_of(topo_.nics[*it].locality)) == near)
          first = it;
      }
      std::rotate(plan.nics.begin(), first, first + 1);
    }
    ++leading[plan.nics.front()];
    plan.nic = plan.nics.front();
    for (int n : plan.nics)
      plan.nic_name += (plan.nic_name.empty() ? "" : ",") + topo_.nics[n].name;
  }
}

// The most frequent value (the smallest on ties), -1 for none. Sorts `values`.
int majority(Scratch<int>& values) {
  std::sort(values.begin(), values.end());
  int best = -1, best_count = 0;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j < values.size() && values[j] == values[i])
      ++j;
    if (static_cast<int>(j - i) > best_count) {
      best = values[i];
      best_count = static_cast<int>(j - i);
    }
    i = j;
  }
  return best;
}

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
    if (task.nic < 0) continue;
    const int ordinal = mpich_nic_number(topo, task.nic);
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
    auto nics = [&](auto field) { append_nics(topo_, task_->nics, field, out); };
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
        return nics([](const Nic& n) { return n.rdma.empty() ? n.netdev : n.rdma + ":1"; });
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
    const Nic* nic = task_->nic >= 0 ? &topo_.nics[task_->nic] : nullptr;
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
        return append_number(out, task_->numa, task_->numa >= 0);
      case Placeholder::kL3:
        return append_number(out, task_->l3, task_->l3 >= 0);
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

void Planner::render_env() {
  NodeValues node(topo_, plan_.tasks);
  const bool omp_places = request_.omp_places.value_or(policy_.omp_places);
  CompiledGroup gpu_env(policy_.gpu_env), nic_env(policy_.nic_env), omp_env(policy_.omp_env);
  size_t bytes = 0;  // the last task's: tasks of a step are alike, so one allocation each
  TaskPlaceholders v(topo_, ntasks_, node);
  for (TaskPlan& task : plan_.tasks) {
    v.start(task);
    EnvList& env = task.env;
    const bool gpus = request_.gpu_env && !task.gpus.empty();
    const bool nics = request_.nic_env && task.nic >= 0;
    const char* vendor = gpus ? vendor_name(task.gpus[0].vendor) : "";
    const char* nic_kind = nics ? nic_kind_name(topo_.nics[task.nic].kind) : "";
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
    if (task.nic >= 0) env.add("GPUBIND_NIC", v.get(Placeholder::kNics));
    if (task.numa >= 0) env.add("GPUBIND_NUMA", Digits(task.numa).view());
    bytes = env.bytes();
  }
}

// Tokens without a node GPU (MIG instances: which GPU holds each is not known here) go to tasks
// like GPUs do, in blocks or shared, after the cores were planned without them.
void Planner::hand_out_unplaced_gpus() {
  const std::vector<std::string>& tokens = request_.unplaced_gpus;
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return;
  const int per_task = request_.gpus_per_task;
  for (int task = 0; task < ntasks_; ++task) {
    int begin = 0, end = 0;
    if (per_task > 0) {
      begin = (task * per_task) % n;
      end = begin + std::min(per_task, n);
    } else if (n >= ntasks_) {
      begin = task * n / ntasks_;
      end = (task + 1) * n / ntasks_;
    } else {
      begin = task * n / ntasks_;
      end = begin + 1;
    }
    for (int i = begin; i < end; ++i) {
      const int at = i % n;
      plan_.tasks[task].gpus.push_back({at, -1, -1, tokens[at], "", Vendor::kNvidia});
    }
  }
  if (per_task > 0 && per_task * ntasks_ > n) {
    warn(counted(ntasks_, "task") + " x " + std::to_string(per_task) +
         " GPUs per task need more than the step's " + counted(n, "MIG instance") +
         ": tasks share them");
  }
  warn("the step's GPUs are MIG instances (" + tokens.front() +
       "...): the GPU that holds each is not known here, so tasks' cores are not placed near "
       "them");
}

// What the task's runtime calls the GPU (or one tile of it). Tiled cards (Intel PVC) are "g" and
// "g.t" under Level Zero's COMPOSITE hierarchy; under FLAT every tile is a device of its own,
// numbered card by card (ZE_ENABLE_PCI_ID_DEVICE_ORDER=1 makes that the PCI order).
std::string Planner::device_token(const Gpu& gpu, const std::string& step_token, int tile) {
  const int tiles = gpu.tiles;
  if (tiles < 2 || request_.ze_hierarchy == ZeHierarchy::kComposite) {
    return tile >= 0 ? step_token + "." + std::to_string(tile) : step_token;
  }
  int card = 0;
  auto [end, ec] = std::from_chars(step_token.data(), step_token.data() + step_token.size(), card);
  if (ec != std::errc() || end != step_token.data() + step_token.size() || card < 0 ||
      card > kMaxTasks) {
    warn("GPU token '" + step_token +
         "' is not a card number: its tiles cannot be named under ZE_FLAT_DEVICE_HIERARCHY=FLAT; "
         "the card.tile form is used");
    return tile >= 0 ? step_token + "." + std::to_string(tile) : step_token;
  }
  if (tile >= 0) return std::to_string(card * tiles + tile);
  std::string all;
  for (int t = 0; t < tiles; ++t)
    all += (t ? "," : "") + std::to_string(card * tiles + t);
  return all;
}

Result<Plan> Planner::run() {
  if (auto s = check_request(); !s) return s.error();
  if (auto s = find_usable_cores(); !s) return s.error();
  if (auto s = resolve_step_gpus(); !s) return s.error();
  find_gpu_domains();
  task_gpus_.assign(ntasks_, {});
  task_tiles_.assign(ntasks_, -1);
  if (step_gpus_.empty()) order_ = Order::kCpu;

  if (order_ == Order::kGpu) {
    assign_gpus_by_rank();
    assign_cores();
  } else {
    assign_cores();
    if (!step_gpus_.empty()) assign_gpus_by_cores();
  }

  plan_.tasks.resize(ntasks_);
  Scratch<int> numas, l3s, cores;  // scratch lists, reused across tasks
  for (int task = 0; task < ntasks_; ++task) {
    TaskPlan& plan = plan_.tasks[task];
    plan.rank = task;
    numas.clear();
    l3s.clear();
    cores.clear();
    for (int u : task_cores_[task]) {
      const UsableCore& core = usable_[u];
      for (int i = 0; i < core.pu_count; ++i)
        plan.cpus.set(usable_pus_[core.pu_begin + i]);
      numas.push_back(core.numa);
      l3s.push_back(core.l3);
      cores.push_back(core.core);
    }
    // Distinct: a task may hold single threads of its cores (units of one core are adjacent).
    plan.ncores = static_cast<int>(std::unique(cores.begin(), cores.end()) - cores.begin());
    // Memory goes to the first GPU's NUMA node (and L3) when the task has cores there, even if
    // its spare cores lie mostly elsewhere.
    const Locality* gpu = task_gpus_[task].empty() ? nullptr : &gpu_locality(task_gpus_[task][0]);
    auto holds = [](const Scratch<int>& values, int v) {
      return v >= 0 && std::find(values.begin(), values.end(), v) != values.end();
    };
    plan.numa = gpu && holds(numas, gpu->numa) ? gpu->numa : majority(numas);
    plan.l3 = gpu && holds(l3s, gpu->l3) ? gpu->l3 : majority(l3s);
    plan.gpus.reserve(task_gpus_[task].size());
    for (int g : task_gpus_[task]) {
      const StepGpu& step_gpu = step_gpus_[g];
      const Gpu& node_gpu = topo_.gpus[step_gpu.gpu];
      const int tile = task_tiles_[task];
      plan.gpus.push_back({g, step_gpu.gpu, tile, device_token(node_gpu, step_gpu.token, tile),
                           node_gpu.pci_bus_id, node_gpu.vendor});
    }
  }
  hand_out_unplaced_gpus();
  if (order_ == Order::kGpu) warn_tasks_far_from_gpus();
  assign_nics();
  render_env();
  return std::move(plan_);
}

// Once per step: tasks without a CPU in any of their GPUs' domains (on shared nodes the step's
// CPUs may lie elsewhere), naming the first few.
void Planner::warn_tasks_far_from_gpus() {
  Scratch<int> far;
  for (const TaskPlan& task : plan_.tasks) {
    if (task.gpus.empty() || task.gpus[0].gpu < 0) continue;
    const bool near = std::any_of(task.gpus.begin(), task.gpus.end(), [&](const TaskGpu& gpu) {
      return task.cpus.intersects(topo_.gpus[gpu.gpu].locality.cpus);
    });
    if (!near) far.push_back(task.rank);
  }
  if (far.empty()) return;
  std::string which;
  for (size_t i = 0; i < far.size() && i < 3; ++i) {
    const TaskPlan& task = plan_.tasks[far[i]];
    const Gpu& gpu = topo_.gpus[task.gpus[0].gpu];
    which += std::string(which.empty() ? "" : ", ") + "rank " + std::to_string(task.rank) +
             ": GPU " + gpu.pci_bus_id + " on " + describe_locality(gpu.locality);
  }
  if (far.size() > 3) which += ", ...";
  warn(std::to_string(far.size()) + " of " + counted(ntasks_, "task") +
       (far.size() == 1 ? " has" : " have") + " no CPU in their GPU's domain (" + which +
       "): the step's CPUs there are too few or none");
}

}  // namespace

CpuSet reserved_cpus(const Topology& topology, const SitePolicy& policy) {
  CpuSet reserved = policy.reserved_cpus;
  if (policy.reserve_first_core_per_l3) {
    std::vector<bool> seen(std::max(topology.l3_count, 0), false);
    for (const Core& core : topology.cores) {
      if (core.l3 < 0 || core.l3 >= static_cast<int>(seen.size()) || seen[core.l3]) continue;
      seen[core.l3] = true;
      for (int pu : core.pus)
        reserved.set(pu);
    }
  }
  return reserved;
}

Result<Plan> make_plan(const Topology& topology, const SitePolicy& policy,
                       const PlanRequest& request) {
  return Planner(topology, policy, request).run();
}

}  // namespace gpubind
