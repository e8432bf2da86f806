// The words of `gpubindctl explain`: a plan and the planner's recorded reasons (explain.h), as
// text for people and as JSON whose entries carry the same sentences beside the data.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpubind/explain.h"
#include "gpubind/planner.h"
#include "gpubind/topology.h"

namespace gpubind {

// Where each top-level field of the policy file is written: its lines, in order (the i-th
// gpu_env entry is on the i-th line listed). Empty: the built-in defaults, or lines unknown.
using PolicyLines = std::map<std::string, std::vector<int>>;

// The fields of a policy file's text and their lines (protobuf text format, one top-level field
// per line as the shipped policies write them).
PolicyLines policy_field_lines(const std::string& text);

// Slurm's own choice of one local task's GPUs (--gpu-bind=map_gpu, mask_gpu, per_task): the
// plugin keeps Slurm's GPUs and binds the task as a planned task holding them
// (client/slurm_gpu_choice.h's keep_slurm_gpus), which explain says beside the plan's reasons.
struct SlurmGpuChoice {
  enum class Basis { kStepGpus, kSameGpus, kSomeOfItsGpus, kOwnTask };
  int rank = 0;
  std::string binding;  // "map_gpu:1,0"
  // kStepGpus: Slurm left it the step's GPUs and the plan applies as it is; else whose binding
  // it takes (KeptBinding::Basis).
  Basis basis = Basis::kStepGpus;
  std::string gpus, gpu_pci;  // Slurm's GPUs for it, as the step names them, and their bus ids
  int planned_rank = -1;      // the planned task whose binding it takes
  std::string cpus, nics;     // what it is bound to then
  bool may_share = false;     // its cores may be other tasks' too
};

// `rank`: only that local task (the step-wide part is still shown); nullopt: every task.
// `slurm`: each task's SlurmGpuChoice, where the step has Slurm's per-task GPU binding.
std::string explain_to_text(const Topology& topology, const Plan& plan,
                            const PlanExplanation& explanation, std::optional<int> rank,
                            const PolicyLines& lines = {},
                            const std::vector<SlurmGpuChoice>& slurm = {});
std::string explain_to_json(const Topology& topology, const Plan& plan,
                            const PlanExplanation& explanation, std::optional<int> rank,
                            const PolicyLines& lines = {},
                            const std::vector<SlurmGpuChoice>& slurm = {});

}  // namespace gpubind
