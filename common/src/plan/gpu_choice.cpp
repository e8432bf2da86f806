// Phase 2, GPU choice: the step's GPUs' domains (gpu_names.cpp says which GPUs they are), and
// which GPUs each task gets: consecutive ranks share a GPU or a chunk of GPUs that sit
// together (order=gpu), or each task takes the GPUs nearest its cores (order=cpu).
#include <algorithm>
#include <array>
#include <tuple>

#include "plan/plan_state.h"

namespace gpubind::planning {

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
  const Gpu& a = topo_.gpus[step_gpus_[step_a].node_index];
  const Gpu& b = topo_.gpus[step_gpus_[step_b].node_index];
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

// Tasks per step GPU when tasks outnumber GPUs: an even split, its larger shares going where
// the GPU's domain has the most usable cores per task, not to the first GPUs: a domain then
// never carries more tasks than its cores while another has cores to spare (46 tasks on 8 GPUs
// in two 23-core domains: 6,6,6,5 on each, not 6,6,6,6 and 6,6,5,5). Ties go to the first GPU.
Scratch<int> Planner::tasks_per_gpu_by_room() const {
  const int gpus = static_cast<int>(step_gpus_.size());
  Scratch<int> per_gpu(gpus, ntasks_ / gpus);
  int extra = ntasks_ % gpus;
  if (extra == 0) return per_gpu;
  Scratch<int> units(gpus, 0), tasks(gpus, 0);  // by domain (gpu_domain_)
  for (int g = 0; g < gpus; ++g) {
    tasks[gpu_domain_[g]] += per_gpu[g];
    if (gpu_domain_[g] != g) continue;
    const CpuSet& domain = gpu_locality(g).cpus;
    units[g] =
        static_cast<int>(std::count_if(usable_.begin(), usable_.end(), [&](const UsableCore& u) {
          return domain.test(u.first_pu);
        }));
  }
  for (; extra > 0; --extra) {
    int best = -1;
    for (int g = 0; g < gpus; ++g) {
      if (per_gpu[g] > ntasks_ / gpus) continue;
      const int d = gpu_domain_[g];
      if (best < 0) {
        best = g;
        continue;
      }
      const int b = gpu_domain_[best];
      // units[d] / (tasks[d] + 1) > units[b] / (tasks[b] + 1)
      if (static_cast<long>(units[d]) * (tasks[b] + 1) >
          static_cast<long>(units[b]) * (tasks[d] + 1))
        best = g;
    }
    ++per_gpu[best];
    ++tasks[gpu_domain_[best]];
  }
  return per_gpu;
}

// Consecutive ranks share a chunk; a chunk of one GPU with tiles hands each sharer its tiles.
void Planner::give_chunks_to_tasks(Scratch<Scratch<int>> chunks,
                                   const Scratch<int>& tasks_per_chunk) {
  task_gpus_.assign(ntasks_, {});
  task_tiles_.assign(ntasks_, -1);
  int rank = 0;
  for (size_t c = 0; c < chunks.size() && rank < ntasks_; ++c) {
    const int sharers = std::min(tasks_per_chunk[c], ntasks_ - rank);
    const int tiles =
        chunks[c].size() == 1 ? topo_.gpus[step_gpus_[chunks[c][0]].node_index].tiles : 0;
    for (int j = 0; j < sharers; ++j, ++rank) {
      if (explain_) {
        for (int g : chunks[c]) {
          GpuChoice choice;
          choice.step_index = g;
          choice.chunk = static_cast<int>(chunks[c].size());
          record_gpu(rank, choice);
        }
      }
      task_gpus_[rank] = j + 1 < sharers ? chunks[c] : std::move(chunks[c]);
      if (sharers > 1 && tiles > 1) task_tiles_[rank] = j * tiles / sharers;
    }
  }
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
    tasks_per_chunk = tasks_per_gpu_by_room();
  } else {
    chunk_sizes = even_split(gpus, ntasks_);
    tasks_per_chunk.assign(ntasks_, 1);
  }
  give_chunks_to_tasks(gpu_chunks(chunk_sizes), tasks_per_chunk);
}

