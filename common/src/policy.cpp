#include "gpubind/policy.h"

#include <fnmatch.h>

#include "gpubind/gpu_vendors.h"

namespace gpubind {

const char* order_name(Order order) {
  return order == Order::kCpu ? "cpu" : "gpu";
}

std::vector<std::string> SitePolicy::default_nic_patterns() {
  // Pattern order decides a NIC's name: hsn0 (not cxi0) on Slingshot, mlx5_0 (not ib0) on IB.
  // hsi*: Slingshot netdevs at some sites (LLNL); rdmap*/efa*: AWS EFA's RDMA devices.
  return {"hsn*", "mlx5_*", "hsi*", "cxi*", "ib*", "rdmap*", "efa*"};
}

// Why each default is what it is, with sources: docs/environment.md.
// Each vendor's visibility variable with the task's GPUs, and where its runtime does not count in
// PCI order by default (CUDA: fastest first), the variable that makes it (only if unset): the
// vendor table's (gpu_vendors.h).
// No ZE_ENABLE_PCI_ID_DEVICE_ORDER: Level Zero already counts discrete cards in PCI order and the
// integrated GPU after them, as gpubind numbers them; the variable would move an integrated GPU
// to device 0. No HIP_VISIBLE_DEVICES: frameworks disagree on it (a site chooses with
// {gpu_ordinals}). No CCL_WORKER_AFFINITY by default: oneCCL aborts when the list is shorter than
// its local processes times CCL_WORKER_COUNT, which a plan cannot know ({ccl_worker_affinity}).
std::vector<EnvTemplate> SitePolicy::default_gpu_env() {
  std::vector<EnvTemplate> env;
  for (const GpuVendorRow& row : gpu_vendor_rows()) {
    env.push_back({std::string(row.visibility.name), "{gpus}", std::string(row.name), false});
    if (!row.pci_order_var.empty()) {
      env.push_back({std::string(row.pci_order_var), std::string(row.pci_order_value),
                     std::string(row.name), true});
    }
  }
  return env;
}

std::vector<EnvTemplate> SitePolicy::default_nic_env() {
  // Only if unset: a user's or a module's own choice wins. No NCCL_IB_HCA and no per-task
  // NCCL_SOCKET_IFNAME: NCCL finds each GPU's nearest NIC itself, and its variables must be the
  // same in every rank of a node.
  return {
      // Cray MPICH picks the NIC per local rank from this mapping.
      {"MPICH_OFI_NIC_POLICY", "USER", "slingshot", true},
      {"MPICH_OFI_NIC_MAPPING", "{nic_mapping}", "slingshot", true},
      {"UCX_NET_DEVICES", "{nics_ucx}", "infiniband", true},
      {"NCCL_SOCKET_IFNAME", "{node_nics_netdev}", "ethernet", true},
      {"UCX_NET_DEVICES", "{nics_ucx}", "ethernet", true},
  };
}

std::vector<EnvTemplate> SitePolicy::default_omp_env() {
  return {{"OMP_NUM_THREADS", "{omp_threads}", "", true}};
}

bool glob_match(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

}  // namespace gpubind
