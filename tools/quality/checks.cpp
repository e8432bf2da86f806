#include "checks.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "gpubind/topology_hwloc.h"

namespace gpubind::quality {
namespace {

constexpr long long kCpuSideDistance = 1000;
constexpr long long kUnrelated = 1000000;

DevicePlace place_of(const Reference& ref, const std::string& bus_id, const CpuSet& fallback) {
  const auto found = bus_id.empty() ? ref.pci.end() : ref.pci.find(bus_id);
  if (found != ref.pci.end()) return found->second;
  return DevicePlace{fallback, fallback, {}};
}

std::vector<int> nearest_nics_of(const Node& node, const DevicePlace& gpu) {
  std::vector<int> nearest;
  long long best = 0;
  for (size_t n = 0; n < node.nics.size(); ++n) {
    const long long distance = nic_distance(node, gpu, node.nics[n]);
    if (nearest.empty() || distance < best) {
      nearest = {static_cast<int>(n)};
      best = distance;
    } else if (distance == best) {
      nearest.push_back(static_cast<int>(n));
    }
  }
  return nearest;
}

// True if `sizes` fit into `bins` placed largest first, each into the first bin with room.
bool first_fit_decreasing(std::vector<int> sizes, std::vector<int> bins) {
  std::sort(sizes.rbegin(), sizes.rend());
  for (int size : sizes) {
    auto bin = std::find_if(bins.begin(), bins.end(), [size](int room) { return room >= size; });
    if (bin == bins.end()) return false;
    *bin -= size;
  }
  return true;
}

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

struct TaskView {
  const TaskPlan* plan = nullptr;
  CpuSet cores;  // indices into Reference::cores
  int ncores = 0;
  std::vector<int> gpus;  // node GPU indices
};

class Scorer {
 public:
  Scorer(const Node& node, const Case& spec, const Plan& plan)
      : node_(node),
        spec_(spec),
        reserved_(reserved_pus(node, spec.reserve)),
        usable_(usable_cores(node, spec.reserve)) {
    for (const TaskPlan& task : plan.tasks)
      tasks_.push_back(view_of(task));
    for (const TaskView& task : tasks_)
      used_cores_ |= task.cores;
    score_.spec = spec;
    score_.tasks = static_cast<int>(tasks_.size());
  }

  CaseScore run() {
    check_task_count();
    check_cpus();
    if (!oversubscribed()) {
      check_shared_cpus();
      check_l3_straddles();
      check_balance();
      check_domain_cores_home();
      check_domain_task_counts();
      check_spares_nearest();
      check_numa_task_counts();
      measure_gpu_locality();
    }
    check_gpu_nearness();
    check_gpu_matching();
    measure_cores_used();
    measure_nics();
    return std::move(score_);
  }

 private:
  TaskView view_of(const TaskPlan& task) const {
    TaskView view;
    view.plan = &task;
    task.cpus.for_each([&](int pu) {
      if (pu < static_cast<int>(node_.core_by_pu.size()) && node_.core_by_pu[pu] >= 0)
        view.cores.set(node_.core_by_pu[pu]);
    });
    view.ncores = view.cores.count();
    for (const TaskGpu& gpu : task.gpus) {
      if (gpu.node_index >= 0 && gpu.node_index < static_cast<int>(node_.gpus.size()))
        view.gpus.push_back(gpu.node_index);
    }
    return view;
  }

  bool oversubscribed() const { return spec_.ntasks > usable_.count(); }

  void add(const char* kind, std::string what) {
    score_.violations.push_back({kind, std::move(what)});
  }

  static std::string name(const TaskView& task) {
    const std::string rank = "task " + std::to_string(task.plan->rank);
    return task.plan->cpus.empty() ? rank : rank + " (CPUs " + task.plan->cpus.to_list() + ")";
  }

