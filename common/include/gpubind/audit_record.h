// What the audit keeps of a job after its tasks have ended: a record on the node (one line per
// step it saw, the last reading of each), and the job's binding summary in Slurm's accounting
// (its AdminComment), where every node of the job adds its own entry and keeps the others' and
// whatever else the site's tools wrote there. Pure: text in, text out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpubind/audit.h"

namespace gpubind::audit {

// "n1: step 0: 2 tasks: 2 as-planned": one step on node NODE, as a record line.
std::string record_line(const StepAudit& step, std::string_view node);

// The record after a new reading: the lines of `now` replace those of the same node and step in
// `previous`; the steps no longer running keep their last line. Lines in node and step order.
std::string merge_record(std::string_view previous, const std::vector<std::string>& now);

// The job's AdminComment with the record's nodes in its gpubind part:
//   gpubind{n1: step 0: 2 tasks: 2 as-planned / step 1: ... | n2: ...}
// Nodes separated by " | ", a node's steps by " / ". Text outside the braces is kept as it is;
// a node already there is replaced. The part stays under kAdminCommentLimit characters: nodes
// past it are counted ("+3 nodes not shown"), a node's entry is cut at kNodeEntryLimit.
inline constexpr size_t kAdminCommentLimit = 8192;
inline constexpr size_t kNodeEntryLimit = 600;
std::string merge_admin_comment(std::string_view comment, std::string_view record);

}  // namespace gpubind::audit
