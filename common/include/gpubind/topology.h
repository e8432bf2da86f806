// The node as the planner sees it: cores with their L3/NUMA/package, GPUs and NICs with their
// CPU-side locality. Plain data, filled by the hwloc loader (topology_hwloc.h) or by tests.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gpubind/cpuset.h"

namespace gpubind {

enum class Vendor { kUnknown, kNvidia, kAmd, kIntel };
inline constexpr size_t kVendorCount = 4;  // the values of Vendor
const char* vendor_name(Vendor vendor);    // "nvidia", "amd", "intel", "unknown"

// EFA: AWS Elastic Fabric Adapter, driven through libfabric (no netdev, not for UCX).
enum class NicKind { kSlingshot, kInfiniband, kEthernet, kEfa };
const char* nic_kind_name(NicKind kind);  // "slingshot", "infiniband", "ethernet", "efa"

// The smallest CPU-side domain that contains a device: its L3 on most AMD nodes, its NUMA node on
// Intel nodes with sub-NUMA clustering (one L3 spans several NUMA nodes). kUnknown: the device is
// local to every CPU of a machine of several L3s or NUMA nodes, which says the firmware (or a
// hypervisor) reported no locality for it, not that it is near everything.
enum class LocalityKind { kL3, kNuma, kPackage, kMachine, kUnknown };
// "L3", "NUMA", "package", "machine", "unknown"
const char* locality_kind_name(LocalityKind kind);

struct Locality {
  LocalityKind kind = LocalityKind::kMachine;
  CpuSet cpus;             // every PU of the domain
  int l3_index = -1;       // L3 index when the domain lies within one L3, else -1
  int numa_index = -1;     // NUMA index when the domain lies within one NUMA node, else -1
  int package_index = -1;  // package index when the domain lies within one package, else -1
  // The PCI bridges above the device, root port first (hwloc gp indices; host bridges left out).
  // Two devices whose paths share a prefix sit behind the same port or switch.
  std::vector<int> pci_path;
  // Why the device has this locality, for `gpubindctl topology`: "PCI local CPUs", or the
  // nearest NUMA node with CPUs when the device hangs below CPU-less ones.
  std::string basis;
};

// The index of the locality's own domain (its L3, NUMA node or package); 0 for the machine.
int locality_index(const Locality& locality);
// "L3 6", "NUMA 1", "package 0", "machine", "unknown".
std::string describe_locality(const Locality& locality);
inline bool locality_known(const Locality& locality) {
  return locality.kind != LocalityKind::kUnknown;
}

struct Core {
  int index = 0;         // logical index, in topology order
  std::vector<int> pus;  // OS indices of its hardware threads, first thread first
  int l3_index = -1;     // L3 index, or -1 if the core has no L3
  int numa_index = 0;
  int package_index = 0;
};

struct Gpu {
  int index = 0;           // GPU number on the node (PCI bus order unless the policy reorders)
  std::string pci_bus_id;  // "0000:c1:00.0"; empty if hwloc gave none
  Vendor vendor = Vendor::kUnknown;
  std::string model;
  std::string os_name;  // "rsmi0", "ze2", "cuda1", ... or empty when found by PCI class
  int partition = 0;    // index among the logical GPUs of one physical device (MI300A TPX)
  int partitions = 1;   // logical GPUs sharing the physical device
  int tiles = 0;        // sub-devices addressable as "g.t" (Intel PVC tiles), 0 if none
  std::string uuid;     // NVIDIA "GPU-…" UUID when known, else empty
  // NVIDIA MIG instances the driver lists on it (one per compute instance); 0: none, or MIG
  // is off, or not known (hwloc dumps do not say).
  int mig_instances = 0;
  // What found the GPU and its partitions, tiles or UUID: the PCI device, a runtime's OS device
  // in hwloc, a driver's sysfs or procfs file.
  std::string found_by;
  Locality locality;
};

struct Nic {
  int index = 0;
  std::string name;    // the name that matched the policy's patterns first
  std::string netdev;  // network interface ("hsn0", "ib0"), may be empty
  std::string rdma;    // RDMA device ("cxi0", "mlx5_0"), may be empty
  // The RDMA device's port for UCX_NET_DEVICES ("mlx5_0:1"): its lowest ACTIVE port, since UCX
  // offers only active ports; else its lowest port, else 1 (a dump without port states).
  int rdma_port = 1;
  std::string pci_bus_id;
  NicKind kind = NicKind::kEthernet;
  Locality locality;
};

struct Topology {
  std::string source;  // "live" or the XML path
  std::string hostname;
  std::vector<Core> cores;  // topology order: package, NUMA, L3, core
  int l3_count = 0;
  int numa_count = 0;
  // The Linux number of each NUMA node by its index here (hwloc's logical order), which numactl,
  // /sys/devices/system/node and set_mempolicy use; may be shorter on topologies made by hand.
  std::vector<int> numa_os_numbers;
  int package_count = 0;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  // What discovery could only infer (a tile count from a PCI device id, a partition count from
  // a mode): the plans stand, an administrator may want to look.
  std::vector<std::string> warnings;

  CpuSet all_pus() const;
  // The Linux number of NUMA node `numa` (an index here); itself when not known.
  int numa_os_number(int numa) const;
  CpuSet l3_pus(int l3) const;
  CpuSet numa_pus(int numa) const;
};

// A PCI bus id as "dddd:bb:dd.f" in lower case: hwloc writes a 4-digit domain, NVIDIA's tools
// 8 digits ("00000000:C1:00.0"), and some tools none ("c1:00.0").
std::string canonical_bus_id(const std::string& text);

// Renumbers GPUs per a policy's gpu_order: each entry is a PCI bus id or an index in the current
// order; entry i becomes GPU i. Must name every GPU exactly once.
Status apply_gpu_order(Topology& topology, const std::vector<std::string>& order);

// The NIC's ordinal as its stack counts it: the number in cxiN / mlx5_N / hsnN, else its index.
int nic_ordinal(const Nic& nic);

}  // namespace gpubind
