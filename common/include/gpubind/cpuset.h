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

  // CPUs outside 0..kMaxCpu are ignored: validate input before
  void set(int cpu) {
    const auto w = static_cast<size_t>(cpu) / 64;
    if (cpu >= 0 && w < size_) {
      data()[w] |= uint64_t{1} << (cpu % 64);
    } else {
      set_beyond(cpu);
    }
  }
  // first..last inclusive, a word at a time: a hostile list of wide ranges costs little.
  void set_range(int first, int last);
  void reset(int cpu);
  bool test(int cpu) const {
    return cpu >= 0 && (word(static_cast<size_t>(cpu) / 64) >> (cpu % 64)) & 1;
  }
  bool empty() const { return size_ == 0; }
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

  std::string to_list() const;               // "49-55"; "" when empty
  void append_list(std::string& out) const;  // to_list() appended to `out`
  std::string to_mask() const;               // "0xfe000000000000"; "0x0" when empty

  template <class F>
  void for_each(F&& fn) const {
    const uint64_t* words = data();
    for (size_t w = 0; w < size_; ++w) {
      uint64_t bits = words[w];
      while (bits) {
        int bit = __builtin_ctzll(bits);
        fn(static_cast<int>(w * 64 + bit));
        bits &= bits - 1;
      }
    }
  }

 private:
  // Nodes up to 256 CPUs need no heap allocation: planning copies and combines many sets.
  static constexpr size_t kInlineWords = 4;

  const uint64_t* data() const { return heap_.empty() ? inline_ : heap_.data(); }
  uint64_t* data() { return heap_.empty() ? inline_ : heap_.data(); }
  uint64_t word(size_t w) const { return w < size_ ? data()[w] : 0; }
  void set_beyond(int cpu);  // set() of a CPU past the current words
  void grow(size_t words);   // size_ >= words, new words zero
  void trim();

  uint64_t inline_[kInlineWords] = {};
  std::vector<uint64_t> heap_;  // used instead of inline_ once more words are needed
  size_t size_ = 0;             // words in use; the last one is non-zero
};

// "0,2,4-7" for a sorted or unsorted list of integers (ranks, cores...).
std::string format_int_list(const std::vector<int>& values);

}  // namespace gpubind
