#include "gpubind/client/step_cpus.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "gpubind/parse.h"

namespace gpubind::client {
namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

bool has_option(const std::string& options, const std::string& name) {
  std::istringstream in(options);
  for (std::string option; std::getline(in, option, ',');)
    if (option == name) return true;
  return false;
}

struct Mount {
  std::string root;   // the part of the hierarchy mounted (a container's cgroup namespace)
  std::string point;  // where
};

// The cgroup v2 mount, and the v1 mount of the cpuset controller, from /proc/self/mountinfo:
// "ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPEROPTIONS".
void find_mounts(const std::string& mountinfo, std::optional<Mount>& v2,
                 std::optional<Mount>& v1_cpuset) {
  std::istringstream lines(mountinfo);
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string> w = split_words(line);
    size_t dash = 6;
    while (dash < w.size() && w[dash] != "-")
      ++dash;
    if (w.size() < 5 || dash + 1 >= w.size()) continue;
    const std::string& type = w[dash + 1];
    if (type == "cgroup2" && !v2) v2 = Mount{w[3], w[4]};
    if (type == "cgroup" && dash + 3 < w.size() && has_option(w[dash + 3], "cpuset") && !v1_cpuset)
      v1_cpuset = Mount{w[3], w[4]};
  }
}

// The folder of cgroup `path` under `mount`.
std::string folder_of(const Mount& mount, const std::string& path) {
  std::string inside = path;
  if (mount.root != "/" && inside.rfind(mount.root, 0) == 0)
    inside = inside.substr(mount.root.size());
  if (inside == "/") inside.clear();
  return mount.point + inside;
}

std::optional<CpuSet> cpus_in(const std::string& file) {
  const auto text = read_file(file);
  if (!text) return std::nullopt;
  std::string list = *text;
  while (!list.empty() && (list.back() == '\n' || list.back() == ' '))
    list.pop_back();
  auto cpus = CpuSet::parse_list(list);
  if (!cpus || cpus->empty()) return std::nullopt;
  return *cpus;
}

}  // namespace

std::optional<CpuSet> cgroup_cpus(const std::string& root) {
  const auto mountinfo = read_file(root + "/proc/self/mountinfo");
  const auto cgroups = read_file(root + "/proc/self/cgroup");
  if (!mountinfo || !cgroups) return std::nullopt;
  std::optional<Mount> v2, v1;
  find_mounts(*mountinfo, v2, v1);
  std::istringstream lines(*cgroups);
  std::optional<std::string> v2_path, v1_path;
  // "ID:CONTROLLERS:PATH"; v2's line is "0::PATH".
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) v2_path = path;
    if (has_option(controllers, "cpuset")) v1_path = path;
  }
  // A v1 cpuset controller is the one that confines (a hybrid system mounts both).
  if (v1 && v1_path) {
    const std::string folder = root + folder_of(*v1, *v1_path);
    if (auto cpus = cpus_in(folder + "/cpuset.effective_cpus")) return cpus;
    if (auto cpus = cpus_in(folder + "/cpuset.cpus")) return cpus;
  }
  if (v2 && v2_path) {
    // The controller may not be enabled down to this cgroup: the nearest folder up that has it.
    std::string folder = folder_of(*v2, *v2_path);
    while (true) {
      if (auto cpus = cpus_in(root + folder + "/cpuset.cpus.effective")) return cpus;
      if (folder.size() <= v2->point.size()) break;
      folder = folder.substr(0, folder.rfind('/'));
    }
  }
  return std::nullopt;
}

}  // namespace gpubind::client
