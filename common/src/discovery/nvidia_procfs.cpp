// The NVIDIA driver's per-GPU procfs file, "Key: \t value" lines (nv-procfs.c in
// open-gpu-kernel-modules), and its MIG capability folders (nv-caps.c, os.c).
#include "gpubind/discovery/fs_root.h"
#include "gpubind/discovery/gpu_drivers.h"
#include "gpubind/parse.h"

namespace gpubind::discovery {

std::optional<NvidiaGpuInfo> read_nvidia_gpu_info(const std::string& root,
                                                  const std::string& bus_id) {
  const auto text = read_small_file(root, "/proc/driver/nvidia/gpus/" + bus_id + "/information");
  if (!text) return std::nullopt;
  NvidiaGpuInfo info;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    const std::string line = text->substr(start, end - start);
    start = end + 1;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trimmed(line.substr(0, colon));
    const std::string value = trimmed(line.substr(colon + 1));
    if (key == "GPU UUID") {
      info.uuid = value;
    } else if (key == "Model") {
      info.model = value;
    } else if (key == "Device Minor") {
      if (const auto minor = parse_whole_number(value, 0, 1 << 20)) info.minor = int(*minor);
    }
  }
  // A UUID is what makes the file worth reading; without one it is not the format we know.
  if (info.uuid.rfind("GPU-", 0) != 0) return std::nullopt;
  return info;
}

std::string nvidia_mig_folder(int minor) {
  // osRmCapRegisterGpu names the folder after the device minor, as "information" prints it.
  return "/proc/driver/nvidia/capabilities/gpu" + std::to_string(minor) + "/mig";
}

int count_nvidia_mig_instances(const std::string& root, int minor) {
  if (minor < 0) return 0;
  const std::string mig = nvidia_mig_folder(minor);
  int instances = 0;
  // Anything but gi<G>/ci<C> folders is not the driver's layout and is left out.
  for (const std::string& gpu_instance : list_folder(root, mig)) {
    const std::string gi = mig + "/" + gpu_instance;
    if (number_after_prefix(gpu_instance, "gi") < 0 || !is_folder(root, gi)) continue;
    for (const std::string& compute_instance : list_folder(root, gi)) {
      if (number_after_prefix(compute_instance, "ci") >= 0 &&
          is_folder(root, gi + "/" + compute_instance))
        ++instances;
    }
  }
  return instances;
}

}  // namespace gpubind::discovery
