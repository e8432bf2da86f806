// The calling thread's CPU affinity, as gpubind's CpuSet, and its NUMA memory preference.
#pragma once

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpubind/cpuset.h"

namespace gpubind {

// The CPU affinity of process `pid` (0: the calling thread); empty where it cannot be read.
inline CpuSet affinity_of(pid_t pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CpuSet cpus;
  if (sched_getaffinity(pid, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.set(cpu);
  }
  return cpus;
}

inline CpuSet current_affinity() {
  return affinity_of(0);
}

inline Status set_affinity(const CpuSet& cpus) {
  if (cpus.empty() || cpus.last() >= CPU_SETSIZE) {
    return make_error("CPU set '" + cpus.to_list() + "' is empty or beyond " +
                      std::to_string(CPU_SETSIZE) + " CPUs");
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  cpus.for_each([&](int cpu) { CPU_SET(cpu, &set); });
  if (sched_setaffinity(0, sizeof set, &set) != 0) return make_error(std::strerror(errno));
  return Ok{};
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
