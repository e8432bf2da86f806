#include "gpubind/launcher.h"

#include <climits>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gpubind/parse.h"

namespace gpubind {
namespace {

// Most processes per node any launcher starts here (the planner's own task limit).
constexpr int kMaxLocalSize = 4096;

struct Launcher {
  const char* name;
  const char* rank_var;
  const char* size_var;  // nullptr: the count is found another way (size_of)
  const char* world_rank_var;
};

// First match wins. Worker launchers first: they run inside an MPI or Slurm task whose own
// variables are still set. Intel MPI and MVAPICH2's mpirun_rsh set the Hydra and MV2 names.
constexpr Launcher kLaunchers[] = {
    {"torchrun", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK"},
    {"DeepSpeed", "LOCAL_RANK", "LOCAL_SIZE", "RANK"},  // its own launcher (deepspeed)
    {"Open MPI", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
     "OMPI_COMM_WORLD_RANK"},
    {"MPICH Hydra", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_RANK"},
    {"MVAPICH2", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_RANK"},
    {"HPE PALS", "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE", "PALS_RANKID"},
    {"Flux", "FLUX_TASK_LOCAL_ID", nullptr, "FLUX_TASK_RANK"},
    {"Slurm", "SLURM_LOCALID", nullptr, "SLURM_PROCID"},
};

Result<int> read_count(const EnvReader& env, const std::string& name, int min, int max) {
  const auto text = env(name);
  if (!text) return make_error(name + " is not set");
  const auto value = parse_whole_number(*text, min, max);
  if (!value) {
    return make_error(name + "='" + *text + "' is not a number from " + std::to_string(min) +
                      " to " + std::to_string(max));
  }
  return static_cast<int>(*value);
}

// Flux exports no per-node count: its tasks spread evenly or the count must be given.
Result<int> flux_local_size(const EnvReader& env) {
  auto total = read_count(env, "FLUX_JOB_SIZE", 1, INT_MAX);
  auto nodes = read_count(env, "FLUX_JOB_NNODES", 1, INT_MAX);
  if (!total || !nodes || *total % *nodes != 0) {
    return make_error(
        "Flux does not say how many of the job's tasks run on this node (FLUX_JOB_SIZE is not a "
        "multiple of FLUX_JOB_NNODES): give --local-size");
  }
  return *total / *nodes;
}

// The step's count on this node: SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID (the job's
// SLURM_TASKS_PER_NODE outside a step), as srun and sbatch export them; else the
// --ntasks-per-node the job asked for.
Result<int> slurm_local_size(const EnvReader& env) {
  auto node = read_count(env, "SLURM_NODEID", 0, INT_MAX);
  if (!node) {
    if (env("SLURM_NTASKS_PER_NODE"))
      return read_count(env, "SLURM_NTASKS_PER_NODE", 1, kMaxLocalSize);
    return node.error();
  }
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    const auto text = env(name);
    if (!text) continue;
    if (const auto count = tasks_on_node(*text, *node)) return *count;
    return make_error(std::string(name) + "='" + *text + "' names no count for node " +
                      std::to_string(*node) + " (SLURM_NODEID)");
  }
  if (env("SLURM_NTASKS_PER_NODE"))
    return read_count(env, "SLURM_NTASKS_PER_NODE", 1, kMaxLocalSize);
  return make_error("SLURM_STEP_TASKS_PER_NODE is not set");
}

std::optional<int> parse_count_part(const std::string& text) {
  const auto value = parse_whole_number(text, 0, kMaxLocalSize);
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

}  // namespace

std::optional<int> tasks_on_node(const std::string& tasks_per_node, int node) {
  size_t start = 0;
  int64_t first_node = 0;
  while (start <= tasks_per_node.size()) {
    const size_t comma = tasks_per_node.find(',', start);
    const std::string item = tasks_per_node.substr(start, comma - start);
    // "N" or "N(xR)": N tasks on each of R nodes.
    int64_t repeat = 1;
    std::string count_text = item;
    if (const size_t open = item.find("(x"); open != std::string::npos) {
      if (item.back() != ')') return std::nullopt;
      const auto times =
          parse_whole_number(item.substr(open + 2, item.size() - open - 3), 1, INT_MAX);
      if (!times) return std::nullopt;
      repeat = *times;
      count_text = item.substr(0, open);
    }
    const auto count = parse_count_part(count_text);
    if (!count) return std::nullopt;
    if (node - first_node < repeat) return *count;
    first_node += repeat;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return std::nullopt;
}

Result<LocalRank> local_rank_from_env(const EnvReader& env, std::optional<int> rank,
                                      std::optional<int> size) {
  LocalRank out;
  std::string rank_from = "--local-rank", size_from = "--local-size";
  const Launcher* found = nullptr;
  if (!rank || !size) {
    // The first whose rank is set. Rows sharing its rank variable (torchrun's and DeepSpeed's
    // LOCAL_RANK) differ by their count: the one whose count is set, unless --local-size is.
    // Never a later launcher: its rank is another level's (SLURM_LOCALID is the task's).
    for (const Launcher& launcher : kLaunchers) {
      if (!env(launcher.rank_var)) continue;
      if (!found) {
        found = &launcher;
        if (size) break;
      } else if (std::string_view(launcher.rank_var) != found->rank_var) {
        break;
      }
      if (!launcher.size_var || env(launcher.size_var)) {
        found = &launcher;
        break;
      }
    }
    if (!found) {
      return make_error(
          "no launcher says which local rank this process is (none of LOCAL_RANK, "
          "OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, MV2_COMM_WORLD_LOCAL_RANK, "
          "PALS_LOCAL_RANKID, FLUX_TASK_LOCAL_ID, SLURM_LOCALID is set): give --local-rank and "
          "--local-size");
    }
  }
  if (size) {
    if (*size < 1 || *size > kMaxLocalSize)
      return make_error("--local-size " + std::to_string(*size) + " is not from 1 to " +
                        std::to_string(kMaxLocalSize));
    out.size = *size;
  } else {
    Result<int> count = found->size_var ? read_count(env, found->size_var, 1, kMaxLocalSize)
                        : std::string(found->name) == "Flux" ? flux_local_size(env)
                                                             : slurm_local_size(env);
    if (!count) {
      return make_error(std::string(found->name) + " gives the local rank (" + found->rank_var +
                        ") but not the count of local ranks: " + count.error().message);
    }
    out.size = *count;
    size_from = found->size_var ? found->size_var : "its job's task counts";
  }
  if (rank) {
    out.rank = *rank;
  } else {
    auto value = read_count(env, found->rank_var, 0, kMaxLocalSize - 1);
    if (!value) return value.error();
    out.rank = *value;
    rank_from = found->rank_var;
  }
  if (out.rank < 0 || out.rank >= out.size) {
    return make_error("local rank " + std::to_string(out.rank) + " (" + rank_from +
                      ") is not below the local size " + std::to_string(out.size) + " (" +
                      size_from + ")");
  }
  if (found && (!rank || !size)) {
    out.launcher = found->name;
    if (const auto world = env(found->world_rank_var)) {
      if (const auto value = parse_whole_number(*world, 0, INT_MAX))
        out.world_rank = static_cast<int>(*value);
    }
  }
  out.source = found && (!rank || !size)
                   ? std::string(found->name) + " (" + rank_from + ", " + size_from + ")"
                   : rank_from + ", " + size_from;
  return out;
}

}  // namespace gpubind
