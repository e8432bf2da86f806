// srun (S_CTX_LOCAL): the user's flags checked before anything is submitted, and srun's own
// command line passed to the step (each component's flags, the user's explicit binding). Nothing
// heavy is loaded here: srun loads every SPANK plugin on every invocation.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "plugin_state.h"

namespace gpubind::spank {

using client::encode_explicit;
using client::het_explicit_var;
using client::het_flags_var;
using client::kExplicitEnv;
using client::kHetEnv;
using client::kSrunFlagsEnv;
using client::launcher_components;
using client::LauncherComponent;
using client::passed_vars;

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

// srun of a heterogeneous step: each component's flags and explicit binding, passed right after
// option parsing.
void pass_het_components() {
  forget_inherited_component_vars();
  const std::vector<std::string> args = own_arguments();
  if (args.empty()) return;
  // No command boundary is known yet: every argument of each component is read.
  const std::vector<LauncherComponent> components =
      launcher_components(std::vector<std::string>(args.begin() + 1, args.end()), 0);
  if (components.size() > 1) pass_components(components);
}

// Whether srun's own arguments give --gpu-bind-auto (before the command is known: a command
// taking such an argument itself counts too).
bool given_on_command_line() {
  const std::vector<std::string> args = own_arguments();
  if (args.empty()) return false;
  for (const LauncherComponent& component :
       launcher_components(std::vector<std::string>(args.begin() + 1, args.end()), 0)) {
    if (component.flags) return true;
  }
  return false;
}

}  // namespace

int srun_post_opt(spank_t sp) {
  // srun's own option is its step's alone. The job's, which srun replays from the environment
  // Slurm gives the job's steps, is recorded by the prolog a step starts on a node (without
  // PrologFlags=Alloc) only where srun was not given its own, which would take its place there.
  const bool own = given_on_command_line();
  mark_component_option(sp, state().user_env_option && !own ? "yes" : "step");
  pass_het_components();
  return check_flags_from_env();
}

// srun of a step of one component, once it is about to launch: pass the user's explicit
// --cpu-bind/--gpu-bind (kExplicitEnv) and its own --gpu-bind-auto (kSrunFlagsEnv) to the step,
// in srun's environment, which the step inherits. srun's options are its arguments before the
// command Slurm reports as the job's argv.
int srun_user_init(spank_t sp) {
  if (std::getenv(kHetEnv)) return 0;  // passed per component already
  int command_argc = 0;
  char** command_argv = nullptr;
  if (spank_get_item(sp, S_JOB_ARGV, &command_argc, &command_argv) != ESPANK_SUCCESS) return 0;
  const std::vector<std::string> args = own_arguments();
  if (args.empty()) return 0;
  const std::vector<LauncherComponent> components =
      launcher_components(std::vector<std::string>(args.begin() + 1, args.end()), command_argc);
  if (components.size() != 1) return 0;
  if (components[0].binding.any())
    setenv(kExplicitEnv, encode_explicit(components[0].binding).c_str(), 1);
  if (components[0].flags) setenv(kSrunFlagsEnv, components[0].flags->c_str(), 1);
  return 0;
}

}  // namespace gpubind::spank
