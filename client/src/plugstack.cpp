#include "gpubind/client/plugstack.h"

#include <glob.h>

#include <fstream>
#include <sstream>

#include "gpubind/parse.h"

namespace gpubind::client {
namespace {

constexpr int kMaxIncludeDepth = 8;

bool loads_gpubind(const std::string& plugin) {
  const size_t slash = plugin.rfind('/');
  return plugin.substr(slash == std::string::npos ? 0 : slash + 1) == "spank_gpubind.so";
}

Result<PlugstackLines> search_file(const std::string& path, int depth) {
  std::ifstream in(path);
  if (!in) return make_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  PlugstackLines lines = read_plugstack_text(text.str());
  if (lines.gpubind_args) return lines;
  if (depth >= kMaxIncludeDepth)
    return make_error(path + ": includes nest deeper than " + std::to_string(kMaxIncludeDepth));
  const std::string folder = path.substr(0, path.rfind('/') + 1);
  for (std::string pattern : lines.includes) {
    if (pattern.front() != '/') pattern = folder + pattern;
    glob_t found{};
    if (glob(pattern.c_str(), 0, nullptr, &found) == 0) {
      for (size_t i = 0; i < found.gl_pathc; ++i) {
        auto included = search_file(found.gl_pathv[i], depth + 1);
        if (!included || included->gpubind_args) {
          globfree(&found);
          return included;
        }
      }
    }
    globfree(&found);
  }
  return PlugstackLines{};
}

}  // namespace

PlugstackLines read_plugstack_text(const std::string& text) {
  PlugstackLines out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    const std::vector<std::string> words = split_words(line);
    if (words.size() >= 2 && words[0] == "include") {
      out.includes.push_back(words[1]);
    } else if (words.size() >= 2 && (words[0] == "required" || words[0] == "optional") &&
               loads_gpubind(words[1]) && !out.gpubind_args) {
      out.plugin = words[1];
      out.gpubind_args = std::vector<std::string>(words.begin() + 2, words.end());
    }
  }
  return out;
}

Result<PlugstackLines> gpubind_plugstack_line(const std::optional<std::string>& path,
                                              const std::optional<std::string>& slurm_conf) {
  if (path) return search_file(*path, 0);
  std::string folder = "/etc/slurm/";
  if (slurm_conf && !slurm_conf->empty())
    folder = slurm_conf->substr(0, slurm_conf->rfind('/') + 1);
  const std::string fallback = folder + "plugstack.conf";
  std::ifstream probe(fallback);
  if (!probe) return PlugstackLines{};
  return search_file(fallback, 0);
}

}  // namespace gpubind::client
