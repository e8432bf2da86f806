// Each GPU vendor's runtime facts, one row a vendor: which variable its runtime reads first to
// know a task's GPUs, which it reads after that one (counting in the list the first leaves), which
// of them Slurm sets, and how the runtime is made to see none of its GPUs. The planner, the
// launch client, gpubind-run and gpubind-check read them here; a new vendor is a row here plus a
// discovery file under common/src/discovery/ (docs/development.md).
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

#include "gpubind/topology.h"

namespace gpubind {

// How a runtime is made to see none of a vendor's GPUs through its visibility variable.
enum class HideBy {
  kEmptyList,         // an empty list shows no device (CUDA, ROCr)
  kIndexNoDeviceHas,  // an empty value means no mask at all (Level Zero's ZE_AFFINITY_MASK): an
                      // index past every device shows none
};

struct VisibilityVar {
  std::string_view name;
  bool set_by_slurm = false;  // slurmstepd sets it to the task's (or step's) GPUs
};

struct GpuVendorRow {
  Vendor vendor;
  std::string_view name;     // the site policy's selector and the plan's vendor name
  unsigned pci_vendor_id;    // its GPUs' PCI vendor id
  VisibilityVar visibility;  // read first by the vendor's runtime
  // Read after `visibility`, as positions in the list it leaves (on ROCm: HIP's own, CUDA's,
  // which HIP reads where its own is unset, and OpenCL's).
  std::array<VisibilityVar, 3> read_after;
  HideBy hide;
  // The variable and value that make its runtime count GPUs in PCI order, as Slurm and gpubind
  // number them, where it does not by default (set only if unset); empty where it does.
  std::string_view pci_order_var, pci_order_value;

  bool reads_after(std::string_view var) const;
};

std::span<const GpuVendorRow> gpu_vendor_rows();
const GpuVendorRow* gpu_vendor(Vendor vendor);
const GpuVendorRow* gpu_vendor(std::string_view name);
const GpuVendorRow* gpu_vendor_of_pci(unsigned pci_vendor_id);

// Every vendor's visibility variables: each row's first, then those read after it.
std::span<const std::string_view> gpu_visibility_vars();
bool is_gpu_visibility_var(std::string_view name);
// Those Slurm sets, in the order Slurm's own list of the step's GPUs is looked for.
std::span<const std::string_view> slurm_visibility_vars();

// The value of `row`'s visibility variable that shows none of its GPUs on a node where its
// runtime counts `devices` of them.
std::string hidden_gpus_value(const GpuVendorRow& row, int devices);

}  // namespace gpubind
