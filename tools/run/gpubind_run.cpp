// gpubind-run: binds the calling process as one of the workers a launcher started on this node
// (torchrun, mpiexec, PALS, Flux, srun), then runs the command. Every worker asks for the same
// plan of what the launcher had, over the protocol the plugin uses (the daemon's cache makes the
// repeats cheap), checks the answer as the plugin does, and applies its own entry.
#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "flux_job_reader.h"
#include "gpubind/affinity.h"
#include "gpubind/client/apply.h"
#include "gpubind/client/launch.h"
#include "gpubind/client/options.h"
#include "gpubind/client/plan_source.h"
#include "gpubind/client/plugstack.h"
#include "gpubind/client/request.h"
#include "gpubind/client/step_env.h"
#include "gpubind/client/worker.h"
#include "gpubind/launcher.h"
#include "gpubind/parse.h"
#include "gpubind/protocol/client.h"

namespace gpubind::run {
namespace {

constexpr const char* kUsage =
    "usage: gpubind-run [OPTIONS] [--] COMMAND [ARGS...]\n"
    "Binds this process as local rank r of n (from its launcher: torchrun, Open MPI, MPICH,\n"
    "PALS, Flux, Slurm) to its share of the CPUs and GPUs its launcher had, with the GPU, NIC\n"
    "and thread environment gpubind plans, then runs COMMAND.\n"
    "  --local-rank N, --local-size N  override the launcher's local rank and count\n"
    "  --flags FLAGS        the plugin's flags: verbose,dry-run,order=gpu|cpu,smt=N,\n"
    "                       no-gpu-env,no-nic-env,omp (each also as an option of its own)\n"
    "  --verbose, --dry-run, --order=gpu|cpu, --smt=N, --no-gpu-env, --no-nic-env, --omp\n"
    "  --topology FILE      plan here from an hwloc XML dump, without the daemon\n"
    "  --policy FILE        the policy to plan with here (default: the site's)\n"
    "  --socket PATH        the daemon's socket (default: plugstack.conf's, else " /**/
    "/run/gpubind/gpubind.sock)\n"
    "  --plugstack FILE     where the site's plugin arguments are (default: Slurm's "
    "plugstack.conf)\n"
    "  -h, --help, --version\n"
    "Exit status: COMMAND's; 2 for a usage error, 1 when binding fails and the site says\n"
    "on_error=fail, 126/127 when COMMAND cannot run.\n";

struct Options {
  std::optional<int> local_rank, local_size;
  std::vector<std::string> flag_words;
  std::optional<std::string> topology, policy, socket, plugstack;
  std::vector<std::string> command;
  std::string self;  // argv[0], as the launcher ran this program
};

std::optional<std::string> env_of(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value ? std::optional<std::string>(value) : std::nullopt;
}

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "gpubind-run: %s\n(gpubind-run --help for usage)\n", message.c_str());
  std::exit(2);
}

int count_option(const std::string& name, const std::string& text) {
  const auto value = parse_whole_number(text, 0, 4096);
  if (!value) usage_error(name + " '" + text + "': expected a number from 0 to 4096");
  return static_cast<int>(*value);
}

// Options end at the first word that is not one (or after "--"): COMMAND's own options stay its.
Options parse_options(int argc, char** argv) {
  Options o;
  o.self = argc > 0 ? argv[0] : "";
  const std::vector<std::string> value_options = {"--local-rank", "--local-size", "--flags",
                                                  "--topology",   "--policy",     "--socket",
                                                  "--plugstack",  "--order",      "--smt"};
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.rfind("-", 0) != 0) break;
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg == "--version") {
      std::printf("gpubind-run %s\n", GPUBIND_VERSION);
      std::exit(0);
    }
    std::string value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const bool takes_value =
        std::find(value_options.begin(), value_options.end(), arg) != value_options.end();
    if (takes_value && !has_value) {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      value = argv[++i];
    } else if (!takes_value && has_value) {
      usage_error(arg + " takes no value");
    }
    if (arg == "--local-rank") {
      o.local_rank = count_option(arg, value);
    } else if (arg == "--local-size") {
      o.local_size = count_option(arg, value);
    } else if (arg == "--flags") {
      o.flag_words.push_back(value);
    } else if (arg == "--order" || arg == "--smt") {
      o.flag_words.push_back(arg.substr(2) + "=" + value);
    } else if (arg == "--verbose" || arg == "--dry-run" || arg == "--no-gpu-env" ||
               arg == "--no-nic-env" || arg == "--omp") {
      o.flag_words.push_back(arg.substr(2));
    } else if (arg == "--topology") {
      o.topology = value;
    } else if (arg == "--policy") {
      o.policy = value;
    } else if (arg == "--socket") {
      o.socket = value;
    } else if (arg == "--plugstack") {
      o.plugstack = value;
    } else {
      usage_error("unknown option " + arg);
    }
  }
  for (; i < argc; ++i)
    o.command.emplace_back(argv[i]);
  if (o.command.empty()) usage_error("no COMMAND to run");
  return o;
}