  // order=gpu: the reference localities of the task's GPUs; else the whole machine.
  CpuSet home_of(const TaskView& task) const {
    if (spec_.order != Order::kGpu || task.gpus.empty()) return node_.ref.machine;
    CpuSet home;
    for (int gpu : task.gpus)
      home |= node_.gpus[gpu].locality;
    return home;
  }

  // Usable cores of each L3 that have a PU in `region`.
  std::vector<int> l3_room(const CpuSet& region) const {
    std::vector<int> room(node_.ref.l3s.size(), 0);
    usable_.for_each([&](int core) {
      const int l3 = node_.l3_by_core[core];
      if (l3 >= 0 && node_.ref.cores[core].intersects(region)) ++room[l3];
    });
    return room;
  }

  std::vector<int> l3s_of(const TaskView& task) const {
    std::vector<int> l3s;
    task.cores.for_each([&](int core) { l3s.push_back(node_.l3_by_core[core]); });
    std::sort(l3s.begin(), l3s.end());
    l3s.erase(std::unique(l3s.begin(), l3s.end()), l3s.end());
    return l3s;
  }

  // The task's CPUs in `domain` hold more than half of them.
  static bool mostly_in(const TaskView& task, const CpuSet& domain) {
    return 2 * (task.plan->cpus & domain).count() > task.plan->cpus.count();
  }

  bool near(const TaskView& task, int gpu) const {
    return mostly_in(task, node_.gpus[gpu].locality);
  }

  void check_task_count() {
    if (score_.tasks != spec_.ntasks)
      add("task-count",
          plural(score_.tasks, "task") + " planned for " + std::to_string(spec_.ntasks));
  }

  void check_cpus() {
    for (const TaskView& task : tasks_) {
      if (task.plan->cpus.empty()) add("no-cpu", name(task) + " has no CPU");
      const CpuSet hit = task.plan->cpus & reserved_;
      if (!hit.empty()) add("reserved-cpu", name(task) + " uses reserved CPUs " + hit.to_list());
    }
  }

  void check_shared_cpus() {
    std::map<std::pair<int, int>, CpuSet> shared;  // by pair of ranks
    std::map<int, int> owner;                      // PU -> first rank holding it
    for (const TaskView& task : tasks_) {
      const int rank = task.plan->rank;
      task.plan->cpus.for_each([&](int pu) {
        const auto [it, first] = owner.emplace(pu, rank);
        if (!first) shared[{it->second, rank}].set(pu);
      });
    }
    for (const auto& [ranks, cpus] : shared) {
      add("shared-cpu", "tasks " + std::to_string(ranks.first) + " and " +
                            std::to_string(ranks.second) + " share CPUs " + cpus.to_list());
    }
  }

  int largest_l3_room() const {
    const std::vector<int> room = l3_room(node_.ref.machine);
    return room.empty() ? 0 : *std::max_element(room.begin(), room.end());
  }

  // The task's cores inside `region`.
  CpuSet cores_in(const TaskView& task, const CpuSet& region) const {
    CpuSet inside;
    task.cores.for_each([&](int core) {
      if (node_.ref.cores[core].intersects(region)) inside.set(core);
    });
    return inside;
  }

  std::vector<int> l3s_of_cores(const CpuSet& cores) const {
    std::vector<int> l3s;
    cores.for_each([&](int core) { l3s.push_back(node_.l3_by_core[core]); });
    std::sort(l3s.begin(), l3s.end());
    l3s.erase(std::unique(l3s.begin(), l3s.end()), l3s.end());
    return l3s;
  }

