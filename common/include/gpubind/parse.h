// Strict number parsing, one rule for every input gpubind reads (flags, plugstack arguments,
// Slurm's variables, cpu lists, the daemon's command line): the whole text, digits only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpubind {

// `text` as an integer from `min` to `max` in `base` (10, 16 or 8); nullopt for anything else:
// empty text, a sign, spaces, a "0x" prefix, trailing characters, a value out of range.
std::optional<long long> parse_whole_number(std::string_view text, long long min, long long max,
                                            int base = 10);

// The words of `line`, split at white space (plugstack.conf lines, /proc/self/mountinfo).
std::vector<std::string> split_words(std::string_view line);

}  // namespace gpubind