client::UserFlags parse_flags(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words)
    text += (text.empty() ? "" : ",") + word;
  auto flags = client::parse_user_flags(text);
  if (!flags) usage_error(flags.error().message);
  if (flags->help) {
    std::fputs(client::user_flags_help(), stdout);
    std::exit(0);
  }
  return *flags;
}

struct Site {
  client::SiteArgs args;
  std::string plugin;  // spank_gpubind.so as plugstack.conf names it; "" without such a line
};

Site site_of(const Options& o) {
  auto line = client::gpubind_plugstack_line(o.plugstack, env_of("SLURM_CONF"));
  if (!line) usage_error("plugstack.conf: " + line.error().message);
  auto site = client::parse_site_args(line->gpubind_args.value_or(std::vector<std::string>{}));
  if (!site) usage_error("plugstack.conf: spank_gpubind.so: " + site.error().message);
  if (o.socket) site->socket = *o.socket;
  if (o.policy) site->policy = *o.policy;
  return {*site, line->plugin};
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

// libgpubind_stepd.so: the site's stepd_lib=, else beside the plugin plugstack.conf loads, else
// where the package installs it, else the build tree's.
std::string stepd_lib_path(const Site& site) {
  constexpr const char* kName = "libgpubind_stepd.so";
  if (!site.args.stepd_lib.empty()) return site.args.stepd_lib;
  std::vector<std::string> candidates;
  if (site.plugin.find('/') != std::string::npos)
    candidates.push_back(folder_of(site.plugin) + kName);
  char self[4096] = "";
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  const std::string bin = n > 0 ? folder_of(std::string(self, static_cast<size_t>(n))) : "";
  if (!bin.empty()) {
    candidates.push_back(bin + GPUBIND_STEPD_LIB_FROM_BIN);
    candidates.push_back(bin + "../lib/" + kName);
  }
  for (const std::string& path : candidates)
    if (access(path.c_str(), R_OK) == 0) return path;
  return candidates.empty() ? kName : candidates.front();
}

// With --topology, here on that dump (no daemon asked); else as the plugin plans a step
// (plan_source.h). Whatever went wrong with the daemon is in the plan's first warning or the
// error, both said on stderr: there is no other log to report it to.
Result<client::StepPlan> plan_step(const client::StepRequest& request, const Options& o,
                                   const Site& site) {
  const client::InProcess here{stepd_lib_path(site), o.topology.value_or("")};
  if (!o.topology) {
    auto planned = client::plan_step(request, site.args, here, [](const std::string&) {});
    if (!planned) return planned.error();
    // Left where this process may write: root's or the daemon user's gpubind-run can; a user's
    // cannot (the spool is not theirs), and the plan's first warning says why it fell back.
    if (planned->fallback) client::leave_fallback_report(*planned->fallback);
    return std::move(planned->plan);
  }
  auto encoded = protocol::encode_request(request);
  if (!encoded) return encoded.error();
  auto plan = client::plan_in_process(request, *encoded, site.args, here);
  if (plan) plan->source = "here, " + *o.topology;
  return plan;
}

[[noreturn]] void run_command(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const std::string& word : command)
    argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  const int error = errno;
  std::fprintf(stderr, "gpubind-run: cannot run '%s': %s\n", argv[0], std::strerror(error));
  std::exit(error == ENOENT ? 127 : 126);
}

