// The words of `gpubindctl explain`: a plan and the planner's recorded reasons (explain.h), as
// text for people and as JSON whose entries carry the same sentences beside the data.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpubind/explain.h"
#include "gpubind/planner.h"
#include "gpubind/topology.h"

namespace gpubind {

// Where each top-level field of the policy file is written: its lines, in order (the i-th
// gpu_env entry is on the i-th line listed). Empty: the built-in defaults, or lines unknown.
using PolicyLines = std::map<std::string, std::vector<int>>;

// The fields of a policy file's text and their lines (protobuf text format, one top-level field
// per line as the shipped policies write them).
PolicyLines policy_field_lines(const std::string& text);

// `rank`: only that local task (the step-wide part is still shown); nullopt: every task.
std::string explain_to_text(const Topology& topology, const Plan& plan,
                            const PlanExplanation& explanation, std::optional<int> rank,
                            const PolicyLines& lines = {});
std::string explain_to_json(const Topology& topology, const Plan& plan,
                            const PlanExplanation& explanation, std::optional<int> rank,
                            const PolicyLines& lines = {});

}  // namespace gpubind
