// What the GPU kernel drivers publish about each GPU in sysfs and procfs: AMD compute partitions
// (amdgpu, KFD), Intel tiles (i915, xe), NVIDIA UUIDs and MIG instances (nvidia.ko). Read as
// plain files under fs_root(): no GPU runtime is loaded and no device file is opened.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpubind::discovery {

// One GPU node of the KFD topology (/sys/class/kfd/kfd/topology/nodes/<node>/properties).
struct KfdGpuNode {
  int node = 0;              // its folder's number
  unsigned domain = 0;       // PCI domain
  unsigned location_id = 0;  // PCI bus, device and function, plus the partition (see .cpp)
};

// The GPU nodes of the KFD topology (CPU nodes left out), by node number; empty when KFD is
// absent or unreadable.
std::vector<KfdGpuNode> read_kfd_gpu_nodes(const std::string& root);

// Each AMD GPU's KFD nodes in partition order, by the PCI bus id of the device that holds them
// ("0000:c1:00.0"). `amd_bus_ids`: the node's AMD GPU PCI devices.
std::map<std::string, std::vector<int>> kfd_nodes_by_device(
    const std::vector<KfdGpuNode>& nodes, const std::vector<std::string>& amd_bus_ids);

// An AMD GPU's partitioning: each compute partition is a GPU of its own to ROCm and Slurm.
struct AmdPartitioning {
  std::string compute_mode;  // current_compute_partition: "SPX", "DPX", "TPX", "QPX", "CPX"; or ""
  std::string memory_mode;   // current_memory_partition: "NPS1", "NPS2", "NPS4", "NPS8"; or ""
  int partitions = 1;        // GPUs the device exposes
  std::vector<int> kfd_nodes;  // their KFD nodes, partition order; empty when KFD was not read
  std::string warning;         // set when the count had to be inferred from the mode
};

// `kfd_nodes`: this device's entry of kfd_nodes_by_device (empty if none). `pci_device_id` gives
// the XCD count when only the compute mode is readable.
AmdPartitioning read_amd_partitioning(const std::string& root, const std::string& bus_id,
                                      unsigned pci_device_id, const std::vector<int>& kfd_nodes);

// The board's product name that amdgpu reads from its FRU EEPROM ("AMD Instinct MI250X"):
// /sys/bus/pci/devices/<bus id>/product_name, which the driver publishes on server boards
// only. Empty when there is none.
std::string read_amd_product_name(const std::string& root, const std::string& bus_id);

// An Intel GPU's tiles, from the driver's per-tile folders.
struct IntelTiles {
  int tiles = 0;         // tiles addressable as sub-devices; 0 for a one-tile device
  std::string evidence;  // where the count came from, for `gpubindctl topology`
  std::string warning;   // set when only the PCI device id gave the count
};

// i915: <device>/drm/card<N>/gt/gt<K>; xe: <device>/tile<K>. Without either, the PCI device id
// of a Data Center GPU Max (Ponte Vecchio) gives the count, with a warning.
IntelTiles read_intel_tiles(const std::string& root, const std::string& bus_id,
                            unsigned pci_device_id);
// The same from the PCI device id alone (a dump without Level Zero objects), with the warning.
IntelTiles intel_tiles_by_device_id(const std::string& bus_id, unsigned pci_device_id);
// The tile count of a Data Center GPU Max by PCI device id; 0 when the id is not one.
int ponte_vecchio_tiles(unsigned pci_device_id);

// /proc/driver/nvidia/gpus/<bus id>/information, which the driver fills without the device
// being opened.
struct NvidiaGpuInfo {
  std::string uuid;   // "GPU-8c2f…"
  std::string model;  // "NVIDIA H100 80GB HBM3"
  int minor = -1;     // /dev/nvidia<minor>
};

std::optional<NvidiaGpuInfo> read_nvidia_gpu_info(const std::string& root,
                                                  const std::string& bus_id);

// Where the driver lists the MIG instances of the GPU with device minor `minor`.
std::string nvidia_mig_folder(int minor);

// The MIG instances of the GPU with device minor `minor`, one per compute instance as NVML and
// Slurm count them: the gi<G>/ci<C> folders the driver creates under nvidia_mig_folder() for
// each that exists (nv-caps, osRmCapRegisterSmcExecutionPartition). 0 when there are none, MIG
// is off or the folder is missing. /proc/driver/nvidia-caps/mig-minors is no count: it lists
// every instance that could exist.
int count_nvidia_mig_instances(const std::string& root, int minor);

}  // namespace gpubind::discovery