// Once per node (local rank 0), as the plugin says an explicit --cpu-bind was kept.
void say_launcher_binding(const client::LauncherBinding& binding, bool kept) {
  if (kept) {
    std::fprintf(stderr,
                 "gpubind-run: %s %s given: workers keep %s's CPU binding; gpubind sets their "
                 "GPU and NIC variables\n",
                 binding.launcher.c_str(), binding.option.c_str(), binding.launcher.c_str());
  } else {
    std::fprintf(stderr,
                 "gpubind-run: %s %s given, but the site sets override_explicit=yes: gpubind's "
                 "binding replaces %s's\n",
                 binding.launcher.c_str(), binding.option.c_str(), binding.launcher.c_str());
  }
}

// The plugin's binding of this task, restored where its CPUs were widened after the plugin set
// them (runc 1.2 and later reset a container's CPU affinity to its cgroup's CPUs): the recorded
// CPUs, and the memory preference on the recorded NUMA node. Said always: the user's container
// runtime changed the binding.
void restore_recorded_binding(const LocalRank& place, bool verbose) {
  const CpuSet current = current_affinity();
  const std::optional<CpuSet> lost = client::recorded_cpus_lost(env_of, current);
  if (!lost) return;
  const Status set = set_affinity(*lost);
  std::string memory;
  if (const auto numa = env_of("GPUBIND_NUMA")) {
    if (const auto node = parse_whole_number(*numa, 0, 1 << 16); node && set)
      memory = prefer_numa_node(static_cast<int>(*node)) ? ", memory on NUMA " + *numa : "";
  }
  if (!set) {
    std::fprintf(stderr,
                 "gpubind-run: local rank %d: CPUs %s (gpubind's) were widened to %s and "
                 "cannot be restored: %s\n",
                 place.rank, lost->to_list().c_str(), current.to_list().c_str(),
                 set.error().message.c_str());
    return;
  }
  if (verbose || place.rank == 0)
    std::fprintf(stderr,
                 "gpubind-run: local rank %d: CPUs %s restored%s (something between the plugin "
                 "and here, such as a container runtime, had widened them to %s)\n",
                 place.rank, lost->to_list().c_str(), memory.c_str(), current.to_list().c_str());
}

std::string host_name() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return host;
}

