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

}  // namespace

// srun, once the step is about to launch: pass the user's explicit --cpu-bind/--gpu-bind to the
// step (kExplicitEnv in srun's environment, which the step inherits). srun's options are its
// arguments before the command Slurm reports as the job's argv.
int local_user_init(spank_t sp) {
  int command_argc = 0;
  char** command_argv = nullptr;
  if (spank_get_item(sp, S_JOB_ARGV, &command_argc, &command_argv) != ESPANK_SUCCESS) return 0;
  std::vector<std::string> args = own_arguments();
  if (args.empty() || static_cast<int>(args.size()) - 1 < command_argc) return 0;
  const std::vector<std::string> options(args.begin() + 1, args.end() - command_argc);
  const ExplicitBinding given = explicit_binding(options);
  // An outer step's value must not speak for this srun.
  if (given.any())
    setenv(kExplicitEnv, encode_explicit(given).c_str(), 1);
  else
    unsetenv(kExplicitEnv);
  return 0;
}

}  // namespace gpubind::spank
