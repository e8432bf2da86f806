// Which GPUs the vendor's driver really shows this process, for the real-GPU end-to-end test:
// one line of JSON with the task's rank, what gpubind said it gave the task (GPUBIND_GPU_PCI,
// GPUBIND_CPUS), the CPUs the kernel lets it run on and the PCI bus id of every device the
// driver's own API enumerates under the task's visibility variables. The driver is opened with
// dlopen (libcuda.so.1, else ROCm's libamdhip64.so), so the probe builds without any GPU SDK.
// Exit 0 with "runtime":"none" where no driver loads; exit 1 where a driver loads but fails.
#include <dlfcn.h>
#include <sched.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct DriverView {
  std::string runtime = "none";
  std::vector<std::string> bus_ids;
  std::string error;
};

std::string lowercase(std::string text) {
  for (char& c : text)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// CUDA driver API: cuInit, cuDeviceGetCount, cuDeviceGet, cuDeviceGetPCIBusId (all return 0 on
// success). Declared here by their documented C signatures.
bool probe_cuda(DriverView& view) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using BusIdFn = int (*)(char*, int, int);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
  auto bus_id = reinterpret_cast<BusIdFn>(dlsym(lib, "cuDeviceGetPCIBusId"));
  view.runtime = "cuda";
  if (!init || !count || !get || !bus_id) {
    view.error = "libcuda.so.1 lacks the driver API";
    return true;
  }
  // No device visible makes cuInit fail with CUDA_ERROR_NO_DEVICE (100): zero devices, not an
  // error.
  if (int rc = init(0); rc != 0) {
    if (rc != 100) view.error = "cuInit returned " + std::to_string(rc);
    return true;
  }
  int devices = 0;
  if (count(&devices) != 0) view.error = "cuDeviceGetCount failed";
  for (int ordinal = 0; ordinal < devices; ++ordinal) {
    int device = 0;
    char text[64] = {};
    if (get(&device, ordinal) != 0 || bus_id(text, sizeof text, device) != 0) {
      view.error = "no bus id for CUDA device " + std::to_string(ordinal);
      break;
    }
    view.bus_ids.push_back(lowercase(text));
  }
  return true;
}

// HIP runtime: hipGetDeviceCount, hipDeviceGetPCIBusId (0 is hipSuccess).
bool probe_hip(DriverView& view) {
  void* lib = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  using CountFn = int (*)(int*);
  using BusIdFn = int (*)(char*, int, int);
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "hipGetDeviceCount"));
  auto bus_id = reinterpret_cast<BusIdFn>(dlsym(lib, "hipDeviceGetPCIBusId"));
  view.runtime = "hip";
  if (!count || !bus_id) {
    view.error = "libamdhip64 lacks hipGetDeviceCount/hipDeviceGetPCIBusId";
    return true;
  }
  int devices = 0;
  if (count(&devices) != 0) devices = 0;  // hipErrorNoDevice: nothing visible
  for (int device = 0; device < devices; ++device) {
    char text[64] = {};
    if (bus_id(text, sizeof text, device) != 0) {
      view.error = "no bus id for HIP device " + std::to_string(device);
      break;
    }
    view.bus_ids.push_back(lowercase(text));
  }
  return true;
}

std::string affinity_list() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  std::string list;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set))
      ++last;
    if (!list.empty()) list += ',';
    list += std::to_string(cpu);
    if (last > cpu) list += '-' + std::to_string(last);
    cpu = last;
  }
  return list;
}

// Values here are bus ids, CPU lists, ranks and short messages: no character needs escaping
// except a quote or backslash, which are dropped.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text)
    if (c != '"' && c != '\\') out += c;
  return out + '"';
}

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

int main() {
  DriverView view;
  if (!probe_cuda(view)) probe_hip(view);
  std::string ids;
  for (const std::string& id : view.bus_ids)
    ids += (ids.empty() ? "" : ",") + quoted(id);
  std::printf(
      "{\"rank\":%s,\"runtime\":%s,\"driver_sees\":[%s],\"GPUBIND_GPU_PCI\":%s,\"GPUBIND_CPUS\":%s,"
      "\"affinity\":%s,\"error\":%s}\n",
      quoted(env_or_empty("SLURM_PROCID")).c_str(), quoted(view.runtime).c_str(), ids.c_str(),
      quoted(env_or_empty("GPUBIND_GPU_PCI")).c_str(), quoted(env_or_empty("GPUBIND_CPUS")).c_str(),
      quoted(affinity_list()).c_str(), quoted(view.error).c_str());
  return view.error.empty() ? 0 : 1;
}