// order=cpu: GPUs go to tasks as a matching, not rank by rank: every (task, GPU) pair is ranked
// by the share of the task's cores the GPU's domain holds, then by distance, and pairs are
// taken best first while the GPU has room. So a task whose cores hold a GPU gets one of those
// before a task that merely lies nearest to it, and the rest take the nearest remaining. GPU
// capacities are an even share of the demand (or the requested tasks-per-gpu), so every GPU is
// used before any takes one more task; with fewer tasks than GPUs, the tasks nearest the GPUs
// left over take one more each.
void Planner::assign_gpus_by_cores() {
  const int gpus = static_cast<int>(step_gpus_.size());
  int per_task = request_.gpus_per_task;
  // Fewer tasks than GPUs: each takes G/n, and G mod n of them one more, so every GPU is used.
  int one_more = 0;
  if (per_task == 0) {
    per_task = ntasks_ >= gpus ? 1 : gpus / ntasks_;
    if (ntasks_ < gpus) one_more = gpus % ntasks_;
  }
  per_task = std::min(per_task, gpus);
  const int demand = ntasks_ * per_task + one_more;
  int base = demand / gpus, extra = demand % gpus;
  if (request_.tasks_per_gpu > 0 && request_.tasks_per_gpu * gpus >= demand) {
    base = request_.tasks_per_gpu;
    extra = 0;
  }
  task_gpus_.assign(ntasks_, {});
  task_tiles_.assign(ntasks_, -1);

  // GPUs of one locality are alike to a task: pairs are (task, domain), a domain's GPUs taken
  // in GPU order.
  Scratch<int> domains;  // the first step GPU of each domain
  for (int g = 0; g < gpus; ++g) {
    if (gpu_domain_[g] == g) domains.push_back(g);
  }
  struct Pair {
    int local_share;  // the task's cores in the domain, per 2^16 of its cores, negated
    int distance;
    int task, domain;
    bool operator<(const Pair& o) const {
      return std::tie(local_share, distance, task, domain) <
             std::tie(o.local_share, o.distance, o.task, o.domain);
    }
  };
  Scratch<Pair> pairs;
  pairs.reserve(static_cast<size_t>(ntasks_) * domains.size());
  for (int task = 0; task < ntasks_; ++task) {
    const Place here = task_place(task);
    const Region& cores = task_cores_[task];
    for (int d : domains) {
      const CpuSet& domain = gpu_locality(d).cpus;
      const long local = std::count_if(cores.begin(), cores.end(),
                                       [&](int u) { return domain.test(usable_[u].first_pu); });
      const int share = cores.empty() ? 0 : static_cast<int>((local << 16) / cores.size());
      pairs.push_back({-share, distance(here, place_of(gpu_locality(d))), task, d});
    }
  }
  // Sorted lazily: the pairs of a domain holding all of a task's cores first (with one task per
  // core, usually all that is needed), the rest only when a round reaches them.
  const auto whole = std::partition(pairs.begin(), pairs.end(),
                                    [](const Pair& p) { return p.local_share == -(1 << 16); });
  std::sort(pairs.begin(), whole);
  bool rest_sorted = false;
  auto for_pairs = [&](auto&& needed, auto&& visit) {
    for (auto p = pairs.begin(); p != whole; ++p)
      visit(*p);
    if (!needed()) return;
    if (!rest_sorted) std::sort(whole, pairs.end());
    rest_sorted = true;
    for (auto p = whole; p != pairs.end(); ++p)
      visit(*p);
  };

  Scratch<int> load(gpus, 0);
  auto holds = [&](int task, int g) {
    const Scratch<int>& mine = task_gpus_[task];
    return std::find(mine.begin(), mine.end(), g) != mine.end();
  };
  auto wants = [&](int task) { return static_cast<int>(task_gpus_[task].size()) < per_task; };
  // Gives the pair's task the first GPU of the pair's domain that has room (a load below `room`)
  // and that it does not hold, if it `may` take one; false when it took none.
  auto take_from = [&](const Pair& p, int room, auto&& may) {
    for (int g = p.domain; g < gpus && may(p.task); ++g) {
      if (gpu_domain_[g] != p.domain || load[g] >= room || holds(p.task, g)) continue;
      ++load[g];
      task_gpus_[p.task].push_back(g);
      if (explain_) explain_gpu_by_cores(p.task, g, -p.local_share);
      return true;
    }
    return false;
  };
  // Up to the even share; then one more on `extra` GPUs; then one more GPU each for the
  // `one_more` tasks; then, if capacities leave a task nothing new, the least loaded GPU it
  // does not hold.
  auto anyone_wants = [&] {
    for (int task = 0; task < ntasks_; ++task)
      if (wants(task)) return true;
    return false;
  };
  for_pairs(anyone_wants, [&](const Pair& p) {
    while (take_from(p, base, wants)) {
    }
  });
  for_pairs([&] { return extra > 0 && anyone_wants(); },
            [&](const Pair& p) {
              while (extra > 0 && take_from(p, base + 1, wants))
                --extra;
            });
  auto at_even_share = [&](int task) {
    return static_cast<int>(task_gpus_[task].size()) == per_task;
  };
  for_pairs([&] { return one_more > 0; },
            [&](const Pair& p) {
              if (one_more > 0 && take_from(p, base, at_even_share)) --one_more;
            });
  for (int task = 0; task < ntasks_; ++task) {
    while (static_cast<int>(task_gpus_[task].size()) < per_task) {
      int best = -1;
      for (int g = 0; g < gpus; ++g) {
        if (!holds(task, g) && (best < 0 || load[g] < load[best])) best = g;
      }
      if (best < 0) break;
      ++load[best];
      task_gpus_[task].push_back(best);
      if (explain_) {
        GpuChoice choice;
        choice.step_index = best;
        choice.reason = GpuReason::kLeastLoaded;
        choice.nearness = sizes_.nearness(task_place(task), place_of(gpu_locality(best)));
        record_gpu(task, choice);
      }
    }
  }
}

