#include "gpubind/topology.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>

#include "gpubind/gpu_vendors.h"
#include "gpubind/parse.h"

namespace gpubind {

const char* vendor_name(Vendor vendor) {
  const GpuVendorRow* row = gpu_vendor(vendor);
  return row ? row->name.data() : "unknown";  // the table's names are string literals
}

const char* nic_kind_name(NicKind kind) {
  switch (kind) {
    case NicKind::kSlingshot:
      return "slingshot";
    case NicKind::kInfiniband:
      return "infiniband";
    case NicKind::kEfa:
      return "efa";
    case NicKind::kEthernet:
      break;
  }
  return "ethernet";
}

const char* locality_kind_name(LocalityKind kind) {
  switch (kind) {
    case LocalityKind::kL3:
      return "L3";
    case LocalityKind::kNuma:
      return "NUMA";
    case LocalityKind::kPackage:
      return "package";
    case LocalityKind::kUnknown:
      return "unknown";
    case LocalityKind::kMachine:
      break;
  }
  return "machine";
}

int locality_index(const Locality& loc) {
  switch (loc.kind) {
    case LocalityKind::kL3:
      return loc.l3_index;
    case LocalityKind::kNuma:
      return loc.numa_index;
    case LocalityKind::kPackage:
      return loc.package_index;
    case LocalityKind::kMachine:
    case LocalityKind::kUnknown:
      break;
  }
  return 0;
}

std::string describe_locality(const Locality& loc) {
  if (loc.kind == LocalityKind::kMachine || loc.kind == LocalityKind::kUnknown)
    return locality_kind_name(loc.kind);
  return std::string(locality_kind_name(loc.kind)) + " " + std::to_string(locality_index(loc));
}

CpuSet Topology::all_pus() const {
  CpuSet set;
  for (const Core& core : cores) {
    for (int pu : core.pus)
      set.set(pu);
  }
  return set;
}

CpuSet Topology::l3_pus(int l3) const {
  CpuSet set;
  for (const Core& core : cores) {
    if (core.l3_index != l3) continue;
    for (int pu : core.pus)
      set.set(pu);
  }
  return set;
}

CpuSet Topology::numa_pus(int numa) const {
  CpuSet set;
  for (const Core& core : cores) {
    if (core.numa_index != numa) continue;
    for (int pu : core.pus)
      set.set(pu);
  }
  return set;
}

int Topology::numa_os_number(int numa) const {
  return numa >= 0 && static_cast<size_t>(numa) < numa_os_numbers.size()
             ? numa_os_numbers[static_cast<size_t>(numa)]
             : numa;
}

namespace {

bool parse_index(const std::string& text, int& value) {
  const auto parsed = parse_whole_number(text, 0, INT_MAX);
  if (!parsed) return false;
  value = static_cast<int>(*parsed);
  return true;
}

// "c1:00.0" and "0000:c1:00.0" name the same device.
int trailing_number(const std::string& name) {
  size_t start = name.size();
  while (start > 0 && std::isdigit(static_cast<unsigned char>(name[start - 1])))
    --start;
  if (start == name.size()) return -1;
  int value = -1;
  std::from_chars(name.data() + start, name.data() + name.size(), value);
  return value;
}

}  // namespace

std::string canonical_bus_id(const std::string& text) {
  std::string lower;
  for (char c : text)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  const size_t first = lower.find(':');
  if (first == std::string::npos || lower.find(':', first + 1) == std::string::npos)
    return "0000:" + lower;
  const std::string domain = lower.substr(0, first);
  const size_t digits = domain.find_first_not_of('0');
  const std::string value = digits == std::string::npos ? "0" : domain.substr(digits);
  return std::string(value.size() < 4 ? 4 - value.size() : 0, '0') + value + lower.substr(first);
}

Status apply_gpu_order(Topology& topology, const std::vector<std::string>& order) {
  if (order.empty()) return Ok{};
  const size_t count = topology.gpus.size();
  if (order.size() != count) {
    return make_error("gpu_order names " + std::to_string(order.size()) +
                      " GPUs but the node has " + std::to_string(count));
  }
  std::vector<Gpu> reordered;
  std::vector<bool> used(count, false);
  for (const std::string& entry : order) {
    int source = -1;
    if (!parse_index(entry, source)) {
      const std::string wanted = canonical_bus_id(entry);
      for (size_t i = 0; i < count; ++i) {
        if (canonical_bus_id(topology.gpus[i].pci_bus_id) == wanted) {
          source = static_cast<int>(i);
          // Partitions share a bus id: take the next unused one.
          if (!used[i]) break;
        }
      }
      if (source < 0) return make_error("gpu_order entry '" + entry + "' matches no GPU");
    }
    if (source >= static_cast<int>(count)) {
      return make_error("gpu_order entry '" + entry + "' is out of range (node has " +
                        std::to_string(count) + " GPUs)");
    }
    if (used[source]) return make_error("gpu_order names GPU '" + entry + "' twice");
    used[source] = true;
    reordered.push_back(topology.gpus[source]);
    reordered.back().index = static_cast<int>(reordered.size()) - 1;
  }
  topology.gpus = std::move(reordered);
  return Ok{};
}

int nic_ordinal(const Nic& nic) {
  for (const std::string* name : {&nic.rdma, &nic.netdev}) {
    const int number = trailing_number(*name);
    if (number >= 0) return number;
  }
  return nic.index;
}

}  // namespace gpubind
