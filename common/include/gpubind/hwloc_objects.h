// Reading hwloc objects safely: enum fields, CPU sets and PCI bus ids. Mechanics only, shared by
// the topology loader and the plan-quality checks, which apply rules of their own.
#pragma once

#include <hwloc.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

#include "gpubind/cpuset.h"

namespace gpubind::hwloc {

// hwloc keeps whatever number an XML file gives in its enum fields (bridge and OS device types),
// even outside the enum, and loading such a value as the enum is undefined: read the bytes.
template <class Enum>
unsigned enum_value(const Enum& field) {
  static_assert(std::is_enum_v<Enum> && sizeof(Enum) <= sizeof(unsigned));
  unsigned value = 0;
  std::memcpy(&value, &field, sizeof field);
  return value;
}

inline CpuSet to_cpuset(hwloc_const_bitmap_t bitmap) {
  CpuSet set;
  if (!bitmap) return set;
  for (int i = hwloc_bitmap_first(bitmap); i >= 0; i = hwloc_bitmap_next(bitmap, i))
    set.set(i);
  return set;
}

// "0000:c1:00.0"
inline std::string pci_bus_id(hwloc_obj_t pci) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", pci->attr->pcidev.domain,
                pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
  return text;
}

}  // namespace gpubind::hwloc