// order=cpu: the task took step GPU `g` for the share of its cores (per 2^16) in g's domain.
void Planner::explain_gpu_by_cores(int task, int g, int share) {
  GpuChoice choice;
  choice.step_index = g;
  choice.reason = share > 0 ? GpuReason::kCoreShare : GpuReason::kNearest;
  choice.share_permille = static_cast<int>((static_cast<long>(share) * 1000 + (1 << 15)) >> 16);
  choice.nearness = sizes_.nearness(task_place(task), place_of(gpu_locality(g)));
  record_gpu(task, choice);
}

// Once per step: tasks without a CPU in any of their GPUs' domains (on shared nodes the step's
// CPUs may lie elsewhere), naming the first few.
void Planner::warn_tasks_far_from_gpus() {
  Scratch<int> far;
  for (const TaskPlan& task : plan_.tasks) {
    if (task.gpus.empty() || task.gpus[0].node_index < 0) continue;
    const bool near = std::any_of(task.gpus.begin(), task.gpus.end(), [&](const TaskGpu& gpu) {
      return task.cpus.intersects(topo_.gpus[gpu.node_index].locality.cpus);
    });
    if (!near) far.push_back(task.rank);
  }
  if (explain_) {
    for (int rank : far)
      explain_->tasks[rank].far_from_gpu = true;
  }
  if (far.empty()) return;
  std::string which;
  for (size_t i = 0; i < far.size() && i < 3; ++i) {
    const TaskPlan& task = plan_.tasks[far[i]];
    const Gpu& gpu = topo_.gpus[task.gpus[0].node_index];
    // The plan's index counts the node's tasks: only the launcher knows their ranks.
    which += std::string(which.empty() ? "" : ", ") + "local task " + std::to_string(task.rank) +
             ": GPU " + gpu.pci_bus_id + " on " + describe_locality(gpu.locality);
  }
  if (far.size() > 3) which += ", ...";
  warn(std::to_string(far.size()) + " of " + counted(ntasks_, "task") +
       (far.size() == 1 ? " has no CPU in its GPU's domain ("
                        : " have no CPU in their GPUs' domains (") +
       which + "): the step's CPUs there are too few or none");
}

