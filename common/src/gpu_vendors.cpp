#include "gpubind/gpu_vendors.h"

#include <algorithm>
#include <vector>

namespace gpubind {
namespace {

// Slurm 22.05-26.05 (gpu plugins' gpu_p_step_hardware_init and common_gres_set_env): CUDA's,
// ROCr's and Level Zero's lists, and GPU_DEVICE_ORDINAL for OpenCL; never HIP's.
// CUDA counts fastest first unless CUDA_DEVICE_ORDER says PCI order; ROCr and Level Zero count
// in PCI order (Level Zero the integrated GPU last).
constexpr GpuVendorRow kRows[] = {
    {Vendor::kNvidia,
     "nvidia",
     0x10de,
     {"CUDA_VISIBLE_DEVICES", true},
     {},
     HideBy::kEmptyList,
     "CUDA_DEVICE_ORDER",
     "PCI_BUS_ID"},
    {Vendor::kAmd,
     "amd",
     0x1002,
     {"ROCR_VISIBLE_DEVICES", true},
     {{{"HIP_VISIBLE_DEVICES", false},
       {"CUDA_VISIBLE_DEVICES", true},
       {"GPU_DEVICE_ORDINAL", true}}},
     HideBy::kEmptyList,
     "",
     ""},
    // compute-runtime reads an empty ZE_AFFINITY_MASK as no mask: every device shows.
    {Vendor::kIntel,
     "intel",
     0x8086,
     {"ZE_AFFINITY_MASK", true},
     {},
     HideBy::kIndexNoDeviceHas,
     "",
     ""},
};

template <bool kSlurmOnly>
std::vector<std::string_view> collect() {
  std::vector<std::string_view> names;
  auto add = [&](const VisibilityVar& var) {
    if (var.name.empty() || (kSlurmOnly && !var.set_by_slurm)) return;
    if (std::find(names.begin(), names.end(), var.name) == names.end()) names.push_back(var.name);
  };
  for (const GpuVendorRow& row : kRows)
    add(row.visibility);
  for (const GpuVendorRow& row : kRows)
    for (const VisibilityVar& var : row.read_after)
      add(var);
  return names;
}

}  // namespace

bool GpuVendorRow::reads_after(std::string_view var) const {
  return std::any_of(read_after.begin(), read_after.end(),
                     [&](const VisibilityVar& v) { return !v.name.empty() && v.name == var; });
}

std::span<const GpuVendorRow> gpu_vendor_rows() {
  return kRows;
}

const GpuVendorRow* gpu_vendor(Vendor vendor) {
  for (const GpuVendorRow& row : kRows)
    if (row.vendor == vendor) return &row;
  return nullptr;
}

const GpuVendorRow* gpu_vendor(std::string_view name) {
  for (const GpuVendorRow& row : kRows)
    if (row.name == name) return &row;
  return nullptr;
}

const GpuVendorRow* gpu_vendor_of_pci(unsigned pci_vendor_id) {
  for (const GpuVendorRow& row : kRows)
    if (row.pci_vendor_id == pci_vendor_id) return &row;
  return nullptr;
}

std::span<const std::string_view> gpu_visibility_vars() {
  static const std::vector<std::string_view> names = collect<false>();
  return names;
}

bool is_gpu_visibility_var(std::string_view name) {
  const auto names = gpu_visibility_vars();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::span<const std::string_view> slurm_visibility_vars() {
  static const std::vector<std::string_view> names = collect<true>();
  return names;
}

std::string hidden_gpus_value(const GpuVendorRow& row, int devices) {
  return row.hide == HideBy::kIndexNoDeviceHas ? std::to_string(std::max(devices, 0)) : "";
}

}  // namespace gpubind
