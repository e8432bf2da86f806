// Policy files from arbitrary text: parse or refuse with a message naming the source.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpubind/policy_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto policy = gpubind::parse_policy(text, "fuzz.conf");
  if (!policy && policy.error().message.rfind("fuzz.conf", 0) != 0) std::abort();
  return 0;
}
