// Phase 3, core assignment: tasks with the same home domain (their GPUs' locality, or the whole
// node for order=cpu) split its free cores along package > NUMA > L3 > core, so a task stays
// inside one L3 whenever its share fits; spare cores go to the poorest tasks, shortfalls spill to
// the nearest free L3 that holds them whole, and tasks left without a core take one from the
// richest or share one.
#include <algorithm>
#include <array>
#include <functional>
#include <numeric>
#include <tuple>

#include "plan/plan_state.h"

namespace gpubind::planning {
namespace {

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

// The most cores of a range minus the fewest.
int size_spread(const Scratch<Range>& ranges) {
  int fewest = 1 << 30, most = 0;
  for (const Range& r : ranges) {
    fewest = std::min(fewest, r.end - r.begin);
    most = std::max(most, r.end - r.begin);
  }
  return ranges.empty() ? 0 : most - fewest;
}

}  // namespace

// Each task's cores: its home domains (its GPUs' localities under order=gpu, else the whole node)
// split their free cores among their tasks by weight, smaller domains first; then cpus-per-task
// shortfalls spill, spare cores are shared out, and tasks left without a core get one.
void Planner::assign_cores() {
  task_cores_.assign(ntasks_, {});
  const int wanted = cores_wanted_per_task();

  // Domains: each GPU's locality (order=gpu), or the whole node. A task's weight in a domain is
  // the number of its GPUs there, so its cores follow its GPUs.
  struct Domain {
    CpuSet cpus;
    Scratch<int> tasks, weights;
    int id;  // its GPU domain, or node_id
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
      domains.push_back({id == node_id ? all_pus_ : gpu_locality(id).cpus, {}, {}, id});
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
        if (explain_) {
          const bool node = domain.id == node_id;
          record_grant(domain.tasks[j], free[i],
                       node ? CoreSource::kNodeShare : CoreSource::kGpuDomain, Nearness::kMachine,
                       node ? -1 : step_gpus_[domain.id].node_index);
        }
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
  if (policy_.gpu_domain_only) {
    for (int task = 0; task < ntasks_; ++task) {
      if (static_cast<int>(task_cores_[task].size()) < target[task])
        spill(task, target[task], task_place(task));
    }
  } else {
    hand_out_spares_nearest(target, weight);
  }
  // Tasks get fewer CPUs than the step holds: say why.
  const auto idle = std::count(core_owners_.begin(), core_owners_.end(), 0);
  if (idle > 0) {
    warn(counted(idle, "usable core") + " of the step " + (idle == 1 ? "stays" : "stay") +
         " idle: no task's GPU is near " + (idle == 1 ? "it" : "them") + " (gpu_domain_only)");
  }
}

// Spare cores go nearest first across all tasks at once, not task by task: at each distance
// (the task's own L3, NUMA node, package, then farther), the poorest task (fewest cores per
// GPU) that has a free core that near takes some, up to the most cores the even share gives a
// task of its weight. So the larger shares go to the tasks with spares nearby, and no task
// reaches across a socket for a core another task would have found at home. Then each L3
// group's spares are laid out in runs, in the order of their takers' own cores.
void Planner::hand_out_spares_nearest(const Scratch<int>& target, const Scratch<int>& weight) {
  if (groups_.empty()) build_groups();
  const int ngroups = static_cast<int>(groups_.size());
  Scratch<int> held(ntasks_);
  for (int task = 0; task < ntasks_; ++task)
    held[task] = static_cast<int>(task_cores_[task].size());

  // The even share in numbers, per weight: of the tasks that take spares, each takes at least
  // the smaller target, and as many as the water-filling gave the larger one may take one more
  // (`slots`); which ones do is decided by where the spares lie.
  struct Share {
    int weight, smaller, larger, slots;
  };
  Scratch<Share> shares;
  Scratch<int> share_of(ntasks_, -1);
  for (int task = 0; task < ntasks_; ++task) {
    if (target[task] <= held[task]) continue;
    auto it = std::find_if(shares.begin(), shares.end(),
                           [&](const Share& s) { return s.weight == weight[task]; });
    if (it == shares.end()) {
      shares.push_back({weight[task], target[task], target[task], 0});
      it = shares.end() - 1;
    }
    it->smaller = std::min(it->smaller, target[task]);
    it->larger = std::max(it->larger, target[task]);
    share_of[task] = static_cast<int>(it - shares.begin());
  }
  for (int task = 0; task < ntasks_; ++task) {
    if (share_of[task] < 0) continue;
    Share& share = shares[share_of[task]];
    share.slots += share.larger > share.smaller && target[task] == share.larger;
  }
  // cap: what a task may hold now; a task of the smaller count may take one slot.
  Scratch<int> cap(ntasks_);
  Scratch<bool> may_take_more(ntasks_);
  for (int task = 0; task < ntasks_; ++task) {
    cap[task] = share_of[task] < 0 ? held[task] : shares[share_of[task]].smaller;
    may_take_more[task] = share_of[task] >= 0;
  }
  auto may_take = [&](int task) {
    return held[task] < cap[task] || (may_take_more[task] && shares[share_of[task]].slots > 0);
  };
  auto still_wanted = [&](int task) { return std::max(1, cap[task] - held[task]); };

  // Distances from each task to each group (one row per distinct anchor: tasks of one GPU share
  // theirs), and the distinct distances in order.
  Scratch<Place> anchors;
  Scratch<int> row_of(ntasks_), to_group, levels, own(ntasks_);
  for (int task = 0; task < ntasks_; ++task) {
    own[task] = task_cores_[task].empty() ? 0 : task_cores_[task].front();
    if (!may_take(task)) continue;
    const Place anchor = task_place(task);
    auto same = [&](const Place& a) {
      return a.pci_path == anchor.pci_path && a.l3 == anchor.l3 && a.numa == anchor.numa &&
             a.package == anchor.package;
    };
    const auto found = std::find_if(anchors.begin(), anchors.end(), same);
    row_of[task] = static_cast<int>(found - anchors.begin());
    if (found != anchors.end()) continue;
    anchors.push_back(anchor);
    for (int g = 0; g < ngroups; ++g) {
      const int d = distance(anchor, place_of(usable_[groups_[g].units.front()]));
      to_group.push_back(d);
      // Few distinct distances (the L3, NUMA node, package, far): kept sorted as they come.
      if (groups_[g].free > 0 && std::find(levels.begin(), levels.end(), d) == levels.end())
        levels.insert(std::upper_bound(levels.begin(), levels.end(), d), d);
    }
  }
  auto distance_to = [&](int task, int g) {
    return to_group[static_cast<size_t>(row_of[task]) * ngroups + g];
  };
  // The nearest group with a free core within `level`; among equals the one the task already
  // takes from, then one that holds all it may still take, then the one nearest its own cores.
  // -1 for none.
  Scratch<int> last_group(ntasks_, -1);
  Scratch<int> promised(ngroups, 0);  // what the tasks taking from a group may still take
  auto nearest_group = [&](int task, int level) {
    // The group it takes from stays the nearest while it has cores: the group was the nearest
    // with a free core when chosen, and cores only ever get taken.
    const int last = last_group[task];
    if (last >= 0 && groups_[last].free > 0 && distance_to(task, last) <= level) return last;
    int best = -1;
    std::array<int, 4> best_key{};
    for (int g = 0; g < ngroups; ++g) {
      const int d = distance_to(task, g);
      if (groups_[g].free == 0 || d > level) continue;
      const int first = groups_[g].units[groups_[g].next];
      const std::array<int, 4> key = {d,
                                      groups_[g].free - promised[g] >= still_wanted(task) ? 0 : 1,
                                      std::abs(first - own[task]), first};
      if (best < 0 || key < best_key) {
        best = g;
        best_key = key;
      }
    }
    return best;
  };
  // Poorest first: fewest cores per GPU, then the lowest rank (a min-heap through `richer`).
  auto richer = [&](int a, int b) {
    const long x = static_cast<long>(held[a]) * weight[b];
    const long y = static_cast<long>(held[b]) * weight[a];
    return x != y ? x > y : a > b;
  };
  Scratch<std::array<int, 3>> takes;  // (group, task, cores)
  Scratch<int> heap;
  for (int level : levels) {
    heap.clear();
    for (int task = 0; task < ntasks_; ++task) {
      if (may_take(task)) heap.push_back(task);
    }
    std::make_heap(heap.begin(), heap.end(), richer);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), richer);
      const int task = heap.back();
      heap.pop_back();
      if (!may_take(task)) continue;  // the larger shares went while it waited
      const int g = nearest_group(task, level);
      if (g < 0) continue;  // nothing this near is left: not again at this level
      if (g != last_group[task]) {
        if (last_group[task] >= 0) promised[last_group[task]] -= cap[task] - held[task];
        promised[g] += cap[task] - held[task];
        last_group[task] = g;
      }
      if (held[task] == cap[task]) {  // one of the larger shares
        may_take_more[task] = false;
        --shares[share_of[task]].slots;
        ++cap[task];
        ++promised[g];
      }
      // A run at once: all it still takes where the group holds that beside what the other
      // tasks taking from it may still take; else as long as it stays the poorest (one core
      // past the next task).
      int run = std::min(cap[task] - held[task], groups_[g].free);
      const int others_promised = promised[g] - (cap[task] - held[task]);
      if (!heap.empty() && groups_[g].free - others_promised < run) {
        const int next = heap.front();
        const long even = static_cast<long>(held[next]) * weight[task] / weight[next];
        run = static_cast<int>(std::min<long>(run, std::max(1L, even + 1 - held[task])));
      }
      groups_[g].free -= run;
      promised[g] -= run;
      held[task] += run;
      takes.push_back({g, task, run});
      if (may_take(task)) {
        heap.push_back(task);
        std::push_heap(heap.begin(), heap.end(), richer);
      }
    }
  }
  // Each group's free cores in order, in runs: its takers ordered by their own cores.
  std::sort(takes.begin(), takes.end(), [&](const auto& a, const auto& b) {
    return std::tie(a[0], own[a[1]], a[1]) < std::tie(b[0], own[b[1]], b[1]);
  });
  for (const auto& [g, task, cores] : takes) {
    Group& group = groups_[g];
    for (int i = 0; i < cores; ++i) {
      while (core_owners_[group.units[group.next]] != 0)
        ++group.next;
      const int u = group.units[group.next++];
      core_owners_[u] = 1;
      task_cores_[task].push_back(u);
      if (explain_)
        record_grant(task, u, CoreSource::kSpare, unit_nearness(anchors[row_of[task]], u));
    }
  }
}

