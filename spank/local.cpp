// srun, sbatch and salloc: check the user's flags before anything is submitted. Nothing heavy is
// loaded here: these commands load every SPANK plugin on every invocation.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "plugin_state.h"

namespace gpubind::spank {

int local_post_opt(spank_t) {
  local_components(spank_context());
  const PluginState& s = state();
  if (s.option_given) return 0;  // checked by the option callback
  const char* from_env = std::getenv(kUserEnv);
  if (!from_env) return 0;
  auto flags = parse_user_flags(from_env);
  if (!flags) {
    slurm_error("gpubind: %s=%s: %s", kUserEnv, from_env, flags.error().message.c_str());
    return -1;
  }
  if (flags->help) {
    std::fputs(user_flags_help(), stderr);
    std::exit(0);
  }
  return 0;
}

namespace {

// This process's own arguments (srun's), from the kernel's copy.
std::vector<std::string> own_arguments() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  while (start < all.size()) {
    const size_t end = std::min(all.find('\0', start), all.size());
    args.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

// What an outer step (or an earlier srun of a batch script) left must not speak for this srun.
void forget_inherited_component_vars() {
  for (const std::string& name : passed_vars(std::getenv(kHetEnv)))
    unsetenv(name.c_str());
}

// srun of a heterogeneous step: each component's own --gpu-bind-auto flags and explicit binding
// (Slurm hands every component the same option value). Done right after option parsing: srun
// copies the first component's environment before local_user_init runs.
void pass_components(const std::vector<LauncherComponent>& components) {
  setenv(kHetEnv, std::to_string(components.size()).c_str(), 1);
  for (size_t k = 0; k < components.size(); ++k) {
    if (components[k].flags)
      setenv(het_flags_var(static_cast<int>(k)).c_str(), components[k].flags->c_str(), 1);
    if (components[k].binding.any())
      setenv(het_explicit_var(static_cast<int>(k)).c_str(),
             encode_explicit(components[k].binding).c_str(), 1);
  }
}

}  // namespace

void local_components(spank_context_t context) {
  if (context != S_CTX_LOCAL) return;
  forget_inherited_component_vars();
  const std::vector<std::string> args = own_arguments();
  if (args.empty()) return;
  // No command boundary is known yet: every argument of each component is read.
  const std::vector<LauncherComponent> components =
      launcher_components(std::vector<std::string>(args.begin() + 1, args.end()), 0);
  if (components.size() > 1) pass_components(components);
}

// srun of a step of one component, once it is about to launch: pass the user's explicit
// --cpu-bind/--gpu-bind to the step (kExplicitEnv in srun's environment, which the step
// inherits). srun's options are its arguments before the command Slurm reports as the job's argv.
int local_user_init(spank_t sp) {
  if (std::getenv(kHetEnv)) return 0;  // passed per component already
  int command_argc = 0;
  char** command_argv = nullptr;
  if (spank_get_item(sp, S_JOB_ARGV, &command_argc, &command_argv) != ESPANK_SUCCESS) return 0;
  const std::vector<std::string> args = own_arguments();
  if (args.empty()) return 0;
  const std::vector<LauncherComponent> components =
      launcher_components(std::vector<std::string>(args.begin() + 1, args.end()), command_argc);
  if (components.size() == 1 && components[0].binding.any())
    setenv(kExplicitEnv, encode_explicit(components[0].binding).c_str(), 1);
  return 0;
}

}  // namespace gpubind::spank
