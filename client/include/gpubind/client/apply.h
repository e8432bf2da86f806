// Applying one task's binding to the process that becomes the task: its CPU affinity, its NUMA
// memory preference and its environment. The SPANK plugin applies it to a Slurm task (through
// spank_setenv, in slurmstepd's forked task), gpubind-run to its own process: one function for
// both, over the environment each of them writes.
#pragma once

#include <optional>
#include <string>

#include "gpubind/client/step_env.h"
#include "gpubind/client/types.h"
#include "gpubind/result.h"

namespace gpubind::client {

// The environment the task will run with.
class TaskEnvironment {
 public:
  virtual ~TaskEnvironment() = default;
  virtual std::optional<std::string> get(const std::string& name) const = 0;
  // False where the variable could not be set.
  virtual bool set(const std::string& name, const std::string& value) = 0;
  virtual void unset(const std::string& name) = 0;
  EnvLookup lookup() const {
    return [this](const std::string& name) { return get(name); };
  }
};

// This process's own environment (getenv, setenv, unsetenv).
class ProcessEnvironment final : public TaskEnvironment {
 public:
  std::optional<std::string> get(const std::string& name) const override;
  bool set(const std::string& name, const std::string& value) override;
  void unset(const std::string& name) override;
};

struct ApplyOptions {
  // False where the task's CPU binding stays Slurm's (the user's explicit --cpu-bind).
  bool bind_cpus = true;
  // False where the task's memory policy stays Slurm's (the user's explicit --mem-bind).
  bool prefer_memory = true;
  // Also point the GPU visibility variables the plan does not set (HIP's after ROCm's, ...) at
  // the task's GPUs; false where GPU variables are left alone or stay Slurm's.
  bool align_other_visibility = true;
  // False where the variables Slurm sets for GPUs are Slurm's (it chose the task's GPUs, or
  // --gpu-bind=none): the plan's values of them are not set (an inherited HIP list the plan
  // rewrote still is).
  bool set_gpu_visibility = true;
  // Clear what an outer binding left (clear_stale_binding) once the CPUs are set: a launcher's
  // workers under gpubind-run, where nobody exports anything in between. The plugin clears only
  // the GPUBIND_* information, for every task, bound or not, before it gets here.
  bool clear_stale = false;
};

// Clears what an outer binding left in `env`: the GPUBIND_* information, and every variable
// gpubind set there that still holds gpubind's value.
void clear_stale_binding(TaskEnvironment& env);
// Clears only the GPUBIND_* information and the record: a step started from a shell inside a
// bound task, where a value gpubind set may have been exported again by the user.
void clear_binding_info(TaskEnvironment& env);

// What applying left undone without failing: the memory preference the kernel refused ("" if
// none), for the caller to say.
struct Applied {
  std::string memory_refused;
};

// Binds the calling process (the task) to `task`'s CPUs, prefers its NUMA node for memory, and
// sets its variables (those marked only_if_unset only where unset) with the record of what was
// set (kSetRecordVar). Fails only when the CPUs cannot be set, and then changes nothing.
Result<Applied> apply_binding(const TaskBinding& task, TaskEnvironment& env,
                              const ApplyOptions& options);

}  // namespace gpubind::client
