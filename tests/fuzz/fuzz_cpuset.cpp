// CPU lists and masks from arbitrary text: never crash, and what parses renders back to itself.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpubind/cpuset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto list = gpubind::CpuSet::parse_list(text)) {
    auto again = gpubind::CpuSet::parse_list(list->to_list());
    if (!again || !(*again == *list)) std::abort();
    auto from_mask = gpubind::CpuSet::parse_mask(list->to_mask());
    if (!from_mask || !(*from_mask == *list)) std::abort();
  }
  if (auto mask = gpubind::CpuSet::parse_mask(text)) {
    auto again = gpubind::CpuSet::parse_mask(mask->to_mask());
    if (!again || !(*again == *mask)) std::abort();
  }
  return 0;
}
