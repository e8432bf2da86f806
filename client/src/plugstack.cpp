#include "gpubind/client/plugstack.h"

#include <glob.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "gpubind/parse.h"

namespace gpubind::client {
namespace {

// The KEY=VALUE pairs of one slurm.conf line as Slurm's parser reads them: keys in any case
// (returned in lower case), spaces allowed around '=', several pairs on a line, a value in
// double quotes may hold spaces.
std::vector<std::pair<std::string, std::string>> slurm_conf_pairs(const std::string& line) {
  std::vector<std::pair<std::string, std::string>> pairs;
  size_t at = 0;
  const auto skip_space = [&] {
    while (at < line.size() && std::isspace(static_cast<unsigned char>(line[at])))
      ++at;
  };
  while (true) {
    skip_space();
    const size_t key_begin = at;
    while (at < line.size() && std::isalnum(static_cast<unsigned char>(line[at])))
      ++at;
    if (at == key_begin) return pairs;
    std::string key = line.substr(key_begin, at - key_begin);
    for (char& c : key)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    skip_space();
    if (at >= line.size() || line[at] != '=') return pairs;
    ++at;
    skip_space();
    std::string value;
    if (at < line.size() && line[at] == '"') {
      const size_t close = line.find('"', at + 1);
      if (close == std::string::npos) return pairs;
      value = line.substr(at + 1, close - at - 1);
      at = close + 1;
    } else {
      const size_t begin = at;
      while (at < line.size() && !std::isspace(static_cast<unsigned char>(line[at])))
        ++at;
      value = line.substr(begin, at - begin);
    }
    pairs.emplace_back(std::move(key), std::move(value));
  }
}

constexpr int kMaxIncludeDepth = 8;

bool loads_gpubind(const std::string& plugin) {
  const size_t slash = plugin.rfind('/');
  return plugin.substr(slash == std::string::npos ? 0 : slash + 1) == "spank_gpubind.so";
}

// `unmatched` collects the include patterns that named no file (SPANK skips them silently).
Result<PlugstackLines> search_file(const std::string& path, int depth,
                                   std::vector<std::string>* unmatched = nullptr) {
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
    const int globbed = glob(pattern.c_str(), 0, nullptr, &found);
    if (globbed != 0 && unmatched) unmatched->push_back(pattern);
    if (globbed == 0) {
      for (size_t i = 0; i < found.gl_pathc; ++i) {
        auto included = search_file(found.gl_pathv[i], depth + 1, unmatched);
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
  const std::string conf = slurm_conf && !slurm_conf->empty() ? *slurm_conf : kSlurmConf;
  std::ifstream slurm(conf);
  std::stringstream text;
  if (slurm) text << slurm.rdbuf();
  const std::string plugstack = plugstack_path_of(conf, text.str());
  std::ifstream probe(plugstack);
  if (!probe) return PlugstackLines{};
  return search_file(plugstack, 0);
}

std::string plugstack_path_of(const std::string& slurm_conf, const std::string& slurm_conf_text) {
  std::istringstream in(slurm_conf_text);
  for (std::string line; std::getline(in, line);) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    for (const auto& [key, value] : slurm_conf_pairs(line))
      if (key == "plugstackconfig" && !value.empty()) return value;
  }
  return slurm_conf.substr(0, slurm_conf.rfind('/') + 1) + "plugstack.conf";
}

std::string why_gpubind_not_loaded(const std::string& plugstack) {
  std::vector<std::string> unmatched;
  auto lines = search_file(plugstack, 0, &unmatched);
  if (!lines) return lines.error().message;
  if (lines->gpubind_args) return "";
  std::string why = "no line (in it or its includes) loads it";
  for (const std::string& pattern : unmatched)
    why += "; include " + pattern + " names no file here";
  return why;
}

}  // namespace gpubind::client
