// gpubind-check: run as every task of a step (srun ... gpubind-check) to see what each task got:
// its CPUs as the kernel enforces them, its GPU visibility, NIC and threading environment.
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gpubind/affinity.h"
#include "gpubind/cpuset.h"
#include "gpubind/launcher.h"
#include "gpubind/output/json.h"

namespace {

constexpr const char* kUsage =
    "usage: gpubind-check [--json]\n"
    "Prints one line per task: rank and local rank (as its launcher says: torchrun, MPI, PALS,\n"
    "Flux, Slurm), host, allowed CPUs (from the kernel), GPU visibility, NIC and OpenMP\n"
    "environment, and what gpubind planned for it (GPUBIND_*).\n";

const std::vector<const char*> kGpuVars = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                                           "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                           "ZE_AFFINITY_MASK",     "ZE_FLAT_DEVICE_HIERARCHY",
                                           "GPU_DEVICE_ORDINAL",   "ZE_ENABLE_PCI_ID_DEVICE_ORDER",
                                           "CCL_WORKER_AFFINITY"};
const std::vector<const char*> kNicVars = {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "UCX_NET_DEVICES",
                                           "MPICH_OFI_NIC_POLICY", "MPICH_OFI_NIC_MAPPING"};
// gpubind's own variables: the plan as the plugin gave it (GPUBIND_CPUS beside the kernel's CPUs
// shows a binding changed after the plugin, GPUBIND_GPU_PCI names the GPU by its bus id).
const std::vector<const char*> kOtherVars = {"OMP_NUM_THREADS", "OMP_PLACES",   "OMP_PROC_BIND",
                                             "GPUBIND_BOUND",   "GPUBIND_CPUS", "GPUBIND_GPUS",
                                             "GPUBIND_GPU_PCI", "GPUBIND_NIC",  "GPUBIND_NUMA"};

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

// Rank and local rank as the process's launcher gives them (torchrun, MPI, PALS, Flux, Slurm).
struct Ranks {
  std::string rank = "-", local = "-";
};

Ranks ranks() {
  Ranks out;
  auto place = gpubind::local_rank_from_env([](const std::string& name) {
    const char* value = std::getenv(name.c_str());
    return value ? std::optional<std::string>(value) : std::nullopt;
  });
  if (!place) return {env_or("SLURM_PROCID", "-"), env_or("SLURM_LOCALID", "-")};
  out.local = std::to_string(place->rank);
  if (place->world_rank >= 0) out.rank = std::to_string(place->world_rank);
  return out;
}

std::string allowed_cpus() {
  return gpubind::current_affinity().to_list();
}

std::string hostname() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return host;
}

void print_json() {
  gpubind::output::Json env = gpubind::output::Json::object();
  for (const auto* list : {&kGpuVars, &kNicVars, &kOtherVars}) {
    for (const char* name : *list) {
      if (const char* value = std::getenv(name)) env[name] = value;
    }
  }
  const Ranks r = ranks();
  const gpubind::output::Json json{
      {"rank", r.rank},         {"local_rank", r.local},
      {"host", hostname()},     {"node", env_or("SLURMD_NODENAME", "-")},
      {"cpus", allowed_cpus()}, {"env", std::move(env)}};
  std::printf("%s\n", gpubind::output::to_text(json).c_str());
}

void print_line() {
  const Ranks r = ranks();
  std::string line = "rank " + r.rank + " local " + r.local + " host " + hostname() + " node " +
                     env_or("SLURMD_NODENAME", "-") + " cpus " + allowed_cpus();
  for (const auto* list : {&kGpuVars, &kNicVars, &kOtherVars}) {
    for (const char* name : *list) {
      if (const char* value = std::getenv(name)) line += std::string(" ") + name + "=" + value;
    }
  }
  std::printf("%s\n", line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--help") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "gpubind-check: unknown argument '%s'\n%s", argv[i], kUsage);
      return 2;
    }
  }
  json ? print_json() : print_line();
  return 0;
}
