// The calling thread's CPU affinity, as gpubind's CpuSet, and its NUMA memory preference.
#pragma once

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gpubind/cpuset.h"

namespace gpubind {

// Affinity masks sized for the CPUs at hand: a fixed cpu_set_t holds 1024, and the kernel
// refuses a mask smaller than its own CPU count (EINVAL), so a bigger node's masks are allocated
// to fit (CPU_ALLOC), up to CpuSet's own bound.
class AffinityMask {
 public:
  explicit AffinityMask(int cpus)
      : cpus_(cpus), set_(CPU_ALLOC(cpus)), bytes_(CPU_ALLOC_SIZE(cpus)) {
    if (set_) CPU_ZERO_S(bytes_, set_);
  }
  ~AffinityMask() {
    if (set_) CPU_FREE(set_);
  }
  AffinityMask(const AffinityMask&) = delete;
  AffinityMask& operator=(const AffinityMask&) = delete;
  bool valid() const { return set_ != nullptr; }
  int cpus() const { return cpus_; }
  size_t bytes() const { return bytes_; }
  cpu_set_t* get() { return set_; }
  void set(int cpu) { CPU_SET_S(static_cast<size_t>(cpu), bytes_, set_); }
  bool test(int cpu) const { return CPU_ISSET_S(static_cast<size_t>(cpu), bytes_, set_); }

 private:
  int cpus_;
  cpu_set_t* set_;
  size_t bytes_;
};

// The CPU affinity of process `pid` (0: the calling thread), whatever the node's CPU count; empty
// where it cannot be read.
inline CpuSet affinity_of(pid_t pid) {
  CpuSet cpus;
  for (int size = CPU_SETSIZE; size <= CpuSet::kMaxCpu + 1; size *= 2) {
    AffinityMask mask(size);
    if (!mask.valid()) return cpus;
    if (sched_getaffinity(pid, mask.bytes(), mask.get()) == 0) {
      for (int cpu = 0; cpu < size && cpu <= CpuSet::kMaxCpu; ++cpu)
        if (mask.test(cpu)) cpus.set(cpu);
      return cpus;
    }
    if (errno != EINVAL) return cpus;  // EINVAL: the kernel has more CPUs than the mask holds
  }
  return cpus;
}

inline CpuSet current_affinity() {
  return affinity_of(0);
}

inline Status set_affinity(const CpuSet& cpus) {
  if (cpus.empty()) return make_error("CPU set is empty");
  // At least the classic size, doubled while the kernel has more CPUs than the mask (EINVAL;
  // also what it says of CPUs the task may not use, which no size changes).
  int error = EINVAL;
  for (int size = std::max(cpus.last() + 1, static_cast<int>(CPU_SETSIZE));
       size <= 2 * (CpuSet::kMaxCpu + 1); size *= 2) {
    AffinityMask mask(size);
    if (!mask.valid()) return make_error(std::strerror(ENOMEM));
    cpus.for_each([&](int cpu) { mask.set(cpu); });
    if (sched_setaffinity(0, mask.bytes(), mask.get()) == 0) return Ok{};
    error = errno;
    if (error != EINVAL) break;
  }
  return make_error(std::strerror(error));
}

// Linux memory policy: prefer NUMA node `node`, its Linux number (the kernel falls back
// elsewhere when it is full). Fails, naming the node and the kernel's reason, where the kernel
// refuses (a node outside the task's cpuset's memory nodes: EINVAL).
inline Status prefer_numa_node(int node) {
  constexpr int kMaxNodes = 1024;  // the kernel's MAX_NUMNODES on the largest configurations
  if (node < 0 || node >= kMaxNodes)
    return make_error("NUMA node " + std::to_string(node) + " is out of range");
  constexpr int kMpolPreferred = 1;
  constexpr int kBits = 8 * sizeof(unsigned long);
  unsigned long mask[kMaxNodes / kBits] = {};
  mask[node / kBits] |= 1UL << (node % kBits);
  if (syscall(SYS_set_mempolicy, kMpolPreferred, mask, static_cast<unsigned long>(kMaxNodes)) != 0)
    return make_error("the kernel refused NUMA node " + std::to_string(node) +
                      " for memory: " + std::strerror(errno));
  return Ok{};
}

}  // namespace gpubind
