#include "gpubind/slurm_words.h"

#include <algorithm>

namespace gpubind::slurm {

std::string without_verbosity(const std::string& value) {
  std::string kept;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t end = std::min(value.find(',', start), value.size());
    const std::string word = value.substr(start, end - start);
    if (!word.empty() && word != "verbose" && word != "quiet" && word != "v" && word != "q")
      kept += (kept.empty() ? "" : ",") + word;
    // A list (map_cpu:0,1) keeps its commas: the rest of the text belongs to it.
    if (word.find(':') != std::string::npos) {
      kept += value.substr(end);
      break;
    }
    start = end + 1;
  }
  return kept;
}

}  // namespace gpubind::slurm
