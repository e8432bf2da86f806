#include "gpubind/policy.h"

#include <fnmatch.h>

namespace gpubind {

const char* order_name(Order order) {
  return order == Order::kCpu ? "cpu" : "gpu";
}

std::vector<std::string> SitePolicy::default_nic_patterns() {
  // Pattern order decides a NIC's name: hsn0 (not cxi0) on Slingshot, mlx5_0 (not ib0) on IB.
  return {"hsn*", "mlx5_*", "cxi*", "ib*"};
}

std::vector<EnvTemplate> SitePolicy::default_gpu_env() {
  return {
      {"CUDA_VISIBLE_DEVICES", "{gpus}", "nvidia", false},
      {"ROCR_VISIBLE_DEVICES", "{gpus}", "amd", false},
      {"ZE_AFFINITY_MASK", "{gpus}", "intel", false},
  };
}

std::vector<EnvTemplate> SitePolicy::default_nic_env() {
  return {
      // Cray MPICH picks the NIC per local rank from this mapping.
      {"MPICH_OFI_NIC_POLICY", "USER", "slingshot", false},
      {"MPICH_OFI_NIC_MAPPING", "{nic_mapping}", "slingshot", false},
      {"NCCL_SOCKET_IFNAME", "{nic_netdev}", "slingshot", false},
      {"NCCL_IB_HCA", "{nic_rdma}", "infiniband", false},
      {"UCX_NET_DEVICES", "{nic_rdma}:1", "infiniband", false},
      {"NCCL_SOCKET_IFNAME", "{nic_netdev}", "ethernet", false},
      {"UCX_NET_DEVICES", "{nic_netdev}", "ethernet", false},
  };
}

std::vector<EnvTemplate> SitePolicy::default_omp_env() {
  return {{"OMP_NUM_THREADS", "{ncpus}", "", true}};
}

bool glob_match(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

}  // namespace gpubind
