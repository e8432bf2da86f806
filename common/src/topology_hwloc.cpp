// hwloc adapter. GPUs are found from the OS devices of hwloc's runtime plugins when a dump
// carries them (rsmiN, zeN[.M], cudaN, nvmlN, openclXdY), otherwise from PCI vendor and class.
// Live, what the runtimes would have said comes from the drivers' sysfs and procfs files
// (discovery/gpu_drivers.h): AMD compute partitions, Intel tiles, NVIDIA UUIDs.
#include "gpubind/topology_hwloc.h"

#include "gpubind/gpu_vendors.h"

#include <hwloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <tuple>

#include "gpubind/discovery/fs_root.h"
#include "gpubind/discovery/gpu_drivers.h"
#include "gpubind/hwloc_objects.h"
#include "gpubind/parse.h"
#include "gpubind/policy.h"

namespace gpubind {
namespace {

using hwloc::enum_value;
using hwloc::pci_bus_id;
using hwloc::to_cpuset;

using TopologyHandle = std::unique_ptr<hwloc_topology, decltype(&hwloc_topology_destroy)>;

std::string info(hwloc_obj_t obj, const char* name) {
  const char* value = obj ? hwloc_obj_get_info_by_name(obj, name) : nullptr;
  return value ? value : "";
}

hwloc_obj_t ancestor_of_type(hwloc_obj_t obj, hwloc_obj_type_t type) {
  for (; obj; obj = obj->parent) {
    if (obj->type == type) return obj;
  }
  return nullptr;
}

// "opencl<platform>d<device>", e.g. opencl0d1.
bool opencl_name(std::string_view name) {
  const size_t d = name.find('d', 6);
  return name.rfind("opencl", 0) == 0 && d != std::string_view::npos &&
         discovery::number_after_prefix(name.substr(0, d), "opencl") >= 0 &&
         discovery::number_after_prefix(name.substr(d), "d") >= 0;
}

// OpenCL lists CPUs and FPGAs too; old dumps may not say which.
bool opencl_gpu(hwloc_obj_t os) {
  const char* type = hwloc_obj_get_info_by_name(os, "OpenCLDeviceType");
  return !type || std::strcmp(type, "GPU") == 0;
}

// The port UCX_NET_DEVICES names for an RDMA device. UCX offers a device's ports 1..N as
// "<device>:<port>", and only those ACTIVE (uct/ib/base/ib_device.c); a dual-port HCA may have
// only port 2 cabled. hwloc gives each port's state as info "Port<i>State", libibverbs'
// ibv_port_state number (4: ACTIVE). No active port: the lowest listed, so the value stays that
// of the device; no port states (a dump without them): 1.
int ucx_port(hwloc_obj_t rdma) {
  constexpr long long kActive = 4;
  constexpr std::string_view kPrefix = "Port", kSuffix = "State";
  std::optional<long long> lowest, lowest_active;
  for (unsigned i = 0; i < rdma->infos_count; ++i) {
    const std::string_view name = rdma->infos[i].name ? rdma->infos[i].name : "";
    if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) continue;
    const auto port = parse_whole_number(
        name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size()), 1, 255);
    if (!port) continue;  // not "Port<number>State"
    if (!lowest || *port < *lowest) lowest = port;
    const char* state = rdma->infos[i].value;
    if (state && parse_whole_number(state, 0, 255) == kActive &&
        (!lowest_active || *port < *lowest_active)) {
      lowest_active = port;
    }
  }
  return static_cast<int>(lowest_active.value_or(lowest.value_or(1)));
}

// Where a live topology's driver files are read; absent for an XML dump (another node's).
struct LiveFiles {
  std::string root;                                   // discovery::fs_root()
  std::map<std::string, std::vector<int>> kfd_nodes;  // by AMD GPU PCI bus id
};

using DistanceHandle = std::unique_ptr<hwloc_distances_s, std::function<void(hwloc_distances_s*)>>;

class Loader {
 public:
  Loader(hwloc_topology_t topo, std::vector<std::string> nic_patterns, bool live)
      : topo_(topo), patterns_(std::move(nic_patterns)), distances_(numa_distances(topo)) {
    if (live) live_ = LiveFiles{discovery::fs_root(), {}};
  }

