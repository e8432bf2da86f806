// Which local rank a process is, as its launcher says: torchrun, Open MPI, MPICH's Hydra, HPE
// PALS, Flux or Slurm each export the rank among the node's workers and their count under names
// of their own. Pure: reads an environment lookup.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "gpubind/result.h"

namespace gpubind {

struct LocalRank {
  int rank = 0, size = 1;
  int world_rank = -1;   // the rank across nodes where the launcher says it, else -1
  std::string launcher;  // "torchrun", "Open MPI", ... "Slurm"; "" when both were given
  std::string source;    // "torchrun (LOCAL_RANK, LOCAL_WORLD_SIZE)", "--local-rank, --local-size"
};

using EnvReader = std::function<std::optional<std::string>(const std::string& name)>;

// The first launcher whose rank variable is set, in the order of the table in launcher.cpp
// (worker launchers before MPI, MPI before Slurm: torchrun inside an srun task has both, and its
// workers are the ones to divide; a launcher that exports no count needs `size`, never another
// level's variables); `rank` and `size` override what the environment says. Fails
// with the variable at fault named: no launcher at all, a rank without its count, a value that is
// not a number, a rank outside 0..size-1.
Result<LocalRank> local_rank_from_env(const EnvReader& env, std::optional<int> rank = std::nullopt,
                                      std::optional<int> size = std::nullopt);

// Slurm's compressed per-node counts ("2(x3),1") expanded at node `node`; nullopt when the text
// does not read or has no such node.
std::optional<int> tasks_on_node(const std::string& tasks_per_node, int node);

}  // namespace gpubind
