// An environment held in a map, read through the launch client's EnvLookup: the tests' stand-in
// for a task's or a launcher's environment.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "gpubind/client/step_env.h"

namespace gpubind::test_support {

using EnvMap = std::map<std::string, std::string>;

inline client::EnvLookup env_lookup(EnvMap vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto found = vars.find(name);
    if (found == vars.end()) return std::nullopt;
    return found->second;
  };
}

}  // namespace gpubind::test_support