  // A straddle is a violation when the tasks sharing the task's home all fit, first fit
  // decreasing, into the L3s of that home. Only a task's cores inside its home count: the spare
  // cores no GPU is near (shared out by default) lie elsewhere by design.
  void check_l3_straddles() {
    if (node_.ref.l3s.empty()) return;
    const int fits = largest_l3_room();
    std::map<std::string, std::vector<const TaskView*>> groups;  // by home
    for (const TaskView& task : tasks_)
      groups[home_of(task).to_list()].push_back(&task);
    for (const auto& [home_list, members] : groups) {
      const CpuSet home = home_of(*members.front());
      std::vector<int> sizes;
      for (const TaskView* task : members)
        sizes.push_back(cores_in(*task, home).count());
      const bool packable = first_fit_decreasing(sizes, l3_room(home));
      for (const TaskView* task : members) {
        const CpuSet inside = cores_in(*task, home);
        const std::vector<int> l3s = l3s_of_cores(inside);
        if (l3s.size() < 2 || inside.count() > fits) continue;
        ++score_.straddles;
        if (!packable) continue;
        add("l3-straddle", name(*task) + " spans L3s " + format_int_list(l3s) + " with " +
                               plural(inside.count(), "core") + " of its home, though the " +
                               plural(static_cast<int>(members.size()), "task") +
                               " of its home fit inside single L3s");
      }
    }
  }

  // True if splitting the tasks' cores evenly (shares within one of each other) would force a
  // straddle: the even shares each fit one L3, but not all of them, first fit decreasing, into
  // the usable cores of the L3s the tasks occupy.
  bool even_split_straddles(const std::vector<const TaskView*>& tasks) const {
    std::vector<bool> occupied(node_.ref.l3s.size(), false);
    int total = 0;
    for (const TaskView* task : tasks) {
      total += task->ncores;
      for (int l3 : l3s_of(*task)) {
        if (l3 >= 0) occupied[l3] = true;
      }
    }
    std::vector<int> room(node_.ref.l3s.size(), 0);
    usable_.for_each([&](int core) {
      const int l3 = node_.l3_by_core[core];
      if (l3 >= 0 && occupied[l3]) ++room[l3];
    });
    const int count = static_cast<int>(tasks.size());
    std::vector<int> shares(count, total / count);
    for (int i = 0; i < total % count; ++i)
      ++shares[i];
    if (room.empty() || shares[0] > *std::max_element(room.begin(), room.end())) return false;
    return !first_fit_decreasing(shares, room);
  }

  // True if each task holds every usable core of each L3 it touches, so no L3 is split.
  bool whole_l3s(const std::vector<const TaskView*>& tasks) const {
    const std::vector<int> room = l3_room(node_.ref.machine);
    for (const TaskView* task : tasks) {
      std::vector<int> held(room.size(), 0);
      bool outside_l3 = false;
      (task->cores & usable_).for_each([&](int core) {
        const int l3 = node_.l3_by_core[core];
        if (l3 < 0)
          outside_l3 = true;
        else
          ++held[l3];
      });
      if (outside_l3) return false;
      for (size_t l3 = 0; l3 < room.size(); ++l3) {
        if (held[l3] > 0 && held[l3] != room[l3]) return false;
      }
    }
    return true;
  }

  // An uneven split the L3s call for: the smallest task lies in one L3 and an even split would
  // force a straddle, or every task holds whole L3s and the shares differ by at most one L3.
  bool split_follows_l3s(const std::vector<const TaskView*>& tasks, const TaskView& smallest,
                         int spread) const {
    const std::vector<int> l3s = l3s_of(smallest);
    if (l3s.size() == 1 && l3s[0] >= 0 && even_split_straddles(tasks)) return true;
    return !node_.ref.l3s.empty() && spread <= largest_l3_room() && whole_l3s(tasks);
  }

