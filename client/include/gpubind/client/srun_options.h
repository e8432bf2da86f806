// srun's own command line as the plugin reads it in srun: the user's explicit --cpu-bind and
// --gpu-bind, each component's --gpu-bind-auto flags in a heterogeneous step, and the variables
// srun passes them to the step in. Pure parsing, no Slurm.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpubind::client {

// The binding a user asked Slurm for explicitly: srun's own --cpu-bind/--gpu-bind/--mem-bind
// values, less the words that only set verbosity ("verbose", "quiet"); empty where not asked.
// A --mem-bind of "none" asks for nothing and is empty too.
struct ExplicitBinding {
  std::string cpu, gpu, mem;
  bool any() const { return !cpu.empty() || !gpu.empty() || !mem.empty(); }
};
// From srun's options (its arguments before the command): "--cpu-bind=X", "--cpu-bind X" and the
// old "--cpu_bind" spelling (the same for --gpu-bind and --mem-bind); the last one given counts,
// as in srun.
ExplicitBinding explicit_binding(const std::vector<std::string>& launcher_options);
// One component of srun's command line (components are separated by ':' tokens): its
// --gpu-bind-auto flags (nullopt: not given there; "" for the bare option) and explicit binding.
struct LauncherComponent {
  std::optional<std::string> flags;
  ExplicitBinding binding;
};
// Whether an option name (the text before '=') is --gpu-bind-auto, abbreviations included.
bool names_gpu_bind_auto(const std::string& name);
// `args` are srun's arguments after its name; `first_command_argc` is the length of the first
// component's command (Slurm's S_JOB_ARGV), which ends that component's options exactly. Later
// components have no such boundary: all their arguments are read, which matters only where a
// command itself carries --gpu-bind-auto, --cpu-bind or --gpu-bind.
std::vector<LauncherComponent> launcher_components(const std::vector<std::string>& args,
                                                   int first_command_argc);

// srun passes it to the step in this variable (a SLURM_ name, so that --export=NONE keeps it) as
// "cpu-bind=X;gpu-bind=Y;mem-bind=Z".
inline constexpr const char* kExplicitEnv = "SLURM_GPUBIND_USER_BIND";
// srun of one component passes the --gpu-bind-auto flags given on its own command line here: a
// step's option may otherwise be the job's, which srun replays from its environment.
inline constexpr const char* kSrunFlagsEnv = "SLURM_GPUBIND_FLAGS";
// A heterogeneous step: kHetEnv holds the number of components, and component K's flags and
// explicit binding are in kHetFlagsEnv + K and kExplicitEnv + "_" + K (unset: not given there).
inline constexpr const char* kHetEnv = "SLURM_GPUBIND_HET_COMPONENTS";
inline constexpr const char* kHetFlagsEnv = "SLURM_GPUBIND_FLAGS_";
std::string het_flags_var(int component);
std::string het_explicit_var(int component);
// Every variable srun passes to a step (kExplicitEnv, kSrunFlagsEnv, and for `het_components` text
// from kHetEnv, each component's and kHetEnv itself): what a new srun and every task clear.
std::vector<std::string> passed_vars(const char* het_components);
std::string encode_explicit(const ExplicitBinding& binding);
ExplicitBinding decode_explicit(const std::string& text);
// Slurm's SLURM_CPU_BIND_TYPE as a task sees it: "none", "map_cpu:", "rank", "map_ldom:" and
// "mask_ldom:" come only from a user (srun or the SLURM_CPU_BIND it reads); Slurm's own default
// binding and --cpu-bind=cores|threads|sockets reach the task as "mask_cpu:".
bool cpu_bind_type_is_explicit(const std::string& slurm_cpu_bind_type);
// Slurm's SLURM_MEM_BIND_TYPE as a task sees it: "local", "rank", "map_mem:" and "mask_mem:" bind
// memory as the user asked ("none" and an unset type leave it alone).
bool mem_bind_type_is_explicit(const std::string& slurm_mem_bind_type);

}  // namespace gpubind::client