// Binds this process and runs the command; `on_error` is the site's once known (main() needs it
// should anything throw).
int run(const Options& o, client::OnError& site_on_error) {
  const client::UserFlags flags = parse_flags(o.flag_words);
  if (flags.off) run_command(o.command);
  auto place = local_rank_from_env(env_of, o.local_rank, o.local_size);
  if (!place) usage_error(place.error().message);
  const Site site = site_of(o);
  const client::OnError on_error = site_on_error = site.args.on_error;

  // A task the plugin bound as this very rank has its binding already, unless a container
  // runtime between the plugin and here reset its CPUs: then the recorded binding is restored.
  if (client::already_bound_by_plugin(env_of, *place)) {
    restore_recorded_binding(*place, flags.verbose);
    if (flags.verbose)
      std::fprintf(stderr,
                   "gpubind-run: local rank %d of %d (%s) is bound by gpubind's plugin "
                   "already: running as it is\n",
                   place->rank, place->size, place->source.c_str());
    run_command(o.command);
  }

  const client::LauncherCpus cpus = client::launcher_cpus();
  const std::optional<client::LauncherBinding> launcher_binding =
      client::launcher_binding(*place, o.self);
  client::BuiltRequest built = client::launcher_step_request(
      *place, cpus.cpus, env_of, flags, o.command.front(), read_flux_job(env_of));
  // The launcher binds each worker's CPUs as it starts it (torchrun --numa-binding): the plan
  // sets nothing derived from CPUs, unless the site forces gpubind's binding.
  built.request.cpus_bound_at_launch = launcher_binding && !site.args.override_explicit;
  const client::StepRequest& request = built.request;
  if (flags.verbose) {
    std::fprintf(stderr, "gpubind-run: local rank %d of %d from %s; CPUs %s (%s); GPUs: %s\n",
                 place->rank, place->size, place->source.c_str(), request.allowed_cpus.c_str(),
                 cpus.how.c_str(), built.gpu_source.c_str());
  }
  if (!built.warning.empty() && place->rank == 0)
    std::fprintf(stderr, "gpubind-run: warning: %s\n", built.warning.c_str());

  auto plan = plan_step(request, o, site);
  if (!plan) {
    if (on_error == client::OnError::kFail) {
      std::fprintf(stderr, "gpubind-run: cannot bind local rank %d: %s\n", place->rank,
                   plan.error().message.c_str());
      return 1;
    }
    if (place->rank == 0)
      std::fprintf(stderr, "gpubind-run: %s; running unbound\n", plan.error().message.c_str());
    run_command(o.command);
  }
  if (place->rank == 0) {
    for (const std::string& warning : plan->warnings)
      std::fprintf(stderr, "gpubind-run: warning: %s\n", warning.c_str());
  }
  // The launcher's binding the user asked for stays, unless the site forces gpubind's: its CPUs
  // are known only here, at launch.
  const bool launcher_cpus_kept = launcher_binding && !site.args.override_explicit;
  client::StepFacts facts;
  if (launcher_cpus_kept) {
    facts.user.cpu = launcher_binding->option;
    facts.slurm_cpus = facts.slurm_memory = true;
  }
  if (launcher_binding && place->rank == 0)
    say_launcher_binding(*launcher_binding, launcher_cpus_kept);
  const client::LaunchDecision decision = client::decide_launch(
      *plan, facts, {}, env_of, {place->rank, place->size, current_affinity()}, flags.no_gpu_env);
  if (!decision.apply) {
    std::fprintf(stderr, "gpubind-run: local rank %d: %s\n", place->rank, decision.why.c_str());
    if (on_error == client::OnError::kFail) return 1;
    run_command(o.command);
  }
  client::TaskBinding task = plan->tasks[decision.planned];
  // The CPUs this worker has are the launcher's; no thread count of gpubind's for them.
  if (decision.cpus_bound_at_launch)
    task = client::with_launch_cpus(task, current_affinity().to_list());
  if (flags.verbose || flags.dry_run) {
    const unsigned rank = place->world_rank >= 0 ? place->world_rank : place->rank;
    std::string notes;
    if (launcher_binding)
      notes = launcher_cpus_kept ? " (CPUs bound by " + launcher_binding->launcher + ")"
                                 : " (replaces " + launcher_binding->launcher + "'s CPU binding)";
    std::fprintf(stderr, "%s%s%s\n",
                 client::describe_binding(host_name(), rank, task, plan->source).c_str(),
                 notes.c_str(), flags.dry_run ? " (dry run: not applied)" : "");
  }
  if (!flags.dry_run) {
    client::ProcessEnvironment own_env;
    client::ApplyOptions how = decision.options;
    how.clear_stale = true;
    auto applied = client::apply_binding(task, own_env, how);
    if (applied && !applied->memory_refused.empty()) {
      std::fprintf(stderr,
                   "gpubind-run: local rank %d: %s; memory stays where the kernel puts it\n",
                   place->rank, applied->memory_refused.c_str());
    }
    if (!applied) {
      if (on_error == client::OnError::kFail) {
        std::fprintf(stderr, "gpubind-run: cannot bind local rank %d: %s\n", place->rank,
                     applied.error().message.c_str());
        return 1;
      }
      std::fprintf(stderr, "gpubind-run: local rank %d: %s; running unbound\n", place->rank,
                   applied.error().message.c_str());
    }
  }
  run_command(o.command);
}

}  // namespace
}  // namespace gpubind::run

int main(int argc, char** argv) {
  using namespace gpubind;
  // A launcher's workers share one stderr: each message leaves in one write, whole, where an
  // unbuffered stderr may be written in pieces (glibc's are 128 bytes) that interleave.
  std::setvbuf(stderr, nullptr, _IOLBF, 1 << 14);
  const run::Options options = run::parse_options(argc, argv);
  client::OnError on_error = client::OnError::kFallback;
  std::string why = "internal error";
  try {
    return run::run(options, on_error);
  } catch (const std::exception& e) {
    why += std::string(": ") + e.what();
  } catch (...) {
  }
  // As for any other binding failure: the command runs unbound unless the site says fail.
  std::fprintf(stderr, "gpubind-run: %s%s\n", why.c_str(),
               on_error == client::OnError::kFail ? "" : "; running unbound");
  if (on_error == client::OnError::kFail) return 1;
  run::run_command(options.command);
}