  // Tasks with as many GPUs get shares within one of each other, unless the L3s call for more.
  void check_balance() {
    std::map<size_t, std::vector<const TaskView*>> by_gpus;
    for (const TaskView& task : tasks_) {
      if (task.ncores > 0) by_gpus[task.gpus.size()].push_back(&task);
    }
    for (const auto& [gpus, members] : by_gpus) {
      auto [smallest, largest] = std::minmax_element(
          members.begin(), members.end(),
          [](const TaskView* a, const TaskView* b) { return a->ncores < b->ncores; });
      const int low = (*smallest)->ncores, high = (*largest)->ncores;
      score_.worst_ratio = std::max(score_.worst_ratio, static_cast<double>(high) / low);
      if (high - low <= 1 || split_follows_l3s(members, **smallest, high - low)) continue;
      add("imbalance", "tasks with " + plural(static_cast<int>(gpus), "GPU") + " get " +
                           std::to_string(low) + " to " + std::to_string(high) + " cores (" +
                           name(**smallest) + " " + std::to_string(low) + ", " + name(**largest) +
                           " " + std::to_string(high) + "), a split the L3s do not call for");
    }
  }

  // order=cpu with one task per GPU: a task whose GPU holds few of its CPUs, while a free GPU,
  // or another task's GPU swapped without loss, would hold most of them.
  void check_gpu_nearness() {
    const int gpus = static_cast<int>(node_.gpus.size());
    if (spec_.order != Order::kCpu || gpus == 0 || spec_.ntasks != gpus) return;
    std::vector<const TaskView*> holder(gpus, nullptr);
    for (const TaskView& task : tasks_) {
      for (int gpu : task.gpus)
        holder[gpu] = &task;
    }
    for (const TaskView& task : tasks_) {
      if (task.gpus.empty() || task.plan->cpus.empty() || near(task, task.gpus[0])) continue;
      const int mine = task.gpus[0];
      for (int other = 0; other < gpus; ++other) {
        const TaskView* them = holder[other];
        if (other == mine || !near(task, other)) continue;
        if (them && them != &task && !near(*them, mine) && near(*them, other)) continue;
        add("gpu-not-near",
            name(task) + " got GPU " + std::to_string(mine) +
                ", whose locality holds few of its CPUs, while GPU " + std::to_string(other) +
                (them
                     ? " (task " + std::to_string(them->plan->rank) + "'s, a swap costs it nothing)"
                     : " (unused)") +
                " holds most of them");
        break;
      }
    }
  }

  // order=cpu: each GPU's tasks. A task mostly in a NUMA node that holds a GPU (the GPU's
  // locality lies inside it) gets a GPU of that node while one is held by a task from elsewhere,
  // or carries fewer tasks than the task's own GPU.
  void check_gpu_matching() {
    const int gpus = static_cast<int>(node_.gpus.size());
    if (spec_.order != Order::kCpu || gpus == 0) return;
    std::vector<std::vector<const TaskView*>> holders(gpus);
    for (const TaskView& task : tasks_) {
      for (int gpu : task.gpus)
        holders[gpu].push_back(&task);
    }
    for (const CpuSet& numa : node_.ref.numas) {
      std::vector<int> local;
      for (int g = 0; g < gpus; ++g) {
        if (!node_.gpus[g].locality.empty() && node_.gpus[g].locality.is_subset_of(numa))
          local.push_back(g);
      }
      if (local.empty()) continue;
      auto holds_local = [&](const TaskView& task) {
        return std::any_of(task.gpus.begin(), task.gpus.end(), [&](int g) {
          return std::find(local.begin(), local.end(), g) != local.end();
        });
      };
      for (const TaskView& task : tasks_) {
        if (task.gpus.empty() || task.plan->cpus.empty() || !mostly_in(task, numa) ||
            holds_local(task))
          continue;
        const size_t own_load = holders[task.gpus[0]].size();
        for (int g : local) {
          const auto outsider =
              std::find_if(holders[g].begin(), holders[g].end(),
                           [&](const TaskView* t) { return !mostly_in(*t, numa); });
          const bool idle_enough = holders[g].size() < own_load;
          if (outsider == holders[g].end() && !idle_enough) continue;
          add("gpu-matching",
              name(task) + " lies in NUMA node with CPUs " + numa.to_list() + " but got GPU " +
                  std::to_string(task.gpus[0]) + " from elsewhere, while that node's GPU " +
                  std::to_string(g) +
                  (idle_enough ? " carries fewer tasks"
                               : " went to " + name(**outsider) + ", which lies elsewhere"));
          break;
        }
      }
    }
  }

