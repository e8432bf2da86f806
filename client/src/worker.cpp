#include "gpubind/client/worker.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "gpubind/affinity.h"
#include "gpubind/parse.h"

namespace gpubind::client {
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

}  // namespace

LauncherCpus launcher_cpus_of(const CpuSet& own, const CpuSet& parent, const CpuSet& cgroup) {
  // A parent outside the job's cpuset (slurmstepd, a PBS mom, init) may have the whole node.
  const CpuSet launcher = cgroup.empty() ? parent : parent & cgroup;
  if (!launcher.empty() && own.is_subset_of(launcher) && !(own == launcher)) {
    return {launcher, "the launcher's: it bound this worker to " + own.to_list()};
  }
  return {own, "this process's"};
}

std::vector<std::string> command_line_words(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> words;
  for (std::string word; std::getline(in, word, '\0');)
    words.push_back(word);
  return words;
}

std::optional<LauncherBinding> launcher_binding_of(const LocalRank& place,
                                                   const std::vector<std::string>& launcher_words,
                                                   const std::string& worker_command) {
  if (place.launcher != "torchrun") return std::nullopt;
  // argparse takes any unambiguous abbreviation: "--nu" is the shortest among torchrun's options.
  constexpr size_t kShortest = 4;
  const auto names_numa_binding = [](const std::string& name) {
    return name.size() >= kShortest && (std::string_view("--numa-binding").starts_with(name) ||
                                        std::string_view("--numa_binding").starts_with(name));
  };
  const auto worker = std::find(launcher_words.begin(), launcher_words.end(), worker_command);
  for (auto word = launcher_words.begin(); word != worker; ++word) {
    const size_t equals = word->find('=');
    if (!names_numa_binding(word->substr(0, equals))) continue;
    const bool value_follows = equals == std::string::npos;
    if (value_follows && std::next(word) == worker) break;
    const std::string mode = value_follows ? *std::next(word) : word->substr(equals + 1);
    return LauncherBinding{"torchrun", "--numa-binding=" + mode};
  }
  return std::nullopt;
}

std::optional<LauncherBinding> launcher_binding(const LocalRank& place,
                                                const std::string& worker_command) {
  if (place.launcher != "torchrun") return std::nullopt;
  return launcher_binding_of(
      place, command_line_words("/proc/" + std::to_string(getppid()) + "/cmdline"), worker_command);
}

LauncherCpus launcher_cpus() {
  return launcher_cpus_of(current_affinity(), affinity_of(getppid()), cgroup_cpus());
}

bool already_bound_by_plugin(const EnvLookup& env, const LocalRank& place) {
  return place.launcher == "Slurm" && env("GPUBIND_BOUND") == "1" &&
         env("GPUBIND_LOCAL_RANK") == std::to_string(place.rank);
}

std::optional<CpuSet> recorded_cpus_lost(const EnvLookup& env, const CpuSet& current) {
  const auto recorded = env("GPUBIND_CPUS");
  if (env("GPUBIND_BOUND") != "1" || !recorded) return std::nullopt;
  auto cpus = CpuSet::parse_list(*recorded);
  if (!cpus || cpus->empty() || *cpus == current || !cpus->is_subset_of(current))
    return std::nullopt;
  return *cpus;
}

}  // namespace gpubind::client