// Once per step: the step's GPUs and the tasks' NICs whose locality the node does not report
// (topology.h, LocalityKind::kUnknown). Cores placed "near" them would be a guess.
void Planner::warn_unknown_locality() {
  std::vector<std::string> devices;
  size_t unknown = 0;
  auto note = [&](const Locality& locality, const std::string& name) {
    if (locality_known(locality)) return;
    if (++unknown <= 3) devices.push_back(name);
  };
  for (const StepGpu& gpu : step_gpus_) {
    if (gpu.node_index < 0) continue;
    const Gpu& node_gpu = topo_.gpus[gpu.node_index];
    note(node_gpu.locality, "GPU " + (node_gpu.pci_bus_id.empty() ? std::to_string(gpu.node_index)
                                                                  : node_gpu.pci_bus_id));
  }
  std::vector<int> nics;
  for (const TaskPlan& task : plan_.tasks)
    for (int n : task.nic_indices)
      if (std::find(nics.begin(), nics.end(), n) == nics.end()) nics.push_back(n);
  for (int n : nics)
    note(topo_.nics[n].locality, "NIC " + topo_.nics[n].name);
  if (unknown == 0) return;
  std::string which;
  for (const std::string& device : devices)
    which += (which.empty() ? "" : ", ") + device;
  if (unknown > devices.size())
    which += " and " + std::to_string(unknown - devices.size()) + " more";
  warn("the node reports no CPU locality for " + which +
       " (every CPU is local to them): the tasks' cores are not chosen by nearness to them");
}

// Once per step: tasks that share a whole GPU (not tiles of it). NCCL before 2.30 and RCCL stop
// with "Duplicate GPU detected" when two ranks of one communicator hold the same GPU; NCCL 2.30
// and later allow it only with NCCL_MULTI_RANK_GPU_ENABLE=1. Which communicators a step builds
// is the job's, so this is said, not changed.
void Planner::warn_shared_gpus() {
  Scratch<int> holders(step_gpus_.size(), 0);
  int first_shared = -1;
  for (int task = 0; task < ntasks_; ++task) {
    if (task_tiles_[task] >= 0) continue;
    for (int g : task_gpus_[task])
      if (++holders[g] == 2 && first_shared < 0) first_shared = g;
  }
  if (explain_ && first_shared >= 0) {
    for (int task = 0; task < ntasks_; ++task) {
      for (int g : task_gpus_[task])
        if (task_tiles_[task] < 0 && holders[g] > 1) explain_->tasks[task].shares_gpu = true;
    }
  }
  if (first_shared < 0) return;
  const int shared =
      static_cast<int>(std::count_if(holders.begin(), holders.end(), [](int n) { return n > 1; }));
  const Gpu& gpu = topo_.gpus[step_gpus_[first_shared].node_index];
  warn(counted(holders[first_shared], "task") + " share GPU " + gpu.pci_bus_id +
       (shared > 1 ? " (and " + counted(shared - 1, "more GPU") + (shared > 2 ? " are" : " is") +
                         " shared)"
                   : "") +
       ": NCCL before 2.30 and RCCL refuse two ranks of one communicator on one GPU (\"Duplicate "
       "GPU detected\"); NCCL 2.30 and later need NCCL_MULTI_RANK_GPU_ENABLE=1");
}

}  // namespace gpubind::planning
