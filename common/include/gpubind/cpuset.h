// A set of OS CPU (hardware thread) indices, with the Linux cpu-list ("0-3,8") and Slurm
// hex-mask ("0xfe") spellings used across gpubind.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpubind/result.h"

namespace gpubind {

class CpuSet {
 public:
  // Highest CPU index accepted from text; far above any node, small enough to reject garbage.
  static constexpr int kMaxCpu = 65535;

  CpuSet() = default;
  static CpuSet of(std::initializer_list<int> cpus);
  static CpuSet range(int first, int last);  // inclusive

  // "0-3,8,10-11"; empty text is the empty set.
  static Result<CpuSet> parse_list(std::string_view text);
  // "0xfe000000000000" or Linux "ff,ffffffff" (32-bit groups); the 0x prefix is optional.
  static Result<CpuSet> parse_mask(std::string_view text);

  void set(int cpu);
  void reset(int cpu);
  bool test(int cpu) const;
  bool empty() const;
  int count() const;
  int first() const;  // -1 when empty
  int last() const;   // -1 when empty
  std::vector<int> to_vector() const;

  CpuSet operator|(const CpuSet& other) const;
  CpuSet operator&(const CpuSet& other) const;
  CpuSet minus(const CpuSet& other) const;
  CpuSet& operator|=(const CpuSet& other);
  bool intersects(const CpuSet& other) const;
  bool is_subset_of(const CpuSet& other) const;
  bool operator==(const CpuSet& other) const;

  std::string to_list() const;  // "49-55"; "" when empty
  std::string to_mask() const;  // "0xfe000000000000"; "0x0" when empty

  template <class F>
  void for_each(F&& fn) const {
    for (size_t w = 0; w < words_.size(); ++w) {
      uint64_t bits = words_[w];
      while (bits) {
        int bit = __builtin_ctzll(bits);
        fn(static_cast<int>(w * 64 + bit));
        bits &= bits - 1;
      }
    }
  }

 private:
  void trim();
  std::vector<uint64_t> words_;
};

// "0,2,4-7" for a sorted or unsorted list of integers (ranks, cores...).
std::string format_int_list(const std::vector<int>& values);

}  // namespace gpubind