  // order=cpu: a NUMA node's tasks (those mostly inside it) stay within one of its share of the
  // step's tasks, in proportion to its usable cores.
  void check_numa_task_counts() {
    if (spec_.order != Order::kCpu || node_.ref.numas.size() < 2) return;
    const int usable_total = usable_.count();
    for (const CpuSet& numa : node_.ref.numas) {
      int usable_here = 0;
      usable_.for_each([&](int core) { usable_here += node_.ref.cores[core].intersects(numa); });
      int tasks_here = 0;
      for (const TaskView& task : tasks_)
        tasks_here += !task.plan->cpus.empty() && mostly_in(task, numa);
      const double share = static_cast<double>(spec_.ntasks) * usable_here / usable_total;
      if (tasks_here < share + 1) continue;
      add("numa-tasks", "NUMA node with CPUs " + numa.to_list() + " holds " +
                            plural(tasks_here, "task") + ", its share of the usable cores being " +
                            std::to_string(share).substr(0, 4));
    }
  }

  // order=gpu, tasks at least GPUs: a GPU domain whose GPUs carry more tasks than it has usable
  // cores, while another's carry fewer, and one of the first domain's most loaded GPUs could
  // give a task to a less loaded GPU of the second, the split staying even.
  void check_domain_task_counts() {
    const int gpus = static_cast<int>(node_.gpus.size());
    if (spec_.order != Order::kGpu || gpus == 0 || spec_.ntasks < gpus) return;
    std::vector<int> load(gpus, 0);
    for (const TaskView& task : tasks_) {
      if (!task.gpus.empty()) ++load[task.gpus[0]];
    }
    const int most = *std::max_element(load.begin(), load.end());
    std::map<std::string, std::vector<int>> domains;  // first-GPU locality -> its GPUs
    for (int g = 0; g < gpus; ++g)
      domains[node_.gpus[g].locality.to_list()].push_back(g);
    struct Room {
      int tasks = 0, cores = 0;
      bool full_gpu = false, light_gpu = false;
    };
    std::vector<std::pair<std::string, Room>> rooms;
    for (const auto& [key, members] : domains) {
      Room room;
      const CpuSet& locality = node_.gpus[members.front()].locality;
      usable_.for_each(
          [&](int core) { room.cores += node_.ref.cores[core].is_subset_of(locality); });
      for (int g : members) {
        room.tasks += load[g];
        room.full_gpu |= load[g] == most;
        room.light_gpu |= load[g] < most;
      }
      rooms.push_back({key, room});
    }
    for (const auto& [crowded, a] : rooms) {
      if (a.tasks <= a.cores || !a.full_gpu) continue;
      for (const auto& [roomy, b] : rooms) {
        if (b.tasks >= b.cores || !b.light_gpu) continue;
        add("domain-tasks", "the GPUs of domain " + crowded + " carry " + plural(a.tasks, "task") +
                                " for " + plural(a.cores, "usable core") +
                                " while those of domain " + roomy + " carry " +
                                plural(b.tasks, "task") + " for " + plural(b.cores, "usable core"));
        return;
      }
    }
  }

