// Command-line parsing for gpubindctl: "--name value", "--name=value" and boolean switches.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpubind/result.h"

namespace gpubind::cli {

class Args {
 public:
  // `with_value`: flags that take a value; `switches`: flags that do not.
  static Result<Args> parse(const std::vector<std::string>& argv,
                            const std::set<std::string>& with_value,
                            const std::set<std::string>& switches);

  bool has(const std::string& flag) const { return values_.count(flag) > 0; }
  std::optional<std::string> get(const std::string& flag) const;
  const std::vector<std::string>& positional() const { return positional_; }

  // Integer flags: the error names the flag and the bad text.
  Result<int> get_int(const std::string& flag, int fallback, int min, int max) const;

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace gpubind::cli
