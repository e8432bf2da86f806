#include "worker_setup.h"

#include <sched.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <utility>
#include <vector>

#include "gpubind/affinity.h"
#include "gpubind/parse.h"

namespace gpubind::run {
namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The CPUs this process's cpuset cgroup allows (cgroup v2, else v1's cpuset hierarchy); empty
// where none says.
CpuSet cgroup_cpus() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    std::string file;
    if (controllers.empty()) {
      file = "/sys/fs/cgroup" + path + "/cpuset.cpus.effective";
    } else if (("," + controllers + ",").find(",cpuset,") != std::string::npos) {
      file = "/sys/fs/cgroup/cpuset" + path + "/cpuset.effective_cpus";
    } else {
      continue;
    }
    auto cpus = CpuSet::parse_list(first_line(file));
    if (cpus && !cpus->empty()) return *cpus;
  }
  return {};
}

uint64_t id_from_env(const spank::EnvLookup& env, const char* name) {
  const auto text = env(name);
  if (!text) return 0;
  return static_cast<uint64_t>(parse_whole_number(*text, 0, LLONG_MAX).value_or(0));
}

}  // namespace

LauncherCpus launcher_cpus_of(const CpuSet& own, const CpuSet& parent, const CpuSet& cgroup) {
  // A parent outside the job's cpuset (slurmstepd, a PBS mom, init) may have the whole node.
  const CpuSet launcher = cgroup.empty() ? parent : parent & cgroup;
  if (!launcher.empty() && own.is_subset_of(launcher) && !(own == launcher)) {
    return {launcher, "the launcher's: it bound this worker to " + own.to_list()};
  }
  return {own, "this process's"};
}

LauncherCpus launcher_cpus() {
  return launcher_cpus_of(current_affinity(), affinity_of(getppid()), cgroup_cpus());
}

bool already_bound_by_plugin(const spank::EnvLookup& env, const LocalRank& place) {
  return place.launcher == "Slurm" && env("GPUBIND_BOUND") == "1" &&
         env("GPUBIND_LOCAL_RANK") == std::to_string(place.rank);
}

spank::StepRequest worker_request(const spank::EnvLookup& env, const LocalRank& place,
                                  const spank::UserFlags& flags, const CpuSet& cpus) {
  spank::StepRequest request;
  // For the daemon's log only: plans do not depend on them.
  request.job_id = id_from_env(env, "SLURM_JOB_ID");
  request.step_id = id_from_env(env, "SLURM_STEP_ID");
  request.ntasks = place.size;
  request.allowed_cpus = cpus.to_list();
  request.order = flags.order.value_or("");
  request.smt = flags.smt.value_or(-1);
  request.no_gpu_env = flags.no_gpu_env;
  request.no_nic_env = flags.no_nic_env;
  request.omp = flags.omp;
  request.ze_hierarchy = spank::ze_hierarchy_from_env(env);
  return request;
}

Status apply_binding(const spank::EnvLookup& env, const spank::TaskBinding& task,
                     const spank::UserFlags& flags) {
  auto cpus = CpuSet::parse_list(task.cpus);
  if (!cpus) return cpus.error();
  if (auto bound = set_affinity(*cpus); !bound)
    return make_error("cannot bind to CPUs " + task.cpus + ": " + bound.error().message);
  prefer_numa_node(task.numa_index);
  for (const std::string& name : spank::stale_binding_vars(env))
    unsetenv(name.c_str());
  std::vector<std::pair<std::string, std::string>> set;
  for (const spank::TaskEnv& var : task.env) {
    if (var.only_if_unset && env(var.name)) continue;
    if (setenv(var.name.c_str(), var.value.c_str(), 1) == 0) set.emplace_back(var.name, var.value);
  }
  setenv(spank::kSetRecordVar, spank::record_of_set_vars(set).c_str(), 1);
  if (!flags.no_gpu_env) {
    for (const spank::VisibilityUpdate& update : spank::other_visibility_vars(env, task))
      setenv(update.name.c_str(), update.value.c_str(), 1);
  }
  return Ok{};
}

}  // namespace gpubind::run