  // order=gpu: the cores of a task's home that another task holds, though it is not that task's
  // home, while the first task holds cores outside its home (or such a core stays idle).
  void check_domain_cores_home() {
    if (spec_.order != Order::kGpu) return;
    std::vector<const TaskView*> owner(node_.ref.cores.size(), nullptr);
    for (const TaskView& task : tasks_)
      task.cores.for_each([&](int core) { owner[core] = &task; });
    for (const TaskView& task : tasks_) {
      if (task.gpus.empty()) continue;
      const CpuSet home = home_of(task);
      if (cores_in(task, home).count() == task.ncores) continue;  // all at home
      bool reported = false;
      usable_.for_each([&](int core) {
        if (reported || !node_.ref.cores[core].is_subset_of(home)) return;
        const TaskView* holder = owner[core];
        if (holder == &task) return;
        if (holder &&
            (holder->gpus.empty() || node_.ref.cores[core].is_subset_of(home_of(*holder))))
          return;
        reported = true;
        add("domain-cores", name(task) + " holds cores outside its GPUs' domain while core " +
                                std::to_string(core) + " of that domain " +
                                (holder ? "went to " + name(*holder) + ", whose GPUs are elsewhere"
                                        : "stays idle"));
      });
    }
  }

  // PUs of the smallest L3, NUMA node or package holding both `home` and `core` (0: the core is
  // home; the machine's PUs when no domain holds both).
  int spare_distance(const CpuSet& home, int core) const {
    const CpuSet& cpus = node_.ref.cores[core];
    if (cpus.is_subset_of(home)) return 0;
    const CpuSet both = home | cpus;
    int smallest = node_.ref.machine.count();
    for (const auto* level : {&node_.ref.l3s, &node_.ref.numas, &node_.ref.packages}) {
      for (const CpuSet& domain : *level) {
        if (both.is_subset_of(domain)) smallest = std::min(smallest, domain.count());
      }
    }
    return smallest;
  }

  struct Spare {
    const TaskView* task;
    int core;
    int distance;
  };

  // A spare core T holds that a task V nearer to it should have had, V having fewer cores than
  // a task U whose spare T could take instead no farther: V takes T's core, T takes U's, and
  // the cores come nearer in sum with the counts no less even (12 tasks on two 56-core sockets:
  // the larger shares all on one socket, whose tasks then reach across for cores).
  void check_spare_chains(const std::vector<Spare>& spares, const std::vector<CpuSet>& homes) {
    const size_t n = tasks_.size();
    auto weight = [&](size_t t) { return std::max<long>(1, tasks_[t].gpus.size()); };
    auto index_of = [&](const TaskView* task) { return static_cast<size_t>(task - tasks_.data()); };
    for (const Spare& far : spares) {
      const size_t t = index_of(far.task);
      for (size_t v = 0; v < n; ++v) {
        if (v == t || tasks_[v].gpus.empty()) continue;
        const int v_there = spare_distance(homes[v], far.core);
        if (v_there >= far.distance) continue;
        for (const Spare& other : spares) {
          const size_t u = index_of(other.task);
          if (u == t || u == v) continue;
          // V one core more is still no richer per GPU than U was.
          if (tasks_[u].ncores * weight(v) < (tasks_[v].ncores + 1) * weight(u)) continue;
          const int t_there = spare_distance(homes[t], other.core);
          if (t_there > far.distance || (v_there - far.distance) + (t_there - other.distance) >= 0)
            continue;
          add("spare-far", name(*far.task) + " holds spare core " + std::to_string(far.core) +
                               " nearer " + name(tasks_[v]) + ", which has fewer cores than " +
                               name(*other.task) + ", whose spare core " +
                               std::to_string(other.core) + " lies no farther from " +
                               name(*far.task));
          return;  // one chain per case says enough
        }
      }
    }
  }

