// Where live discovery reads the node's /sys and /proc: HWLOC_FSROOT when set, the variable
// hwloc's own Linux backend honours, so one variable points hwloc and gpubind at a captured tree.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpubind::discovery {

// HWLOC_FSROOT, or "" for the real root.
std::string fs_root();

// A small sysfs/procfs file under `root` (path absolute, e.g. "/sys/..."), whole; nullopt when
// it is missing or unreadable. Files larger than `limit` are cut there (sysfs attributes are one
// page at most; a process's numa_maps or environ may need more).
std::optional<std::string> read_small_file(const std::string& root, const std::string& path,
                                           size_t limit = 64 * 1024);

// The entries of a folder under `root`, sorted, without "." and ".."; empty when unreadable.
std::vector<std::string> list_folder(const std::string& root, const std::string& path);

// Whether `path` under `root` is a folder one can list.
bool is_folder(const std::string& root, const std::string& path);

// `text` without leading and trailing white space.
std::string trimmed(const std::string& text);

// The number after `prefix` in `name` ("gt1" after "gt" is 1), or -1 when `name` is not `prefix`
// followed by digits only.
int number_after_prefix(std::string_view name, std::string_view prefix);

}  // namespace gpubind::discovery
