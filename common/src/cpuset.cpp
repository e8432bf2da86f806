#include "gpubind/cpuset.h"
#include "gpubind/parse.h"
#include "gpubind/printable.h"

#include <algorithm>
#include <charconv>
#include <climits>

namespace gpubind {
namespace {

Result<int> parse_cpu_number(std::string_view token, std::string_view whole) {
  const auto number = parse_whole_number(token, 0, LLONG_MAX);
  if (!number) {
    return make_error("invalid cpu list '" + excerpt(whole) + "': '" + excerpt(token) +
                      "' is not a CPU number");
  }
  if (*number > CpuSet::kMaxCpu) {
    return make_error("invalid cpu list '" + excerpt(whole) + "': CPU " + excerpt(token) +
                      " is out of range (0-" + std::to_string(CpuSet::kMaxCpu) + ")");
  }
  return static_cast<int>(*number);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view strip(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

CpuSet CpuSet::of(std::initializer_list<int> cpus) {
  CpuSet set;
  for (int cpu : cpus)
    set.set(cpu);
  return set;
}

CpuSet CpuSet::range(int first, int last) {
  CpuSet set;
  set.set_range(first, last);
  return set;
}

Result<CpuSet> CpuSet::parse_list(std::string_view text) {
  const std::string_view whole = strip(text);
  CpuSet set;
  std::string_view rest = whole;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = strip(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) {
      return make_error("invalid cpu list '" + excerpt(whole) + "': empty item");
    }
    const size_t dash = item.find('-');
    auto first = parse_cpu_number(item.substr(0, dash), whole);
    if (!first) return first.error();
    int last = *first;
    if (dash != std::string_view::npos) {
      auto parsed_last = parse_cpu_number(item.substr(dash + 1), whole);
      if (!parsed_last) return parsed_last.error();
      last = *parsed_last;
      if (last < *first) {
        return make_error("invalid cpu list '" + excerpt(whole) + "': range '" + excerpt(item) +
                          "' runs backwards");
      }
    }
    set.set_range(*first, last);
  }
  return set;
}

Result<CpuSet> CpuSet::parse_mask(std::string_view text) {
  std::string_view digits = strip(text);
  const std::string whole(digits);
  if (digits.size() >= 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
  }
  // Linux writes masks as comma-separated 32-bit groups; every group but the first is full.
  std::string hex;
  size_t group_start = 0;
  for (size_t i = 0; i <= digits.size(); ++i) {
    if (i == digits.size() || digits[i] == ',') {
      const size_t group_len = i - group_start;
      if (group_len == 0 || (group_start > 0 && group_len != 8)) {
        return make_error("invalid cpu mask '" + excerpt(whole) +
                          "': comma-separated groups must be 8 hex digits");
      }
      hex.append(digits.substr(group_start, group_len));
      group_start = i + 1;
    }
  }
  if (hex.empty()) return make_error("invalid cpu mask '" + excerpt(whole) + "': no hex digits");
  CpuSet set;
  int cpu = 0;
  for (auto it = hex.rbegin(); it != hex.rend(); ++it, cpu += 4) {
    const int nibble = hex_digit(*it);
    if (nibble < 0) {
      return make_error("invalid cpu mask '" + excerpt(whole) + "': '" + std::string(1, *it) +
                        "' is not a hex digit");
    }
    if (nibble != 0 && cpu + 3 > kMaxCpu) {
      return make_error("invalid cpu mask '" + excerpt(whole) + "': CPUs beyond " +
                        std::to_string(kMaxCpu));
    }
    for (int bit = 0; bit < 4; ++bit) {
      if (nibble & (1 << bit)) set.set(cpu + bit);
    }
  }
  return set;
}

void CpuSet::grow(size_t words) {
  if (words <= size_) return;
  if (heap_.empty() && words > kInlineWords) {
    heap_.assign(inline_, inline_ + kInlineWords);
  }
  if (!heap_.empty()) heap_.resize(std::max(words, heap_.size()), 0);
  size_ = words;
}

void CpuSet::trim() {
  const uint64_t* words = data();
  while (size_ > 0 && words[size_ - 1] == 0)
    --size_;
}

void CpuSet::set_beyond(int cpu) {
  if (cpu < 0 || cpu > kMaxCpu) return;  // callers validate; never allocate for garbage
  const size_t w = static_cast<size_t>(cpu) / 64;
  grow(w + 1);
  data()[w] |= uint64_t{1} << (cpu % 64);
}

void CpuSet::set_range(int first, int last) {
  first = std::max(first, 0);
  last = std::min(last, kMaxCpu);
  if (first > last) return;
  const size_t first_word = static_cast<size_t>(first) / 64;
  const size_t last_word = static_cast<size_t>(last) / 64;
  grow(last_word + 1);
  uint64_t* words = data();
  const uint64_t from_first = ~uint64_t{0} << (first % 64);
  const uint64_t to_last = ~uint64_t{0} >> (63 - last % 64);
  if (first_word == last_word) {
    words[first_word] |= from_first & to_last;
    return;
  }
  words[first_word] |= from_first;
  for (size_t w = first_word + 1; w < last_word; ++w)
    words[w] = ~uint64_t{0};
  words[last_word] |= to_last;
}

void CpuSet::reset(int cpu) {
  const size_t w = static_cast<size_t>(cpu) / 64;
  if (w >= size_) return;
  data()[w] &= ~(uint64_t{1} << (cpu % 64));
  trim();
}

namespace {

// Bits set in a word. The packages build for x86-64 without POPCNT, where the builtin is a call
// into libgcc's table loop; this is a dozen inline instructions (and POPCNT where allowed).
int bits_in(uint64_t w) {
#if defined(__POPCNT__)
  return __builtin_popcountll(w);
#else
  w = w - ((w >> 1) & 0x5555555555555555ULL);
  w = (w & 0x3333333333333333ULL) + ((w >> 2) & 0x3333333333333333ULL);
  w = (w + (w >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return static_cast<int>((w * 0x0101010101010101ULL) >> 56);
#endif
}

}  // namespace

int CpuSet::count() const {
  int total = 0;
  for (size_t w = 0; w < size_; ++w)
    total += bits_in(data()[w]);
  return total;
}

int CpuSet::first() const {
  for (size_t w = 0; w < size_; ++w) {
    if (data()[w]) return static_cast<int>(w * 64 + __builtin_ctzll(data()[w]));
  }
  return -1;
}

int CpuSet::last() const {
  if (size_ == 0) return -1;
  const size_t w = size_ - 1;
  return static_cast<int>(w * 64 + 63 - __builtin_clzll(data()[w]));
}

std::vector<int> CpuSet::to_vector() const {
  std::vector<int> cpus;
  cpus.reserve(count());
  for_each([&](int cpu) { cpus.push_back(cpu); });
  return cpus;
}

CpuSet CpuSet::operator|(const CpuSet& other) const {
  CpuSet result = *this;
  result |= other;
  return result;
}

CpuSet& CpuSet::operator|=(const CpuSet& other) {
  grow(other.size_);
  uint64_t* words = data();
  for (size_t w = 0; w < other.size_; ++w)
    words[w] |= other.data()[w];
  return *this;
}

CpuSet CpuSet::operator&(const CpuSet& other) const {
  CpuSet result;
  result.grow(std::min(size_, other.size_));
  for (size_t w = 0; w < result.size_; ++w)
    result.data()[w] = data()[w] & other.data()[w];
  result.trim();
  return result;
}

CpuSet CpuSet::minus(const CpuSet& other) const {
  CpuSet result = *this;
  for (size_t w = 0; w < std::min(size_, other.size_); ++w)
    result.data()[w] &= ~other.data()[w];
  result.trim();
  return result;
}

bool CpuSet::intersects(const CpuSet& other) const {
  for (size_t w = 0; w < std::min(size_, other.size_); ++w) {
    if (data()[w] & other.data()[w]) return true;
  }
  return false;
}

bool CpuSet::is_subset_of(const CpuSet& other) const {
  for (size_t w = 0; w < size_; ++w) {
    if (data()[w] & ~other.word(w)) return false;
  }
  return true;
}

bool CpuSet::operator==(const CpuSet& other) const {
  if (size_ != other.size_) return false;
  for (size_t w = 0; w < size_; ++w) {
    if (data()[w] != other.data()[w]) return false;
  }
  return true;
}

std::string CpuSet::to_list() const {
  std::string text;
  append_list(text);
  return text;
}

void CpuSet::append_list(std::string& text) const {
  const size_t start = text.size();
  char number[16];
  auto append = [&](int value) {
    const auto [end, ec] = std::to_chars(number, number + sizeof number, value);
    text.append(number, static_cast<size_t>(end - number));  // (iterators: a slow replace)
  };
  int run_start = -1, previous = -2;
  auto close_run = [&] {
    if (run_start < 0) return;
    if (text.size() > start) text.push_back(',');
    append(run_start);
    if (previous > run_start) {
      text.push_back('-');
      append(previous);
    }
  };
  for_each([&](int cpu) {
    if (cpu != previous + 1) {
      close_run();
      run_start = cpu;
    }
    previous = cpu;
  });
  close_run();
}

std::string CpuSet::to_mask() const {
  if (size_ == 0) return "0x0";
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  bool leading = true;
  for (size_t w = size_; w-- > 0;) {
    for (int shift = 60; shift >= 0; shift -= 4) {
      const int nibble = static_cast<int>((data()[w] >> shift) & 0xf);
      if (leading && nibble == 0) continue;
      leading = false;
      hex.push_back(kDigits[nibble]);
    }
  }
  return "0x" + hex;
}

std::string format_int_list(const std::vector<int>& unsorted) {
  std::vector<int> values = unsorted;
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::string text;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1)
      ++j;
    if (!text.empty()) text.push_back(',');
    text += std::to_string(values[i]);
    if (j > i) text += "-" + std::to_string(values[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace gpubind