  // order=gpu: spare cores (outside a task's GPUs' domains) go nearest first across all tasks:
  // no idle usable core is nearer a task than one of its spares, and no two tasks would both
  // come nearer (neither farther) by swapping one spare each.
  void check_spares_nearest() {
    if (spec_.order != Order::kGpu) return;
    std::vector<Spare> spares;
    std::vector<CpuSet> homes;
    for (const TaskView& task : tasks_)
      homes.push_back(home_of(task));
    for (size_t t = 0; t < tasks_.size(); ++t) {
      if (tasks_[t].gpus.empty()) continue;
      tasks_[t].cores.for_each([&](int core) {
        const int d = spare_distance(homes[t], core);
        if (d > 0) spares.push_back({&tasks_[t], core, d});
      });
    }
    if (spares.empty()) return;
    check_spare_chains(spares, homes);
    const CpuSet idle = usable_.minus(used_cores_);
    std::vector<bool> reported(tasks_.size(), false);
    auto index_of = [&](const TaskView* task) { return static_cast<size_t>(task - tasks_.data()); };
    for (const Spare& spare : spares) {
      const size_t t = index_of(spare.task);
      if (reported[t]) continue;
      int nearer = -1;
      idle.for_each([&](int core) {
        if (nearer < 0 && spare_distance(homes[t], core) < spare.distance) nearer = core;
      });
      if (nearer >= 0) {
        reported[t] = true;
        add("spare-far", name(*spare.task) + " holds spare core " + std::to_string(spare.core) +
                             " while core " + std::to_string(nearer) +
                             ", nearer its GPUs, stays idle");
        continue;
      }
      for (const Spare& other : spares) {
        const size_t u = index_of(other.task);
        if (u == t || reported[u]) continue;
        const int mine_there = spare_distance(homes[t], other.core);
        const int theirs_here = spare_distance(homes[u], spare.core);
        if (mine_there > spare.distance || theirs_here > other.distance ||
            mine_there + theirs_here >= spare.distance + other.distance)
          continue;
        reported[t] = reported[u] = true;
        add("spare-far", name(*spare.task) + " and " + name(*other.task) +
                             " would both come nearer their GPUs by swapping spare cores " +
                             std::to_string(spare.core) + " and " + std::to_string(other.core));
        break;
      }
    }
  }

  // order=gpu: a task is on its first GPU's locality when it holds its share of that domain's
  // usable cores (all of its own cores, if it has fewer): spare cores elsewhere do not take it
  // off, and when the domain has fewer cores than tasks, no task is blamed.
  void measure_gpu_locality() {
    if (spec_.order != Order::kGpu) return;  // order=cpu places tasks by cores first
    std::map<std::string, int> sharers;      // by locality
    for (const TaskView& task : tasks_) {
      if (!task.gpus.empty()) ++sharers[node_.gpus[task.gpus[0]].locality.to_list()];
    }
    for (const TaskView& task : tasks_) {
      if (task.gpus.empty()) continue;
      ++score_.locality_counted;
      const CpuSet& locality = node_.gpus[task.gpus[0]].locality;
      int room = 0;
      usable_.for_each([&](int core) { room += node_.ref.cores[core].intersects(locality); });
      const int share = room / sharers[locality.to_list()];
      if (cores_in(task, locality).count() >= std::min(task.ncores, share))
        ++score_.on_gpu_locality;
    }
  }

  void measure_cores_used() {
    const int usable = usable_.count();
    score_.cores_used = usable ? static_cast<double>((used_cores_ & usable_).count()) / usable : 0;
  }

  void measure_nics() {
    for (const TaskView& task : tasks_) {
      if (task.gpus.empty() || task.plan->nic_index < 0) continue;
      const std::vector<int>& nearest = node_.nearest_nics[task.gpus[0]];
      if (std::find(nearest.begin(), nearest.end(), task.plan->nic_index) == nearest.end())
        ++score_.nic_not_nearest;
    }
  }

