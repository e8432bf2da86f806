#include "gpubind/parse.h"

#include <cctype>
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

std::vector<std::string> split_words(std::string_view line) {
  std::vector<std::string> words;
  size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && std::isspace(static_cast<unsigned char>(line[at])))
      ++at;
    const size_t start = at;
    while (at < line.size() && !std::isspace(static_cast<unsigned char>(line[at])))
      ++at;
    if (at > start) words.emplace_back(line.substr(start, at - start));
  }
  return words;
}

}  // namespace gpubind
