// The NVIDIA driver's per-GPU procfs file, "Key: \t value" lines (nv-procfs.c in
// open-gpu-kernel-modules).
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

}  // namespace gpubind::discovery