  Result<Topology> build(std::string source) {
    if (auto status = check_pus(); !status) return status.error();
    Topology t;
    t.source = std::move(source);
    t.hostname = info(hwloc_get_root_obj(topo_), "HostName");
    t.l3_count = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_L3CACHE);
    t.numa_count = std::max(1, hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_NUMANODE));
    t.package_count = std::max(1, hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_PACKAGE));
    for (int i = 0; i < hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_NUMANODE); ++i) {
      const auto os = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, i)->os_index;
      t.numa_os_numbers.push_back(os == HWLOC_UNKNOWN_INDEX ? i : static_cast<int>(os));
    }
    read_cores(t);
    if (live_)
      live_->kfd_nodes = discovery::kfd_nodes_by_device(discovery::read_kfd_gpu_nodes(live_->root),
                                                        amd_gpu_bus_ids());
    read_gpus(t);
    read_nics(t);
    t.warnings = std::move(warnings_);
    return t;
  }

 private:
  static DistanceHandle numa_distances(hwloc_topology_t topo) {
    unsigned count = 1;
    hwloc_distances_s* distances = nullptr;
    if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &count, &distances, 0, 0) != 0 ||
        count == 0)
      distances = nullptr;
    return DistanceHandle(distances, [topo](hwloc_distances_s* d) {
      if (d) hwloc_distances_release(topo, d);
    });
  }

  std::vector<std::string> amd_gpu_bus_ids() const {
    std::vector<std::string> ids;
    hwloc_obj_t pci = nullptr;
    while ((pci = hwloc_get_next_pcidev(topo_, pci))) {
      if (pci->attr->pcidev.vendor_id == 0x1002 && is_gpu_pci_class(pci))
        ids.push_back(pci_bus_id(pci));
    }
    return ids;
  }

  int numa_containing(hwloc_const_bitmap_t cpus) const {
    if (hwloc_bitmap_iszero(cpus)) return -1;
    const int count = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < count; ++i) {
      hwloc_obj_t numa = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, i);
      if (numa->cpuset && hwloc_bitmap_isincluded(cpus, numa->cpuset)) return i;
    }
    return -1;
  }

  int l3_containing(hwloc_const_bitmap_t cpus) const {
    if (hwloc_bitmap_iszero(cpus)) return -1;
    const int count = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_L3CACHE);
    for (int i = 0; i < count; ++i) {
      hwloc_obj_t l3 = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_L3CACHE, i);
      if (hwloc_bitmap_isincluded(cpus, l3->cpuset)) return i;
    }
    return -1;
  }

  int package_containing(hwloc_const_bitmap_t cpus) const {
    const int count = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_PACKAGE);
    if (count == 0) return 0;
    if (hwloc_bitmap_iszero(cpus)) return -1;
    for (int i = 0; i < count; ++i) {
      hwloc_obj_t pkg = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, i);
      if (hwloc_bitmap_isincluded(cpus, pkg->cpuset)) return i;
    }
    return -1;
  }

  // PU numbers gpubind can hold; a dump with others is refused rather than misread.
  Status check_pus() const {
    const int count = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_PU);
    for (int i = 0; i < count; ++i) {
      const unsigned os_index = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_PU, i)->os_index;
      if (os_index > static_cast<unsigned>(CpuSet::kMaxCpu)) {
        return make_error("CPU number " + std::to_string(os_index) + " is beyond the supported " +
                          std::to_string(CpuSet::kMaxCpu));
      }
    }
    return Ok{};
  }

  void read_cores(Topology& t) const {
    // Some dumps have no Core level: each PU is then its own core.
    const hwloc_obj_type_t type =
        hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    const int count = hwloc_get_nbobjs_by_type(topo_, type);
    for (int i = 0; i < count; ++i) {
      hwloc_obj_t obj = hwloc_get_obj_by_type(topo_, type, i);
      Core core;
      core.index = static_cast<int>(t.cores.size());
      hwloc_obj_t pu = nullptr;
      while (
          (pu = hwloc_get_next_obj_inside_cpuset_by_type(topo_, obj->cpuset, HWLOC_OBJ_PU, pu))) {
        core.pus.push_back(static_cast<int>(pu->os_index));
      }
      if (core.pus.empty()) continue;
      hwloc_obj_t l3 = ancestor_of_type(obj, HWLOC_OBJ_L3CACHE);
      core.l3_index = l3 ? static_cast<int>(l3->logical_index) : -1;
      core.numa_index = std::max(0, numa_containing(obj->cpuset));
      core.package_index = std::max(0, package_containing(obj->cpuset));
      t.cores.push_back(std::move(core));
    }
  }

  // The smallest CPU-side domain holding an I/O object: of the L3, NUMA node and package that
  // contain its non-I/O ancestor, the one with the fewest PUs (an L3 on a tie). On AMD the L3 is
  // smaller than the NUMA node; with Intel's sub-NUMA clustering the NUMA node is smaller.
  Locality locality_of(hwloc_obj_t io) const {
    Locality loc;
    const auto [cpus, basis] = local_cpus_of(io);
    loc.basis = basis;
    const int l3 = l3_containing(cpus);
    const int numa = numa_containing(cpus);
    const int package =
        hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_PACKAGE) > 0 ? package_containing(cpus) : -1;
    hwloc_obj_t smallest = hwloc_get_root_obj(topo_);
    loc.kind = LocalityKind::kMachine;
    for (auto [type, index, kind] :
         {std::tuple{HWLOC_OBJ_L3CACHE, l3, LocalityKind::kL3},
          std::tuple{HWLOC_OBJ_NUMANODE, numa, LocalityKind::kNuma},
          std::tuple{HWLOC_OBJ_PACKAGE, package, LocalityKind::kPackage}}) {
      if (index < 0) continue;
      hwloc_obj_t domain = hwloc_get_obj_by_type(topo_, type, index);
      if (hwloc_bitmap_weight(domain->cpuset) < hwloc_bitmap_weight(smallest->cpuset) ||
          loc.kind == LocalityKind::kMachine) {
        smallest = domain;
        loc.kind = kind;
      }
    }
    loc.cpus = to_cpuset(smallest->cpuset);
    loc.l3_index = l3_containing(smallest->cpuset);
    loc.numa_index = numa_containing(smallest->cpuset);
    loc.package_index = package_containing(smallest->cpuset);
    loc.pci_path = pci_path_of(io);
    if (locality_unknown(cpus)) {
      // Every CPU of a machine with several domains: no locality was reported (firmware without
      // PCI proximity, a hypervisor's flat PCI tree), whatever object hwloc hung it from.
      loc.kind = LocalityKind::kUnknown;
      loc.cpus = to_cpuset(hwloc_get_root_obj(topo_)->cpuset);
      loc.l3_index = loc.numa_index = loc.package_index = -1;
      loc.basis = "its " + basis + " are every CPU of the node: no I/O locality reported";
    }
    return loc;
  }

  // Whether a device local to `cpus` has no locality known: all the machine's CPUs where it has
  // more than one L3 or NUMA node to choose between.
  bool locality_unknown(hwloc_const_bitmap_t cpus) const {
    hwloc_const_bitmap_t all = hwloc_get_root_obj(topo_)->cpuset;
    const int domains = std::max(hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_L3CACHE),
                                 hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_NUMANODE));
    return domains > 1 && hwloc_bitmap_isincluded(all, cpus);
  }

  // The CPUs an I/O device is local to: its non-I/O ancestor's. Where that ancestor has none (a
  // group holding only a CPU-less NUMA node: GPU memory on Grace, a node restricted to part of
  // its cores), the nearest NUMA node with CPUs: of those below the nearest ancestor that has
  // CPUs (the device's side of the machine), the closest by the NUMA distance matrix.
  std::pair<hwloc_const_bitmap_t, std::string> local_cpus_of(hwloc_obj_t io) const {
    hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo_, io);
    if (locality_unknown(anchor->cpuset)) {
      if (auto kernels = kernel_numa_node_of(io)) return *kernels;
    }
    if (!hwloc_bitmap_iszero(anchor->cpuset)) return {anchor->cpuset, "PCI local CPUs"};
    hwloc_obj_t container = anchor;
    while (container->parent && hwloc_bitmap_iszero(container->cpuset))
      container = container->parent;
    std::vector<hwloc_obj_t> with_cpus, cpu_less;
    hwloc_obj_t numa = nullptr;
    while ((numa = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, numa))) {
      if (hwloc_bitmap_iszero(numa->cpuset)) {
        if (anchor->nodeset && hwloc_bitmap_isset(anchor->nodeset, numa->os_index))
          cpu_less.push_back(numa);
      } else if (hwloc_bitmap_isincluded(numa->cpuset, container->cpuset)) {
        with_cpus.push_back(numa);
      }
    }
    hwloc_obj_t best = nullptr, from = nullptr;
    hwloc_uint64_t best_distance = 0;
    for (hwloc_obj_t candidate : with_cpus) {
      for (hwloc_obj_t source : cpu_less) {
        hwloc_uint64_t there = 0, back = 0;
        if (!distances_ || hwloc_distances_obj_pair_values(distances_.get(), source, candidate,
                                                           &there, &back) != 0)
          continue;
        if (!best || there < best_distance) {
          best = candidate;
          from = source;
          best_distance = there;
        }
      }
    }
    const std::string cpu_less_name =
        cpu_less.empty() ? "" : " P#" + std::to_string(cpu_less.front()->os_index);
    if (best) {
      return {best->cpuset, "NUMA node P#" + std::to_string(best->os_index) +
                                ", the nearest with CPUs to CPU-less NUMA node P#" +
                                std::to_string(from->os_index) + " (distance " +
                                std::to_string(best_distance) + ")"};
    }
    if (with_cpus.size() == 1) {
      return {with_cpus.front()->cpuset,
              "NUMA node P#" + std::to_string(with_cpus.front()->os_index) +
                  ", the only one with CPUs on the device's side of CPU-less NUMA node" +
                  cpu_less_name};
    }
    return {container->cpuset, "the nearest ancestor with CPUs (" +
                                   std::string(hwloc_obj_type_string(container->type)) + " L#" +
                                   std::to_string(container->logical_index) + ")"};
  }

  // Live only: the NUMA node the kernel gives the device (sysfs numa_node) where its local_cpus
  // are every CPU. The two differ where the kernel takes the node from the device and the mask
  // from its bus, or an admin set numa_node for firmware that reports none.
  std::optional<std::pair<hwloc_const_bitmap_t, std::string>> kernel_numa_node_of(
      hwloc_obj_t io) const {
    if (!live_) return std::nullopt;
    hwloc_obj_t pci = io;
    while (pci && pci->type != HWLOC_OBJ_PCI_DEVICE)
      pci = pci->parent;
    if (!pci) return std::nullopt;
    const std::string bus_id = pci_bus_id(pci);
    const auto text =
        discovery::read_small_file(live_->root, "/sys/bus/pci/devices/" + bus_id + "/numa_node");
    // -1 (none) is refused by the range: only a real node number names a locality.
    const auto node =
        text ? parse_whole_number(discovery::trimmed(*text), 0, 1 << 20) : std::nullopt;
    if (!node) return std::nullopt;
    hwloc_obj_t numa = hwloc_get_numanode_obj_by_os_index(topo_, static_cast<unsigned>(*node));
    if (!numa || hwloc_bitmap_iszero(numa->cpuset)) return std::nullopt;
    return std::pair<hwloc_const_bitmap_t, std::string>(
        numa->cpuset, "kernel's NUMA node " + std::to_string(*node) + " for " + bus_id +
                          " (sysfs numa_node; its local_cpus are every CPU)");
  }

  // The bridges above a device, root port first; host bridges left out (every device has one).
  static std::vector<int> pci_path_of(hwloc_obj_t io) {
    std::vector<int> path;
    for (hwloc_obj_t obj = io->parent; obj && obj->type == HWLOC_OBJ_BRIDGE; obj = obj->parent) {
      if (enum_value(obj->attr->bridge.upstream_type) == HWLOC_OBJ_BRIDGE_HOST) break;
      path.push_back(static_cast<int>(obj->gp_index));
    }
    std::reverse(path.begin(), path.end());
    return path;
  }

  // A GPU found by PCI class alone (no compute runtime's OS device below it), one rule in dumps
  // and live: a 3D or other display controller of a GPU vendor (0302, 0380), an AMD Instinct
  // (MI300 calls itself a processing accelerator, 1200), or a VGA-compatible one (0300) on a
  // PCIe link. Not Intel's integrated graphics (bus 0), not FPGAs or other accelerators (Intel
  // Stratix: 8086 class 1200), not a BMC's video (ASPEED, Matrox: no GPU vendor), and not a
  // server board's onboard video on conventional PCI (ATI ES1000, 1002:515e: no link speed).
  static bool is_gpu_pci_class(hwloc_obj_t pci) {
    const unsigned cls = pci->attr->pcidev.class_id;
    const bool display = (cls >> 8) == 0x03 && (cls != 0x0300 || on_pcie(pci));
    switch (pci->attr->pcidev.vendor_id) {
      case 0x10de:  // NVIDIA
        return display;
      case 0x1002:  // AMD
        return display || cls == 0x1200;
      case 0x8086:  // Intel
        return display && pci->attr->pcidev.bus != 0;
      default:
        return false;
    }
  }

  static bool on_pcie(hwloc_obj_t pci) { return pci->attr->pcidev.linkspeed > 0; }

  // A GPU vendor's VGA device left out by is_gpu_pci_class for want of a PCIe link: said in the
  // topology's warnings, so nobody looks for the GPU it is not.
  static bool is_onboard_video(hwloc_obj_t pci) {
    const unsigned vendor = pci->attr->pcidev.vendor_id;
    return pci->attr->pcidev.class_id == 0x0300 && !on_pcie(pci) &&
           (vendor == 0x10de || vendor == 0x1002 ||
            (vendor == 0x8086 && pci->attr->pcidev.bus != 0));
  }

  static Vendor vendor_of(unsigned vendor_id) {
    const GpuVendorRow* row = gpu_vendor_of_pci(vendor_id);
    return row ? row->vendor : Vendor::kUnknown;
  }

  struct Unit {
    hwloc_obj_t where;  // PCI device or OS device
    std::string os_name;
    Vendor vendor;
    int tiles = 0;
    std::string model;
    std::string uuid;
    std::string found_by;
    int mig_instances = 0;
  };

  struct RuntimeDevices {
    std::vector<hwloc_obj_t> rsmis, zes, nvidias, opencls;
    std::map<std::string, int> tiles;  // zeN -> its zeN.M sub-devices
  };

  static RuntimeDevices runtime_devices(const std::vector<hwloc_obj_t>& osdevs) {
    RuntimeDevices found;
    for (hwloc_obj_t os : osdevs) {
      const std::string_view name = os->name ? os->name : "";
      if (discovery::number_after_prefix(name, "rsmi") >= 0) {
        found.rsmis.push_back(os);
      } else if (discovery::number_after_prefix(name, "ze") >= 0) {
        found.zes.push_back(os);
      } else if (name.rfind("ze", 0) == 0 && name.find('.') != std::string_view::npos &&
                 discovery::number_after_prefix(name.substr(0, name.find('.')), "ze") >= 0 &&
                 discovery::number_after_prefix(name.substr(name.find('.')), ".") >= 0) {
        ++found.tiles[std::string(name.substr(0, name.find('.')))];  // zeN.M: a tile of zeN
      } else if (discovery::number_after_prefix(name, "cuda") >= 0 ||
                 discovery::number_after_prefix(name, "nvml") >= 0) {
        found.nvidias.push_back(os);
      } else if (opencl_name(name) && opencl_gpu(os)) {
        found.opencls.push_back(os);
      }
    }
    auto by_number = [](hwloc_obj_t a, hwloc_obj_t b) {
      const size_t la = std::strlen(a->name), lb = std::strlen(b->name);
      return la != lb ? la < lb : std::strcmp(a->name, b->name) < 0;
    };
    std::sort(found.rsmis.begin(), found.rsmis.end(), by_number);
    std::sort(found.zes.begin(), found.zes.end(), by_number);
    return found;
  }

  static std::string pci_identity(hwloc_obj_t pci) {
    char text[64];
    std::snprintf(text, sizeof text, "PCI %04x:%04x class 0x%04x", pci->attr->pcidev.vendor_id,
                  pci->attr->pcidev.device_id, pci->attr->pcidev.class_id);
    return text;
  }

  // An NVIDIA GPU's UUID: the one hwloc's NVML plugin recorded, else, live, the driver's procfs
  // file's. Live, also its MIG instances, which the driver lists by the file's device minor
  // (dumps do not record them).
  void read_nvidia_ids(hwloc_obj_t pci, const std::vector<hwloc_obj_t>& nvidias, Unit& unit) const {
    for (hwloc_obj_t os : nvidias) {
      if (std::string uuid = info(os, "NVIDIAUUID"); !uuid.empty()) {
        unit.uuid = std::move(uuid);
        break;
      }
    }
    if (!live_ || !pci) return;
    const std::string bus_id = pci_bus_id(pci);
    const auto gpu = discovery::read_nvidia_gpu_info(live_->root, bus_id);
    if (!gpu) return;
    const std::string file = "/proc/driver/nvidia/gpus/" + bus_id + "/information";
    if (unit.uuid.empty()) {
      unit.uuid = gpu->uuid;
      unit.found_by += "; UUID from " + file;
    }
    take_driver_model(pci, gpu->model, file, unit);
    unit.mig_instances = discovery::count_nvidia_mig_instances(live_->root, gpu->minor);
    if (unit.mig_instances > 0)
      unit.found_by += "; MIG instances from " + discovery::nvidia_mig_folder(gpu->minor);
  }

  // The driver's name for the GPU ("NVIDIA H100 80GB HBM3", the name NVML gives) where no GPU
  // runtime named it: it replaces the PCI database's (hwloc's PCIDevice, "GH100 [H100 SXM5
  // 80GB]", or none on a node without pci.ids), so a node names its GPUs alike with and without
  // the runtimes, and check-node's gpu_model can be checked.
  void take_driver_model(hwloc_obj_t pci, const std::string& model, const std::string& file,
                         Unit& unit) const {
    if (model.empty() || (!unit.model.empty() && unit.model != info(pci, "PCIDevice"))) return;
    unit.model = model;
    unit.found_by += "; model from " + file;
  }

  // The logical GPUs one PCI device (or parent) exposes, from its OS devices, else from the
  // device itself and, live, its driver's files.
  std::vector<Unit> units_of(hwloc_obj_t parent, const std::vector<hwloc_obj_t>& osdevs) {
    const RuntimeDevices found = runtime_devices(osdevs);
    const bool is_pci = parent->type == HWLOC_OBJ_PCI_DEVICE;
    hwloc_obj_t pci = is_pci ? parent : nullptr;
    const Vendor pci_vendor = is_pci ? vendor_of(parent->attr->pcidev.vendor_id) : Vendor::kUnknown;
    auto model_of = [&](hwloc_obj_t os) {
      std::string model = info(os, "GPUModel");
      return model.empty() ? info(parent, "PCIDevice") : model;
    };
    std::vector<Unit> units;
    if (!found.rsmis.empty() || !found.zes.empty()) {
      const bool amd = !found.rsmis.empty();
      for (hwloc_obj_t os : amd ? found.rsmis : found.zes) {
        const auto it = found.tiles.find(os->name);
        const int tiles = it == found.tiles.end() ? 0 : it->second;
        std::string found_by =
            std::string("hwloc OS device ") + os->name + (amd ? " (ROCm SMI)" : " (Level Zero)");
        if (tiles > 0) found_by += " with " + std::to_string(tiles) + " tiles";
        units.push_back({is_pci ? parent : os, os->name, amd ? Vendor::kAmd : Vendor::kIntel, tiles,
                         model_of(os), "", std::move(found_by)});
      }
      return units;
    }
    hwloc_obj_t named = !found.nvidias.empty()   ? found.nvidias.front()
                        : !found.opencls.empty() ? found.opencls.front()
                                                 : nullptr;
    if (named && !found.nvidias.empty()) {
      units.push_back({is_pci ? parent : named, named->name, Vendor::kNvidia, 0, model_of(named),
                       "", std::string("hwloc OS device ") + named->name + " (CUDA/NVML)"});
      read_nvidia_ids(pci, found.nvidias, units.back());
      return units;
    }
    // OpenCL knows neither partitions nor tiles: the driver's files still count them.
    if (named && !is_pci) {
      units.push_back({named, named->name, pci_vendor, 0, model_of(named), "",
                       std::string("hwloc OS device ") + named->name + " (OpenCL)"});
      return units;
    }
    if (named) {
      return units_of_pci_device(parent, pci_vendor,
                                 {parent, named->name, pci_vendor, 0, model_of(named), "",
                                  std::string("hwloc OS device ") + named->name + " (OpenCL)"});
    }
    if (is_pci && osdevs.empty() && is_onboard_video(parent)) {
      warnings_.push_back("PCI " + pci_bus_id(parent) + " (" + pci_identity(parent) +
                          ") is a VGA display device on conventional PCI with no compute runtime: "
                          "onboard video, not counted as a GPU");
    }
    if (is_pci && is_gpu_pci_class(parent)) {
      return units_of_pci_device(
          parent, pci_vendor,
          {parent, "", pci_vendor, 0, info(parent, "PCIDevice"), "", pci_identity(parent)});
    }
    return units;
  }

  // A GPU found by PCI class, with what its kernel driver publishes: AMD compute partitions,
  // Intel tiles, the NVIDIA UUID.
  std::vector<Unit> units_of_pci_device(hwloc_obj_t pci, Vendor vendor, Unit unit) {
    const std::string bus_id = pci_bus_id(pci);
    const unsigned device_id = pci->attr->pcidev.device_id;
    if (vendor == Vendor::kNvidia) read_nvidia_ids(pci, {}, unit);
    if (vendor == Vendor::kAmd && live_) {
      take_driver_model(pci, discovery::read_amd_product_name(live_->root, bus_id),
                        "/sys/bus/pci/devices/" + bus_id + "/product_name", unit);
    }
    if (vendor == Vendor::kIntel) {
      const discovery::IntelTiles tiles =
          live_ ? discovery::read_intel_tiles(live_->root, bus_id, device_id)
                : discovery::intel_tiles_by_device_id(bus_id, device_id);
      unit.tiles = tiles.tiles;
      if (!tiles.evidence.empty()) unit.found_by += "; " + tiles.evidence;
      if (!tiles.warning.empty()) warnings_.push_back(tiles.warning);
    }
    if (vendor != Vendor::kAmd || !live_) return {unit};
    const auto kfd = live_->kfd_nodes.find(bus_id);
    const discovery::AmdPartitioning parts = discovery::read_amd_partitioning(
        live_->root, bus_id, device_id,
        kfd == live_->kfd_nodes.end() ? std::vector<int>{} : kfd->second);
    if (!parts.warning.empty()) warnings_.push_back(parts.warning);
    std::string modes;
    if (!parts.compute_mode.empty()) modes += "; compute partition " + parts.compute_mode;
    if (!parts.memory_mode.empty()) modes += ", memory partition " + parts.memory_mode;
    if (!modes.empty()) modes += " (amdgpu sysfs)";
    std::vector<Unit> units;
    for (int p = 0; p < parts.partitions; ++p) {
      Unit part = unit;
      part.found_by += modes;
      if (static_cast<size_t>(p) < parts.kfd_nodes.size())
        part.found_by += "; KFD node " + std::to_string(parts.kfd_nodes[static_cast<size_t>(p)]);
      units.push_back(std::move(part));
    }
    return units;
  }

  std::map<hwloc_obj_t, std::vector<hwloc_obj_t>> osdevs_by_parent(
      std::initializer_list<hwloc_obj_osdev_type_t> types) const {
    std::map<hwloc_obj_t, std::vector<hwloc_obj_t>> groups;
    hwloc_obj_t os = nullptr;
    while ((os = hwloc_get_next_osdev(topo_, os))) {
      const unsigned type = enum_value(os->attr->osdev.type);
      if (std::none_of(types.begin(), types.end(),
                       [type](hwloc_obj_osdev_type_t t) { return enum_value(t) == type; }))
        continue;
      // Sub-devices (PVC tiles) may hang below their device's OS device: group by PCI device.
      hwloc_obj_t parent = os->parent;
      while (parent && parent->type == HWLOC_OBJ_OS_DEVICE)
        parent = parent->parent;
      groups[parent && parent->type == HWLOC_OBJ_PCI_DEVICE ? parent : os].push_back(os);
    }
    return groups;
  }

  void read_gpus(Topology& t) {
    auto groups = osdevs_by_parent({HWLOC_OBJ_OSDEV_GPU, HWLOC_OBJ_OSDEV_COPROC});
    hwloc_obj_t pci = nullptr;
    while ((pci = hwloc_get_next_pcidev(topo_, pci)))
      groups[pci];  // PCI-class candidates too
    struct Found {
      std::string sort_key;
      int order;
      Gpu gpu;
    };
    std::vector<Found> found;
    for (const auto& [parent, osdevs] : groups) {
      const std::vector<Unit> units = units_of(parent, osdevs);
      for (size_t i = 0; i < units.size(); ++i) {
        const Unit& unit = units[i];
        Gpu gpu;
        const bool is_pci = unit.where->type == HWLOC_OBJ_PCI_DEVICE;
        gpu.pci_bus_id = is_pci ? pci_bus_id(unit.where) : "";
        gpu.vendor = unit.vendor;
        gpu.model = unit.model;
        gpu.os_name = unit.os_name;
        gpu.partition = static_cast<int>(i);
        gpu.partitions = is_pci ? static_cast<int>(units.size()) : 1;
        gpu.tiles = unit.tiles;
        gpu.uuid = unit.uuid;
        gpu.mig_instances = unit.mig_instances;
        gpu.found_by = unit.found_by;
        gpu.locality = locality_of(unit.where);
        // PCI bus order first; devices without PCI ids after them, by name.
        found.push_back({is_pci ? gpu.pci_bus_id : "~" + unit.os_name, static_cast<int>(i), gpu});
      }
    }
    // A runtime's device that hwloc could not attach to a PCI device (an OpenCL ICD in a VM) is one
    // of the PCI GPUs seen twice, and has no locality: with PCI GPUs present it is left out.
    const bool any_pci = std::any_of(found.begin(), found.end(),
                                     [](const Found& f) { return !f.gpu.pci_bus_id.empty(); });
    if (any_pci) std::erase_if(found, [](const Found& f) { return f.gpu.pci_bus_id.empty(); });
    std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
      return a.sort_key != b.sort_key ? a.sort_key < b.sort_key : a.order < b.order;
    });
    for (Found& f : found) {
      f.gpu.index = static_cast<int>(t.gpus.size());
      t.gpus.push_back(std::move(f.gpu));
    }
  }

  // Index of the first pattern matching `name`, or -1.
  int pattern_rank(const std::string& name) const {
    for (size_t i = 0; i < patterns_.size(); ++i) {
      if (glob_match(patterns_[i], name)) return static_cast<int>(i);
    }
    return -1;
  }

  // Fabric adapters known by their PCI identity, whatever their devices are named.
  static bool is_cassini(hwloc_obj_t pci) {  // HPE Slingshot (hsn*, or hsi* at LLNL)
    return pci->type == HWLOC_OBJ_PCI_DEVICE && pci->attr->pcidev.vendor_id == 0x17db;
  }
  static bool is_efa(hwloc_obj_t pci) {  // AWS Elastic Fabric Adapter (device ids 0xefa0-0xefaf)
    return pci->type == HWLOC_OBJ_PCI_DEVICE && pci->attr->pcidev.vendor_id == 0x1d0f &&
           (pci->attr->pcidev.device_id & 0xfff0) == 0xefa0;
  }

  // A NIC: a PCI device (or OS device) with a network or RDMA device whose name matches the
  // policy's patterns; the earliest matching pattern names it. Its kind comes from its identity.
  void read_nics(Topology& t) const {
    auto groups = osdevs_by_parent({HWLOC_OBJ_OSDEV_NETWORK, HWLOC_OBJ_OSDEV_OPENFABRICS});
    std::vector<std::pair<std::string, Nic>> found;
    for (const auto& [parent, osdevs] : groups) {
      Nic nic;
      int best_rank = -1;
      bool slingshot = is_cassini(parent);
      for (hwloc_obj_t os : osdevs) {
        const std::string name = os->name ? os->name : "";
        const bool is_net = enum_value(os->attr->osdev.type) == HWLOC_OBJ_OSDEV_NETWORK;
        if (is_net && nic.netdev.empty()) nic.netdev = name;
        if (!is_net && nic.rdma.empty()) {
          nic.rdma = name;
          nic.rdma_port = ucx_port(os);
        }
        const int rank = pattern_rank(name);
        if (rank >= 0 && (best_rank < 0 || rank < best_rank)) {
          best_rank = rank;
          nic.name = name;
        }
        const std::string subtype = os->subtype ? os->subtype : "";
        slingshot = slingshot || subtype == "Slingshot" || name.rfind("hsn", 0) == 0 ||
                    name.rfind("cxi", 0) == 0;
      }
      if (best_rank < 0) continue;
      const bool efa = is_efa(parent);
      const bool is_pci = parent->type == HWLOC_OBJ_PCI_DEVICE;
      if (is_pci) nic.pci_bus_id = pci_bus_id(parent);
      nic.kind = slingshot           ? NicKind::kSlingshot
                 : efa               ? NicKind::kEfa
                 : !nic.rdma.empty() ? NicKind::kInfiniband
                                     : NicKind::kEthernet;
      nic.locality = locality_of(parent);
      found.push_back({is_pci ? nic.pci_bus_id : "~" + nic.name, std::move(nic)});
    }
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [key, nic] : found) {
      nic.index = static_cast<int>(t.nics.size());
      t.nics.push_back(std::move(nic));
    }
  }

  hwloc_topology_t topo_;
  std::vector<std::string> patterns_;
  DistanceHandle distances_;
  std::optional<LiveFiles> live_;
  std::vector<std::string> warnings_;
};

