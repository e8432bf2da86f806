#include "gpubind/env_names.h"

#include <algorithm>

namespace gpubind {
namespace {

bool starts_with(std::string_view name, std::string_view prefix) {
  return name.substr(0, prefix.size()) == prefix;
}

// Exact names and prefixes (ending in '*') of variables that decide what code a process loads or
// runs, or who the job is.
constexpr std::string_view kChangesWhatRuns[] = {
    "LD_*",
    "PATH",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "IFS",
    "CDPATH",
    "SHELL",
    "HOME",
    "TMPDIR",
    "PYTHON*",
    "PERL5LIB",
    "PERLLIB",
    "PERL5OPT",
    "PERL5DB",
    "RUBYLIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "NODE_PATH",
    "CLASSPATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "MALLOC_*",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "RESOLV_HOST_CONF",
    "OMP_TOOL*",
    "CUDA_INJECTION*",
    "HSA_TOOLS_LIB",
    "NCCL_NET_PLUGIN",
    "NCCL_TUNER_PLUGIN",
    "NCCL_PROFILER_PLUGIN",
    "FI_PROVIDER_PATH",
    "UCX_MODULE_DIR",
    "ZE_ENABLE_*_LAYER",
    "OMPI_MCA_*",
    "PMIX_MCA_*",
    "PRTE_MCA_*",
    "I_MPI_OFI_LIBRARY",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    "NCCL_CONF_FILE",
    "NCCL_ENV_PLUGIN",
    "ROCP_TOOL_LIB*",
    "HWLOC_PLUGINS_PATH",
    "MODULEPATH",
    "PROMPT_COMMAND",
    "LESSOPEN",
    "ZDOTDIR",
    "SLURM_*",
    "SPANK_*",
    // The container runtimes' own settings (binds, overlays, the image): APPTAINER_BIND...
    "APPTAINER_*",
    "SINGULARITY_*",
};

// Apptainer and Singularity set NAME in the container from PREFIX+NAME (container_twin_of): each
// runtime's program and its prefix.
struct ContainerRuntime {
  std::string_view program, prefix;
};
constexpr ContainerRuntime kContainerRuntimes[] = {{"apptainer", "APPTAINERENV_"},
                                                   {"singularity", "SINGULARITYENV_"}};

// What binding sets: the defaults, the shipped site policies, and their close relatives.
constexpr std::string_view kBindingVariables[] = {
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "ZE_AFFINITY_MASK",
    "ZE_ENABLE_PCI_ID_DEVICE_ORDER",
    "ZE_FLAT_DEVICE_HIERARCHY",
    "CCL_WORKER_AFFINITY",
    "MPICH_OFI_NIC_POLICY",
    "MPICH_OFI_NIC_MAPPING",
    "MPICH_OFI_NIC_VERBOSE",
    "UCX_NET_DEVICES",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "FI_PROVIDER",
    "I_MPI_OFI_PROVIDER",
    "OMP_NUM_THREADS",
    "OMP_PLACES",
    "OMP_PROC_BIND",
    "KMP_AFFINITY",
    "GPUBIND_*",
    "OMP_DISPLAY_AFFINITY",
};

// "LD_*" matches every name starting "LD_"; "ZE_ENABLE_*_LAYER" a prefix and suffix.
bool matches(std::string_view name, std::string_view pattern) {
  const size_t star = pattern.find('*');
  if (star == std::string_view::npos) return name == pattern;
  const std::string_view prefix = pattern.substr(0, star), suffix = pattern.substr(star + 1);
  return name.size() >= prefix.size() + suffix.size() && starts_with(name, prefix) &&
         name.substr(name.size() - suffix.size()) == suffix;
}

template <class Patterns>
bool any_matches(std::string_view name, const Patterns& patterns) {
  return std::any_of(std::begin(patterns), std::end(patterns),
                     [&](const auto& pattern) { return matches(name, pattern); });
}

}  // namespace

std::string_view container_twin_of(std::string_view name) {
  for (const ContainerRuntime& runtime : kContainerRuntimes) {
    if (starts_with(name, runtime.prefix)) return name.substr(runtime.prefix.size());
  }
  return {};
}

std::string_view container_env_prefix_of(std::string_view command) {
  for (const ContainerRuntime& runtime : kContainerRuntimes)
    if (command == runtime.program) return runtime.prefix;
  return {};
}

// A twin is what its variable is inside the container: APPTAINERENV_LD_PRELOAD changes what runs.
bool changes_what_runs(std::string_view name) {
  const std::string_view inner = container_twin_of(name);
  return any_matches(name, kChangesWhatRuns) || (!inner.empty() && changes_what_runs(inner));
}

bool is_binding_variable(std::string_view name, const std::vector<std::string>& site) {
  if (changes_what_runs(name)) return false;
  if (const std::string_view inner = container_twin_of(name); !inner.empty())
    return is_binding_variable(inner, site);
  return any_matches(name, kBindingVariables) || any_matches(name, site);
}

}  // namespace gpubind
