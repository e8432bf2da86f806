// The topology loader on arbitrary (mostly mutated) hwloc XML: load or refuse, never crash, and
// whatever loads plans. hwloc 2.9's own XML import crashes on some malformed files (found by
// this target); such inputs are first tried in a child process and skipped, so the fuzzer keeps
// exercising gpubind's code on top of hwloc. Topology files are trusted admin input
// (docs/daemon.md).
#include <errno.h>
#include <hwloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "gpubind/planner.h"
#include "gpubind/topology_hwloc.h"

namespace {

// Whether hwloc's own import of `path` ends normally, tried in a child process. An input that
// cannot be tried (fork or wait failing on a loaded machine) counts as not surviving: the
// parent must never import a file the child did not get through.
bool hwloc_survives(const std::string& path) {
  const pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) {
    // A plain crash, without the sanitizer's report: this is hwloc's, not ours.
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    signal(SIGABRT, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    alarm(20);  // a child hung inside hwloc ends, whatever becomes of the parent
    hwloc_topology_t topo;
    hwloc_topology_init(&topo);
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (hwloc_topology_set_xml(topo, path.c_str()) == 0) hwloc_topology_load(topo);
    _exit(0);
  }
  int status = 0;
  pid_t waited;
  while ((waited = waitpid(child, &status, 0)) < 0 && errno == EINTR) {
  }
  return waited == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The file each input is written to (hwloc imports files), removed when the fuzzer exits.
struct ScratchFile {
  std::string path = "/tmp/gpubind-fuzz-" + std::to_string(getpid()) + ".xml";
  ~ScratchFile() { std::remove(path.c_str()); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ScratchFile scratch;
  const std::string& path = scratch.path;
  FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  if (!hwloc_survives(path)) return 0;
  auto topology = gpubind::load_topology_xml(path, gpubind::SitePolicy::default_nic_patterns());
  if (topology) {
    gpubind::PlanRequest request;
    request.ntasks = 1 + static_cast<int>(topology->gpus.size());
    (void)gpubind::make_plan(*topology, gpubind::SitePolicy(), request);
  }
  return 0;
}
