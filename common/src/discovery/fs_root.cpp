#include "gpubind/discovery/fs_root.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "gpubind/parse.h"

namespace gpubind::discovery {

std::string fs_root() {
  const char* root = std::getenv("HWLOC_FSROOT");
  if (!root || std::strcmp(root, "/") == 0) return "";
  std::string path = root;
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

std::optional<std::string> read_small_file(const std::string& root, const std::string& path,
                                           size_t limit) {
  const int fd = ::open((root + path).c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  while (text.size() < limit) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (got == 0) break;
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  if (text.size() > limit) text.resize(limit);
  return text;
}

std::vector<std::string> list_folder(const std::string& root, const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = ::opendir((root + path).c_str());
  if (!dir) return names;
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0)
      names.emplace_back(entry->d_name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

bool is_folder(const std::string& root, const std::string& path) {
  DIR* dir = ::opendir((root + path).c_str());
  if (!dir) return false;
  ::closedir(dir);
  return true;
}

std::string trimmed(const std::string& text) {
  const char* space = " \t\r\n";
  const size_t first = text.find_first_not_of(space);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

int number_after_prefix(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) return -1;
  const auto value = parse_whole_number(name.substr(prefix.size()), 0, 1 << 20);
  return value ? static_cast<int>(*value) : -1;
}

}  // namespace gpubind::discovery
