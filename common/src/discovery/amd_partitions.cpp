// AMD compute partitions (MI300: SPX, DPX, TPX, QPX, CPX) from amdgpu's sysfs and the KFD
// topology. ROCm, and Slurm through it, count each partition as a GPU: KFD lists one node per
// partition, carrying its device's PCI location (kfd_topology.c, kfd_topology_add_device).
#include <algorithm>
#include <cstdio>
#include <tuple>

#include "gpubind/discovery/fs_root.h"
#include "gpubind/discovery/gpu_drivers.h"
#include "gpubind/parse.h"

namespace gpubind::discovery {
namespace {

constexpr const char* kKfdNodes = "/sys/class/kfd/kfd/topology/nodes";

// The value of "name value" in a KFD properties file.
std::optional<unsigned long long> property(const std::string& text, const std::string& name) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
        line[name.size()] == ' ') {
      const auto value =
          parse_whole_number(trimmed(line.substr(name.size() + 1)), 0, 0x7fffffffffffffffLL);
      if (value) return static_cast<unsigned long long>(*value);
    }
  }
  return std::nullopt;
}

// The partition's node id: location_id bits 31-28 since the kernel says so ("On multi-partition
// nodes, node id = location_id[31:28]"); kernels before that ORed it into the device and function
// bits, so there it is the distance from the device's own PCI location.
constexpr unsigned kPartitionShift = 28;

unsigned pci_location(unsigned location_id) {
  return location_id & 0xffffu;
}

struct BusId {
  unsigned domain = 0, bus = 0, devfn = 0;
};

std::optional<BusId> parse_bus_id(const std::string& text) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) != 4 ||
      bus > 0xff || dev > 0x1f || fn > 7)
    return std::nullopt;
  return BusId{domain, bus, (dev << 3) | fn};
}

}  // namespace

std::vector<KfdGpuNode> read_kfd_gpu_nodes(const std::string& root) {
  std::vector<KfdGpuNode> nodes;
  for (const std::string& name : list_folder(root, kKfdNodes)) {
    const auto number = parse_whole_number(name, 0, 1 << 16);
    if (!number) continue;
    const auto text = read_small_file(root, std::string(kKfdNodes) + "/" + name + "/properties");
    if (!text) continue;
    const auto simds = property(*text, "simd_count");
    const auto location = property(*text, "location_id");
    if (!simds || *simds == 0 || !location) continue;  // a CPU node
    KfdGpuNode node;
    node.node = static_cast<int>(*number);
    node.domain = static_cast<unsigned>(property(*text, "domain").value_or(0));
    node.location_id = static_cast<unsigned>(*location);
    nodes.push_back(node);
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const KfdGpuNode& a, const KfdGpuNode& b) { return a.node < b.node; });
  return nodes;
}

std::map<std::string, std::vector<int>> kfd_nodes_by_device(
    const std::vector<KfdGpuNode>& nodes, const std::vector<std::string>& amd_bus_ids) {
  struct Claim {
    unsigned partition;
    int node;
  };
  std::map<std::string, std::vector<Claim>> claims;
  for (const KfdGpuNode& node : nodes) {
    const unsigned location = pci_location(node.location_id);
    const unsigned high_id = node.location_id >> kPartitionShift;
    // The device is the AMD GPU on the node's domain and bus whose PCI location is the largest
    // not above the node's: equal under the new encoding, below it under the old one.
    const std::string* owner = nullptr;
    unsigned owner_devfn = 0;
    for (const std::string& bus_id : amd_bus_ids) {
      const auto id = parse_bus_id(bus_id);
      if (!id || id->domain != node.domain || id->bus != (location >> 8)) continue;
      if (id->devfn > (location & 0xff) || (owner && id->devfn < owner_devfn)) continue;
      owner = &bus_id;
      owner_devfn = id->devfn;
    }
    if (!owner) continue;
    const unsigned partition = high_id != 0 ? high_id : (location & 0xff) - owner_devfn;
    claims[*owner].push_back({partition, node.node});
  }
  std::map<std::string, std::vector<int>> by_device;
  for (auto& [bus_id, list] : claims) {
    std::sort(list.begin(), list.end(), [](const Claim& a, const Claim& b) {
      return std::tie(a.partition, a.node) < std::tie(b.partition, b.node);
    });
    for (const Claim& claim : list)
      by_device[bus_id].push_back(claim.node);
  }
  return by_device;
}

namespace {

// XCDs (accelerator complex dies) per device: CPX gives each its own partition.
int xcd_count(unsigned pci_device_id) {
  switch (pci_device_id) {
    case 0x74a0:  // MI300A
      return 6;
    case 0x74a1:  // MI300X
    case 0x74a5:  // MI325X
    case 0x74a9:  // MI300X HF
    case 0x74b5:  // MI300X virtual function
    case 0x74b9:  // MI325X virtual function
      return 8;
    default:
      return 0;
  }
}

int partitions_of_mode(const std::string& mode, unsigned pci_device_id) {
  if (mode == "SPX") return 1;
  if (mode == "DPX") return 2;
  if (mode == "TPX") return 3;
  if (mode == "QPX") return 4;
  if (mode == "CPX") return xcd_count(pci_device_id);
  return 0;
}

}  // namespace

AmdPartitioning read_amd_partitioning(const std::string& root, const std::string& bus_id,
                                      unsigned pci_device_id, const std::vector<int>& kfd_nodes) {
  AmdPartitioning result;
  const std::string device = "/sys/bus/pci/devices/" + bus_id;
  result.compute_mode =
      trimmed(read_small_file(root, device + "/current_compute_partition").value_or(""));
  result.memory_mode =
      trimmed(read_small_file(root, device + "/current_memory_partition").value_or(""));
  if (!kfd_nodes.empty()) {
    result.kfd_nodes = kfd_nodes;
    result.partitions = static_cast<int>(kfd_nodes.size());
    return result;
  }
  if (result.compute_mode.empty() || result.compute_mode == "SPX") return result;
  const int inferred = partitions_of_mode(result.compute_mode, pci_device_id);
  if (inferred > 0) {
    result.partitions = inferred;
    result.warning = "AMD GPU " + bus_id + ": the KFD topology is unreadable, so its " +
                     std::to_string(inferred) + " " + result.compute_mode +
                     " partitions come from its compute partition mode";
  } else {
    result.warning = "AMD GPU " + bus_id + " is in compute partition mode " + result.compute_mode +
                     " but neither the KFD topology nor its device id tells how many "
                     "partitions it has: it is planned as one GPU";
  }
  return result;
}

std::string read_amd_product_name(const std::string& root, const std::string& bus_id) {
  return trimmed(
      read_small_file(root, "/sys/bus/pci/devices/" + bus_id + "/product_name").value_or(""));
}

}  // namespace gpubind::discovery
