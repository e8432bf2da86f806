#include "gpubind/cli_args.h"
#include "gpubind/parse.h"

namespace gpubind::cli {

Result<Args> Args::parse(const std::vector<std::string>& argv,
                         const std::set<std::string>& with_value,
                         const std::set<std::string>& switches) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      args.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (switches.count(name)) {
      if (inline_value) return make_error("--" + name + " takes no value");
      args.values_[name] = "";
    } else if (with_value.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argv.size()) return make_error("--" + name + " needs a value");
        inline_value = argv[++i];
      }
      args.values_[name] = *inline_value;
    } else {
      return make_error("unknown option --" + name);
    }
  }
  return args;
}

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

Result<int> Args::get_int(const std::string& flag, int fallback, int min, int max) const {
  auto text = get(flag);
  if (!text) return fallback;
  const auto value = parse_whole_number(*text, min, max);
  if (!value) {
    return make_error("--" + flag + ": expected a whole number from " + std::to_string(min) +
                      " to " + std::to_string(max) + ", got '" + *text + "'");
  }
  return static_cast<int>(*value);
}

}  // namespace gpubind::cli
