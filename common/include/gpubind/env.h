// Environment templates: "{gpus}"-style placeholders filled per task by the planner.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpubind/result.h"

namespace gpubind {

// Every placeholder a template may use. Documented in docs/policy.md.
enum class Placeholder {
  kGpus,            // the task's GPU visibility tokens, "0,1" or tiles "0.1"
  kGpuPci,          // PCI bus ids of the task's GPUs
  kNgpus,           // number of GPU tokens
  kGpuOrdinals,     // "0,1,...,k-1": the task's k GPU devices as numbered once narrowed to them
  kNic,             // the task's first NIC: name (first pattern match), e.g. hsn0 or mlx5_0
  kNicNetdev,       // network interface of that NIC, e.g. hsn0 / ib0
  kNicRdma,         // RDMA device of that NIC, e.g. cxi0 / mlx5_0
  kNicIndex,        // that NIC's ordinal (N of cxiN / mlx5_N)
  kNicMapping,      // Cray MPICH's NIC per local rank, "0:0-1; 1:2-3" (MPICH's NIC numbering)
  kNics,            // every NIC of the task (the nearest of each of its GPUs), "mlx5_0,mlx5_3"
  kNicsNetdev,      // their network interfaces, "ib0,ib3"
  kNicsRdma,        // their RDMA devices, "mlx5_0,mlx5_3"
  kNicsUcx,         // their UCX device names, "mlx5_0:1,mlx5_3:1" (netdev where no RDMA device)
  kNodeNics,        // every NIC of the node that nic_patterns select, the same in every task
  kNodeNicsNetdev,  // their network interfaces, "hsn0,hsn1,hsn2,hsn3"
  kNodeNicsRdma,    // their RDMA devices, "mlx5_0,mlx5_1,..."
  kOmpThreads,      // threads per worker: the task's CPUs, divided by its GPUs when it has several
  kCclWorkerAffinity,  // oneCCL: one CPU per local rank, from each task's own set, node-wide
  kCpus,               // CPU list, "49-55"
  kCpuMask,            // CPU hex mask, "0xfe000000000000"
  kNcpus,              // number of CPUs (hardware threads)
  kNcores,             // number of cores
  kNuma,               // NUMA node of most of the task's CPUs
  kL3,                 // L3 index of most of the task's CPUs
  kLocalRank,          // node-local rank
  kNtasks,             // tasks of the step on this node
  kCount
};

inline constexpr std::array<const char*, static_cast<size_t>(Placeholder::kCount)>
    kPlaceholderNames = {"gpus",           "gpu_pci",     "ngpus",
                         "gpu_ordinals",   "nic",         "nic_netdev",
                         "nic_rdma",       "nic_index",   "nic_mapping",
                         "nics",           "nics_netdev", "nics_rdma",
                         "nics_ucx",       "node_nics",   "node_nics_netdev",
                         "node_nics_rdma", "omp_threads", "ccl_worker_affinity",
                         "cpus",           "cpu_mask",    "ncpus",
                         "ncores",         "numa",        "l3",
                         "local_rank",     "ntasks"};

// The variables every bound task gets about its binding (GPUBIND_BOUND marks it bound).
inline constexpr std::array<const char*, 7> kBindingInfoVars = {
    "GPUBIND_BOUND",   "GPUBIND_LOCAL_RANK", "GPUBIND_CPUS", "GPUBIND_GPUS",
    "GPUBIND_GPU_PCI", "GPUBIND_NIC",        "GPUBIND_NUMA"};

// Values of every placeholder for one task.
using PlaceholderValues = std::array<std::string, static_cast<size_t>(Placeholder::kCount)>;

// Checks braces and placeholder names; the error names the template and the fault.
Status validate_template(std::string_view value);

// Supplies placeholder values on demand, so a task computes only what its templates use.
class PlaceholderSource {
 public:
  virtual ~PlaceholderSource() = default;
  // The value, or an empty string when it does not apply to this task.
  virtual const std::string& get(Placeholder placeholder) = 0;
};

// Values given in full beforehand.
class FixedPlaceholders : public PlaceholderSource {
 public:
  explicit FixedPlaceholders(const PlaceholderValues& values) : values_(values) {}
  const std::string& get(Placeholder p) override { return values_[static_cast<size_t>(p)]; }

 private:
  const PlaceholderValues& values_;
};

// A template parsed once, to be filled for many tasks: literal text and placeholders in turn.
class CompiledTemplate {
 public:
  explicit CompiledTemplate(std::string_view value);
  // As render_template below.
  std::optional<std::string> render(PlaceholderSource& source) const;
  // Whether the template uses `placeholder`.
  bool uses(Placeholder placeholder) const;
  // Appends the filled template to `out` (a std::string or an EnvList::ValueWriter); false
  // (with `out` partly written) where render gives nullopt. `source` is a PlaceholderSource;
  // a final one is called directly.
  template <class Source, class Out>
  bool render_to(Source& source, Out& out) const {
    if (malformed_) return false;
    for (const Part& part : parts_) {
      out.append(part.literal);
      if (part.unknown) return false;
      if (part.placeholder < 0) continue;
      const std::string& filled = source.get(static_cast<Placeholder>(part.placeholder));
      if (filled.empty()) return false;
      out.append(std::string_view(filled));
    }
    return true;
  }

 private:
  struct Part {
    std::string_view literal;  // text before the placeholder (views the template's own storage)
    int placeholder = -1;      // -1: none (the last part), or an unknown name
    bool unknown = false;
  };
  std::vector<Part> parts_;
  bool malformed_ = false;  // an unclosed brace: never renders
};

// Fills a template. nullopt when it uses a placeholder that is empty for this task (the variable
// is then not set). Templates are validated at policy load, so unknown names render as empty.
std::optional<std::string> render_template(std::string_view value, PlaceholderSource& source);
std::optional<std::string> render_template(std::string_view value, const PlaceholderValues& values);

}  // namespace gpubind