Result<Topology> load(const std::string& xml_path, const std::vector<std::string>& nic_patterns,
                      bool gpu_runtimes) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return make_error("hwloc: cannot initialise a topology");
  TopologyHandle topo(raw, &hwloc_topology_destroy);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  // The whole node, even when this process runs inside a restricted cpuset.
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  const bool from_xml = !xml_path.empty();
  // hwloc's x86 component reads CPUID by moving the calling thread onto every PU in turn: in
  // slurmstepd (fallback) that is a thread of the job's step, and gpubindd's unit forbids
  // sched_setaffinity. Linux sysfs already gives everything the planner uses.
  if (!from_xml)
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  // hwloc's GPU runtime plugins initialise the drivers inside the calling process (gpubindd,
  // slurmstepd): tens of MB and threads, device files held open, and devices not always attached
  // to their PCI device. PCI vendor and class find the GPUs without them.
  if (!from_xml && !gpu_runtimes) {
    for (const char* component : {"opencl", "cuda", "nvml", "rsmi", "levelzero", "gl"})
      hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, component);
  }
  if (from_xml) {
    struct stat st {};
    if (stat(xml_path.c_str(), &st) != 0) {
      return make_error("topology file '" + xml_path + "': " + std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) return make_error("topology file '" + xml_path + "': not a file");
    if (hwloc_topology_set_xml(raw, xml_path.c_str()) != 0) {
      return make_error("topology file '" + xml_path + "': hwloc cannot read it (" +
                        std::strerror(errno) + ")");
    }
  }
  if (hwloc_topology_load(raw) != 0) {
    return make_error(
        from_xml ? "topology file '" + xml_path + "': not a valid hwloc XML topology (" +
                       std::strerror(errno) + ")"
                 : std::string("hwloc: topology discovery failed: ") + std::strerror(errno));
  }
  const std::string where = from_xml ? "topology file '" + xml_path + "'" : "live topology";
  auto built = Loader(raw, nic_patterns, !from_xml).build(from_xml ? xml_path : "live");
  if (!built) return make_error(where + ": " + built.error().message);
  Topology topology = std::move(*built);
  if (topology.cores.empty()) return make_error(where + ": no CPUs found");
  return topology;
}

}  // namespace

Result<Topology> load_topology_xml(const std::string& path,
                                   const std::vector<std::string>& nic_patterns) {
  if (path.empty()) return make_error("topology file: empty path");
  return load(path, nic_patterns, false);
}

Result<Topology> load_topology_live(const std::vector<std::string>& nic_patterns,
                                    bool gpu_runtimes) {
  return load("", nic_patterns, gpu_runtimes);
}

}  // namespace gpubind