// Tasks still without a core: one from the richest task, or a shared core when there are more
// tasks than threads.
void Planner::fill_empty_tasks() {
  bool shared = false;
  // Tasks placed by nothing yet (order=cpu) share cores spread evenly over the node, the k-th
  // of them nearest unit k * units / their count, so that each NUMA node keeps its share.
  const int empty = static_cast<int>(std::count_if(task_cores_.begin(), task_cores_.end(),
                                                   [](const Region& r) { return r.empty(); }));
  int k = 0;
  for (int task = 0; task < ntasks_; ++task) {
    if (!task_cores_[task].empty()) continue;
    // Once no task has a core to spare, none will again: sharing only adds one-core tasks.
    if (shared || !take_from_richest(task)) {
      share_core(task, task_place(task),
                 static_cast<int>(static_cast<long>(k) * static_cast<long>(usable_.size()) /
                                  std::max(1, empty)));
      shared = true;
    }
    ++k;
  }
  if (shared) {
    warn(counted(ntasks_, "task") + " on " + counted(usable_.size(), "usable core") +
         ": some tasks share cores");
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
  if (level <= 1 && usable_[cores[begin]].numa != usable_[cores[end - 1]].numa) {
    // Dealt by NUMA node instead when the even split gives a NUMA node a whole task more or
    // less than its share, or splits a task across NUMA nodes where dealing them keeps the
    // counts within one (44 cores in two 22-core NUMA nodes for 8 tasks: 6,6,5,5 on each, not
    // a task of 6 across the boundary).
    const bool counts_off = numa_counts_off(cores, begin, end, balanced);
    const int straddles = numa_straddles(cores, balanced);
    if (counts_off || straddles > 0) {
      Scratch<Range> dealt;
      dealt.reserve(tasks);
      deal(cores, begin, end, tasks, level, dealt);
      if (counts_off || (numa_straddles(cores, dealt) < straddles && size_spread(dealt) <= 1)) {
        out.resize(first);
        out.insert(out.end(), dealt.begin(), dealt.end());
        return;
      }
    }
  }
  const int balanced_straddles = avoidable_straddles(cores, begin, end, balanced);
  if (balanced_straddles == 0) return;
  Scratch<Range> dealt;
  dealt.reserve(tasks);
  deal(cores, begin, end, tasks, level, dealt);
  if (avoidable_straddles(cores, begin, end, dealt) < balanced_straddles) {
    std::copy(dealt.begin(), dealt.end(), out.begin() + first);
  }
}

// Ranges whose first and last cores lie in different NUMA nodes.
int Planner::numa_straddles(const Region& cores, const Scratch<Range>& ranges) const {
  return static_cast<int>(std::count_if(ranges.begin(), ranges.end(), [&](const Range& r) {
    return r.end - r.begin > 1 && usable_[cores[r.begin]].numa != usable_[cores[r.end - 1]].numa;
  }));
}

// True if `ranges` (an even split of cores[begin, end)) leave a NUMA node with a whole task more
// or less than its share of the tasks in proportion to its cores: an even split laid out in
// topology order gives the first NUMA nodes the larger tasks, so they hold fewer tasks than
// the last (24 tasks on two 16-core NUMA nodes: 8 and 16), and their GPUs fewer tasks too.
bool Planner::numa_counts_off(const Region& cores, int begin, int end,
                              const Scratch<Range>& ranges) const {
  const int total = end - begin;
  const int tasks = static_cast<int>(ranges.size());
  // NUMA nodes are runs of cores[begin, end); a task counts for the one holding its middle core.
  int run_begin = begin;
  size_t next_task = 0;
  for (int i = begin + 1; i <= end; ++i) {
    if (i < end && usable_[cores[i]].numa == usable_[cores[i - 1]].numa) continue;
    int held = 0;
    while (next_task < ranges.size() &&
           (ranges[next_task].begin + ranges[next_task].end - 1) / 2 < i) {
      ++held;
      ++next_task;
    }
    const long scaled_share = static_cast<long>(tasks) * (i - run_begin);  // share * total
    if (std::abs(static_cast<long>(held) * total - scaled_share) >= total) return true;
    run_begin = i;
  }
  return false;
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
      if (explain_) record_grant(task, u, CoreSource::kSpill, unit_nearness(anchor, u));
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
  if (explain_)
    record_grant(task, from.back(), CoreSource::kFromRicher, unit_nearness(anchor, from.back()));
  from.pop_back();
  return true;
}

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

// More tasks than threads: the task shares a core near its anchor (its GPU's), the least loaded
// of those, while no core carries more than an even share of the tasks; a task with no anchor,
// the least loaded nearest `spread_unit`.
void Planner::share_core(int task, const Place& anchor, int spread_unit) {
  const int units = static_cast<int>(usable_.size());
  const int even_load = (ntasks_ + units - 1) / units;
  const Scratch<int>& to_unit = unit_distances(anchor);
  const bool placed = is_placed(anchor);
  int best = -1;
  std::array<int, 5> best_key{};
  for (int u = 0; u < units; ++u) {
    const std::array<int, 5> key = {core_owners_[u] >= even_load, to_unit[u], core_owners_[u],
                                    placed ? 0 : std::abs(u - spread_unit), u};
    if (best < 0 || key < best_key) {
      best = u;
      best_key = key;
    }
  }
  ++core_owners_[best];
  task_cores_[task].push_back(best);
  if (explain_) record_grant(task, best, CoreSource::kShared, unit_nearness(anchor, best));
}

}  // namespace gpubind::planning
