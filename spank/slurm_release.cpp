// Slurm refuses a plugin built for another major release ("Incompatible plugin version") without
// saying which releases are involved. This constructor runs when Slurm opens the plugin, before
// that check, and when the running Slurm is not the one the plugin was built for it says so,
// naming both releases and what to do. It changes nothing: Slurm still refuses the plugin.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "plugin_state.h"

extern "C" {
#include <slurm/slurm_version.h>
}
#include <dlfcn.h>

#ifndef GPUBIND_SLURM_API
#define GPUBIND_SLURM_API 0
#endif

namespace gpubind::spank {
namespace {

constexpr long kBuiltApi = GPUBIND_SLURM_API;
constexpr unsigned kBuiltMajor = SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER);
constexpr unsigned kBuiltMinor = SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER);

using ApiVersionFn = long (*)();
using PrintVersionFn = void (*)();

// The running Slurm's API number (libslurm's soname), from the program that loads the plugin.
long running_api() {
  auto fn = reinterpret_cast<ApiVersionFn>(dlsym(RTLD_DEFAULT, "slurm_api_version"));
  return fn ? (fn() >> 16) & 0xff : 0;
}

// The running Slurm's version ("24.11.5"): Slurm exports no version string, only
// print_slurm_version(), which writes "slurm 24.11.5" to stdout; its output is read through a
// pipe. Only called on a mismatch, when Slurm is about to refuse the plugin.
std::string running_version() {
  auto print = reinterpret_cast<PrintVersionFn>(dlsym(RTLD_DEFAULT, "print_slurm_version"));
  if (!print) return {};
  // Close-on-exec: a child forked meanwhile must not hold the pipe open.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {};
  std::fflush(stdout);
  const int saved = dup(STDOUT_FILENO);
  std::string text;
  if (saved >= 0 && dup2(fds[1], STDOUT_FILENO) >= 0) {
    print();
    std::fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(fds[1]);
    char buffer[128];
    ssize_t n;
    while ((n = read(fds[0], buffer, sizeof buffer)) > 0)
      text.append(buffer, static_cast<size_t>(n));
  } else {
    close(fds[1]);
  }
  if (saved >= 0) close(saved);
  close(fds[0]);
  const auto space = text.find(' ');
  if (space == std::string::npos) return {};
  text = text.substr(space + 1);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  return text;
}

__attribute__((constructor)) void report_release_mismatch() {
  if (kBuiltApi == 0) return;
  const long api = running_api();
  if (api == 0 || api == kBuiltApi) return;
  const std::string version = running_version();
  // "24.11.5" -> "24.11", the release a plugin must match.
  const std::string release = version.substr(0, version.rfind('.'));
  const std::string running =
      version.empty() ? "the Slurm of libslurm API " + std::to_string(api) : "Slurm " + version;
  const std::string wanted = version.empty() ? "this Slurm" : "Slurm " + release;
  slurm_error(
      "gpubind: spank_gpubind.so was built for Slurm %u.%02u (libslurm API %ld) but runs in %s "
      "(API %ld), which will refuse it. Install gpubind built for %s: build it against this "
      "Slurm's headers (cmake -DSLURM_ROOT=PREFIX; gpubind's docs/admin.md)",
      kBuiltMajor, kBuiltMinor, kBuiltApi, running.c_str(), api, wanted.c_str());
}

}  // namespace
}  // namespace gpubind::spank
