#include "gpubind/client/apply.h"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "gpubind/affinity.h"
#include "gpubind/cpuset.h"

namespace gpubind::client {

std::optional<std::string> ProcessEnvironment::get(const std::string& name) const {
  const char* value = std::getenv(name.c_str());
  return value ? std::optional<std::string>(value) : std::nullopt;
}

bool ProcessEnvironment::set(const std::string& name, const std::string& value) {
  return setenv(name.c_str(), value.c_str(), 1) == 0;
}

void ProcessEnvironment::unset(const std::string& name) {
  unsetenv(name.c_str());
}

void clear_stale_binding(TaskEnvironment& env) {
  for (const std::string& name : stale_binding_vars(env.lookup()))
    env.unset(name);
}

void clear_binding_info(TaskEnvironment& env) {
  for (const std::string& name : binding_info_vars(env.lookup()))
    env.unset(name);
}

namespace {

bool set_by_slurm(const std::string& name) {
  const auto vars = slurm_visibility_vars();
  return std::find(vars.begin(), vars.end(), name) != vars.end();
}

}  // namespace

Result<Applied> apply_binding(const TaskBinding& task, TaskEnvironment& env,
                              const ApplyOptions& options) {
  Applied applied;
  if (options.bind_cpus) {
    auto cpus = CpuSet::parse_list(task.cpus);
    if (!cpus) return cpus.error();
    if (auto bound = set_affinity(*cpus); !bound)
      return make_error("cannot bind to CPUs " + task.cpus + ": " + bound.error().message);
  }
  if (options.prefer_memory && task.numa_node >= 0) {
    if (auto preferred = prefer_numa_node(task.numa_node); !preferred)
      applied.memory_refused = preferred.error().message;
  }
  if (options.clear_stale) clear_stale_binding(env);
  std::vector<std::pair<std::string, std::string>> set;
  for (const TaskEnv& var : task.env) {
    if (var.only_if_unset && env.get(var.name)) continue;
    if (!options.set_gpu_visibility && set_by_slurm(var.name)) continue;
    if (env.set(var.name, var.value)) set.emplace_back(var.name, var.value);
  }
  env.set(kSetRecordVar, record_of_set_vars(set));
  if (options.align_other_visibility) {
    for (const VisibilityUpdate& update : other_visibility_vars(env.lookup(), task))
      env.set(update.name, update.value);
  }
  return applied;
}

}  // namespace gpubind::client
