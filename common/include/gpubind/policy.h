// The site policy as the planner uses it. Loaded from protobuf text by policy_loader.h; the
// defaults here are what a node gets with no policy file at all.
#pragma once

#include <string>
#include <vector>

#include "gpubind/cpuset.h"

namespace gpubind {

enum class Order { kGpu, kCpu };
const char* order_name(Order order);  // "gpu", "cpu"

struct EnvTemplate {
  std::string name;
  std::string value;  // may hold {placeholders}: see env.h
  std::string when;   // vendor (gpu_env) or NIC kind (nic_env); empty = always
  bool only_if_unset = false;
};

// What a healthy node of the site has (policy field `expect`), for the node health check
// (node_check.h). Zero values are not checked.
struct ExpectedNode {
  enum class Pairing { kUnchecked, kPackage, kNuma };
  enum class NumaBalancing { kUnchecked, kOff, kOn };
  int gpu_count = 0;
  std::string gpu_model;  // glob
  int nic_count = 0;
  std::vector<std::string> nics;  // globs, each naming a NIC that must be there
  Pairing gpu_nic_pairing = Pairing::kUnchecked;
  NumaBalancing numa_balancing = NumaBalancing::kUnchecked;
  bool io_locality_unknown = false;  // devices without locality are expected here (a VM)
};

struct SitePolicy {
  std::string source = "(built-in defaults)";
  CpuSet reserved_cpus;
  bool reserve_first_core_per_l3 = false;
  std::vector<std::string> nic_patterns = default_nic_patterns();
  int smt = 0;  // hardware threads per core for tasks; 0 = all the step allows
  Order order = Order::kGpu;
  std::vector<std::string> gpu_order;
  std::vector<EnvTemplate> gpu_env = default_gpu_env();
  std::vector<EnvTemplate> nic_env = default_nic_env();
  std::vector<EnvTemplate> omp_env = default_omp_env();
  bool omp_places = false;
  std::string topology_file;
  bool gpu_domain_only = false;  // spare cores stay idle instead of going to the nearest tasks
  bool gpu_runtime_discovery = false;  // live discovery may load hwloc's GPU runtime plugins
  ExpectedNode expect;

  static std::vector<std::string> default_nic_patterns();
  static std::vector<EnvTemplate> default_gpu_env();
  static std::vector<EnvTemplate> default_nic_env();
  static std::vector<EnvTemplate> default_omp_env();
};

// Shell-style glob ('*', '?', '[...]') as used by nic_patterns.
bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace gpubind