  const Node& node_;
  const Case& spec_;
  const CpuSet reserved_;
  const CpuSet usable_;
  std::vector<TaskView> tasks_;
  CpuSet used_cores_;
  CaseScore score_;
};

}  // namespace

Result<Node> load_node(const std::string& path) {
  const bool live = path.empty();
  auto topology = live ? load_topology_live(SitePolicy::default_nic_patterns())
                       : load_topology_xml(path, SitePolicy::default_nic_patterns());
  if (!topology) return topology.error();
  auto ref = Reference::load(path);
  if (!ref) return ref.error();
  Node node;
  node.name = live ? "live" : std::filesystem::path(path).filename().string();
  node.topology = std::move(*topology);
  node.ref = std::move(*ref);
  node.core_by_pu = node.ref.core_by_pu();
  node.l3_by_core = node.ref.l3_by_core();
  for (const Gpu& gpu : node.topology.gpus)
    node.gpus.push_back(place_of(node.ref, gpu.pci_bus_id, gpu.locality.cpus));
  for (const Nic& nic : node.topology.nics)
    node.nics.push_back(place_of(node.ref, nic.pci_bus_id, nic.locality.cpus));
  for (const DevicePlace& gpu : node.gpus)
    node.nearest_nics.push_back(nearest_nics_of(node, gpu));
  return node;
}

long long nic_distance(const Node& node, const DevicePlace& gpu, const DevicePlace& nic) {
  for (size_t up = 0; up < gpu.bridges.size(); ++up) {
    const auto common = std::find(nic.bridges.begin(), nic.bridges.end(), gpu.bridges[up]);
    if (common != nic.bridges.end())
      return static_cast<long long>(up + 1 + (common - nic.bridges.begin()) + 1);
  }
  const CpuSet both = gpu.anchor | nic.anchor;
  int smallest = nic.anchor.is_subset_of(gpu.locality) ? gpu.locality.count() : 0;
  for (const auto* level : {&node.ref.numas, &node.ref.packages}) {
    for (const CpuSet& domain : *level) {
      if (both.is_subset_of(domain) && (smallest == 0 || domain.count() < smallest))
        smallest = domain.count();
    }
  }
  return smallest > 0 ? kCpuSideDistance + smallest : kUnrelated;
}

std::string Case::label() const {
  return "n=" + std::to_string(ntasks) + " order=" + order_name(order) +
         " reserve=" + (reserve ? "yes" : "no");
}

SitePolicy Case::policy() const {
  SitePolicy policy;
  policy.reserve_first_core_per_l3 = reserve;
  return policy;
}

PlanRequest Case::request() const {
  PlanRequest request;
  request.ntasks = ntasks;
  request.order = order;
  return request;
}

CpuSet reserved_pus(const Node& node, bool reserve) {
  CpuSet reserved = SitePolicy().reserved_cpus;
  if (reserve) reserved |= node.ref.first_core_per_l3();
  return reserved;
}

CpuSet usable_cores(const Node& node, bool reserve) {
  const CpuSet reserved = reserved_pus(node, reserve);
  CpuSet usable;
  for (size_t core = 0; core < node.ref.cores.size(); ++core) {
    if (!node.ref.cores[core].minus(reserved).empty()) usable.set(static_cast<int>(core));
  }
  return usable;
}

std::vector<Case> cases_for(const Node& node) {
  const int gpus = static_cast<int>(node.topology.gpus.size());
  std::vector<Case> cases;
  for (bool reserve : {false, true}) {
    const int usable = usable_cores(node, reserve).count();
    if (usable == 0) continue;  // nothing to plan on: the planner rightly refuses
    std::vector<int> counts = gpus > 0
                                  ? std::vector<int>{1, gpus / 2, gpus, 2 * gpus, 3 * gpus, usable}
                                  : std::vector<int>{1, usable / 2, usable};
    std::erase_if(counts, [](int n) { return n < 1 || n > kMaxTasks; });
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    for (Order order : {Order::kGpu, Order::kCpu}) {
      for (int ntasks : counts)
        cases.push_back({ntasks, order, reserve});
    }
  }
  return cases;
}

CaseScore score_case(const Node& node, const Case& spec, const Result<Plan>& plan) {
  if (!plan) {
    CaseScore refused;
    refused.spec = spec;
    refused.violations.push_back({"refused", "the planner refused: " + plan.error().message});
    return refused;
  }
  return Scorer(node, spec, *plan).run();
}

}  // namespace gpubind::quality
