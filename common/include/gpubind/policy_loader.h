// Reads a site policy written in protobuf text format (message gpubind.SitePolicy, proto/).
// Every error names the file, the line and the field.
#pragma once

#include <string>
#include <string_view>

#include "gpubind/policy.h"
#include "gpubind/result.h"

namespace gpubind {

// SitePolicy files larger than this are refused (a policy is a few hundred bytes).
inline constexpr size_t kMaxPolicyBytes = 1 << 20;

Result<SitePolicy> parse_policy(std::string_view text, const std::string& source_name);
Result<SitePolicy> load_policy_file(const std::string& path);

}  // namespace gpubind
