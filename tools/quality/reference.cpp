#include "reference.h"

#include <hwloc.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "gpubind/hwloc_objects.h"

namespace gpubind::quality {
namespace {

using hwloc::enum_value;
using hwloc::to_cpuset;

using TopologyHandle = std::unique_ptr<hwloc_topology, decltype(&hwloc_topology_destroy)>;

std::vector<CpuSet> cpusets_of_type(hwloc_topology_t topo, hwloc_obj_type_t type) {
  std::vector<CpuSet> sets;
  const int count = hwloc_get_nbobjs_by_type(topo, type);
  for (int i = 0; i < count; ++i) {
    CpuSet set = to_cpuset(hwloc_get_obj_by_type(topo, type, i)->cpuset);
    if (!set.empty()) sets.push_back(std::move(set));
  }
  return sets;
}

bool is_pci_to_pci_bridge(hwloc_obj_t obj) {
  return obj->type == HWLOC_OBJ_BRIDGE &&
         enum_value(obj->attr->bridge.upstream_type) == HWLOC_OBJ_BRIDGE_PCI;
}

std::vector<unsigned long long> bridges_above(hwloc_obj_t pci) {
  std::vector<unsigned long long> bridges;
  for (hwloc_obj_t up = pci->parent; up && up->type == HWLOC_OBJ_BRIDGE; up = up->parent) {
    if (is_pci_to_pci_bridge(up)) bridges.push_back(up->gp_index);
  }
  return bridges;
}

// An empty path discovers this machine (or the tree HWLOC_FSROOT names), without the x86
// component, as gpubind's live loader does.
Result<TopologyHandle> open_topology(const std::string& path) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return make_error("hwloc: cannot initialise a topology");
  TopologyHandle topo(raw, &hwloc_topology_destroy);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  if (path.empty())
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  else if (hwloc_topology_set_xml(raw, path.c_str()) != 0)
    return make_error("'" + path + "': hwloc cannot load it (" + std::strerror(errno) + ")");
  if (hwloc_topology_load(raw) != 0)
    return make_error("'" + path + "': hwloc cannot load it (" + std::strerror(errno) + ")");
  return topo;
}

// The NUMA nodes with CPUs nearest (by hwloc's NUMA distance matrix) to any of the CPU-less
// NUMA nodes in `nodeset`; empty without a matrix or a CPU-less node in it.
CpuSet nearest_numa_with_cpus(hwloc_topology_t topo, hwloc_const_nodeset_t nodeset) {
  unsigned count = 1;
  hwloc_distances_s* matrix = nullptr;
  if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &count, &matrix, 0, 0) != 0 ||
      count == 0)
    return {};
  CpuSet nearest;
  hwloc_uint64_t best = 0;
  bool found = false;
  for (unsigned from = 0; from < matrix->nbobjs; ++from) {
    const hwloc_obj_t source = matrix->objs[from];
    if (!hwloc_bitmap_iszero(source->cpuset) || !hwloc_bitmap_isset(nodeset, source->os_index))
      continue;
    for (unsigned to = 0; to < matrix->nbobjs; ++to) {
      const hwloc_obj_t target = matrix->objs[to];
      if (hwloc_bitmap_iszero(target->cpuset)) continue;
      const hwloc_uint64_t d = matrix->values[from * matrix->nbobjs + to];
      if (!found || d < best) {
        nearest = to_cpuset(target->cpuset);
        best = d;
        found = true;
      } else if (d == best) {
        nearest |= to_cpuset(target->cpuset);
      }
    }
  }
  hwloc_distances_release(topo, matrix);
  return nearest;
}

// The CPUs a PCI device is local to: those of its non-I/O ancestor (hwloc's own answer). Where
// that ancestor holds no CPU (I/O hung below GPU or CXL memory exposed as a CPU-less NUMA node),
// the NUMA nodes with CPUs that the distance matrix puts nearest to that memory, over the whole
// machine; without a matrix, the nearest ancestor with CPUs.
CpuSet anchor_cpus(hwloc_topology_t topo, hwloc_obj_t pci) {
  hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo, pci);
  if (!hwloc_bitmap_iszero(anchor->cpuset)) return to_cpuset(anchor->cpuset);
  if (anchor->nodeset) {
    CpuSet nearest = nearest_numa_with_cpus(topo, anchor->nodeset);
    if (!nearest.empty()) return nearest;
  }
  while (anchor->parent && hwloc_bitmap_iszero(anchor->cpuset))
    anchor = anchor->parent;
  return to_cpuset(anchor->cpuset);
}

}  // namespace

Result<Reference> Reference::load(const std::string& xml_path) {
  auto topo = open_topology(xml_path);
  if (!topo) return topo.error();
  hwloc_topology_t t = topo->get();
  Reference ref;
  ref.machine = to_cpuset(hwloc_get_root_obj(t)->cpuset);
  const bool has_cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0;
  ref.cores = cpusets_of_type(t, has_cores ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU);
  ref.l3s = cpusets_of_type(t, HWLOC_OBJ_L3CACHE);
  ref.numas = cpusets_of_type(t, HWLOC_OBJ_NUMANODE);
  ref.packages = cpusets_of_type(t, HWLOC_OBJ_PACKAGE);
  if (ref.cores.empty()) return make_error("'" + xml_path + "': no CPUs");
  for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(t, pci));) {
    DevicePlace place;
    place.anchor = anchor_cpus(t, pci);
    place.locality = ref.smallest_domain(place.anchor);
    place.bridges = bridges_above(pci);
    ref.pci.emplace(hwloc::pci_bus_id(pci), std::move(place));
  }
  return ref;
}

CpuSet Reference::smallest_domain(const CpuSet& cpus) const {
  const CpuSet* best = nullptr;
  for (const auto* level : {&l3s, &numas, &packages}) {
    for (const CpuSet& domain : *level) {
      if (cpus.is_subset_of(domain) && (!best || domain.count() < best->count())) best = &domain;
    }
  }
  return best ? *best : machine;
}

CpuSet Reference::first_core_per_l3() const {
  CpuSet first;
  for (const CpuSet& l3 : l3s) {
    for (const CpuSet& core : cores) {
      if (core.is_subset_of(l3)) {
        first |= core;
        break;
      }
    }
  }
  return first;
}

std::vector<int> Reference::core_by_pu() const {
  std::vector<int> owner(machine.last() + 1, -1);
  for (size_t c = 0; c < cores.size(); ++c) {
    cores[c].for_each([&](int pu) {
      if (pu < static_cast<int>(owner.size())) owner[pu] = static_cast<int>(c);
    });
  }
  return owner;
}

std::vector<int> Reference::l3_by_core() const {
  std::vector<int> l3_of(cores.size(), -1);
  for (size_t c = 0; c < cores.size(); ++c) {
    for (size_t l = 0; l < l3s.size(); ++l) {
      if (cores[c].is_subset_of(l3s[l])) l3_of[c] = static_cast<int>(l);
    }
  }
  return l3_of;
}

}  // namespace gpubind::quality
