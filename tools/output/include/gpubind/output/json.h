// JSON for the tools' machine-readable output (nlohmann::json): keys stay in the order written,
// numbers are printed exactly (1234567.5, not 1.23457e+06), text that is not UTF-8 is replaced
// rather than refused (environment values are arbitrary bytes).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gpubind::output {

using Json = nlohmann::ordered_json;

// One line, no spaces.
inline std::string to_text(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace gpubind::output
