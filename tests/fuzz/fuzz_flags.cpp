// The plugin's --gpu-bind-auto flags and plugstack arguments from arbitrary text.
#include <cstdint>
#include <string>
#include <vector>

#include "gpubind/client/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)gpubind::client::parse_user_flags(text);
  std::vector<std::string> args;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t space = text.find(' ', start);
    args.push_back(text.substr(start, space - start));
    if (space == std::string::npos) break;
    start = space + 1;
  }
  (void)gpubind::client::parse_site_args(args);
  return 0;
}
