#include "gpubind/parse.h"

#include <charconv>

namespace gpubind {

std::optional<long long> parse_whole_number(std::string_view text, long long min, long long max,
                                            int base) {
  if (text.empty() || text.front() == '-') return std::nullopt;
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max)
    return std::nullopt;
  return value;
}

}  // namespace gpubind
