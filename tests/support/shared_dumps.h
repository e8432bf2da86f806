// The real GPU-node dumps beside the checkout (../shared/topologies), for conformance tests.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace gpubind::testing {

inline const std::filesystem::path kSharedDumps = GPUBIND_SHARED_TOPOLOGIES;

// The dumps' file names, sorted; empty when the folder is absent.
inline std::vector<std::string> shared_dump_files() {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kSharedDumps, ec)) {
    if (entry.path().extension() == ".xml") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace gpubind::testing
