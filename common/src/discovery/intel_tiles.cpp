// Intel GPU tiles from the kernel drivers' sysfs. i915 registers one "gt<K>" kobject per tile
// under the card's "gt" folder (intel_gt_sysfs.c; Ponte Vecchio is driven by Intel's backported
// i915, upstream i915 never supported it); xe one "tile<K>" kobject under the PCI device
// (xe_tile_sysfs.c), whose "gt<M>" folders below count media GTs too, so tiles are counted.
// Level Zero exposes a multi-tile card's tiles as sub-devices, and under
// ZE_FLAT_DEVICE_HIERARCHY=FLAT (the default on Ponte Vecchio) as devices of their own.
#include <cstdio>
#include <string>

#include "gpubind/discovery/fs_root.h"
#include "gpubind/discovery/gpu_drivers.h"

namespace gpubind::discovery {
namespace {

int count_prefixed(const std::vector<std::string>& names, const std::string& prefix) {
  int count = 0;
  for (const std::string& name : names)
    count += number_after_prefix(name, prefix) >= 0 ? 1 : 0;
  return count;
}

// One tile is not a sub-device: Level Zero lists a one-tile card as one device.
int addressable(int tiles) {
  return tiles >= 2 ? tiles : 0;
}

}  // namespace

// PCI ids as the PCI ID repository names them; a fallback only, the driver's folders come first.
int ponte_vecchio_tiles(unsigned pci_device_id) {
  switch (pci_device_id) {
    case 0x0b69:  // Max 1450
    case 0x0bd0:  // Ponte Vecchio XL
    case 0x0bd5:  // Max 1550
    case 0x0bd6:  // Max 1550
    case 0x0bd7:  // Max 1350
    case 0x0bd8:  // Max 1350
      return 2;
    case 0x0bd9:  // Max 1100
    case 0x0bda:  // Max 1100
    case 0x0bdb:  // Max 1100
      return 1;
    default:
      return 0;
  }
}

IntelTiles read_intel_tiles(const std::string& root, const std::string& bus_id,
                            unsigned pci_device_id) {
  IntelTiles result;
  const std::string device = "/sys/bus/pci/devices/" + bus_id;
  for (const std::string& card : list_folder(root, device + "/drm")) {
    if (number_after_prefix(card, "card") < 0) continue;
    const std::string gt_folder = device + "/drm/" + card + "/gt";
    const int gts = count_prefixed(list_folder(root, gt_folder), "gt");
    if (gts > 0) {
      result.tiles = addressable(gts);
      result.evidence =
          std::to_string(gts) + (gts == 1 ? " tile (i915 " : " tiles (i915 ") + gt_folder + "/gt*)";
      return result;
    }
  }
  const int xe_tiles = count_prefixed(list_folder(root, device), "tile");
  if (xe_tiles > 0) {
    result.tiles = addressable(xe_tiles);
    result.evidence = std::to_string(xe_tiles) + (xe_tiles == 1 ? " tile (xe " : " tiles (xe ") +
                      device + "/tile*)";
    return result;
  }
  return intel_tiles_by_device_id(bus_id, pci_device_id);
}

IntelTiles intel_tiles_by_device_id(const std::string& bus_id, unsigned pci_device_id) {
  IntelTiles result;
  const int tiles = ponte_vecchio_tiles(pci_device_id);
  if (tiles == 0) return result;
  char id[8];
  std::snprintf(id, sizeof id, "0x%04x", pci_device_id);
  const std::string count = std::to_string(tiles) + (tiles == 1 ? " tile" : " tiles");
  result.tiles = addressable(tiles);
  result.evidence = count + " (PCI device id " + id + ", Data Center GPU Max)";
  result.warning = "Intel GPU " + bus_id +
                   ": neither Level Zero nor the i915/xe driver's tile "
                   "folders say how many tiles it has; " +
                   count + " from its PCI device id " + id;
  return result;
}

}  // namespace gpubind::discovery
