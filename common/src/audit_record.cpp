#include "gpubind/audit_record.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "gpubind/parse.h"

namespace gpubind::audit {
namespace {

// The characters that delimit the AdminComment's part and the record's lines: never inside one.
std::string without_delimiters(std::string_view text) {
  std::string clean(text);
  for (char& c : clean)
    if (c == '{' || c == '}' || c == '|' || c == '\n' || c == '\r') c = '_';
  return clean;
}

// Orders lines by node, then step: numbered steps in number order, then named ones (batch, ...).
struct LineKey {
  std::string node;
  long long number = -1;
  std::string step;
  bool operator<(const LineKey& other) const {
    return std::tie(node, number, step) < std::tie(other.node, other.number, other.step);
  }
};

// "n1: step 0: ..." -> {n1, 0, "0"}; nullopt for a line of another form.
std::optional<LineKey> key_of(std::string_view line) {
  const size_t node_end = line.find(": step ");
  if (node_end == std::string_view::npos || node_end == 0) return std::nullopt;
  const size_t step_begin = node_end + 7;
  const size_t step_end = line.find(": ", step_begin);
  if (step_end == std::string_view::npos || step_end == step_begin) return std::nullopt;
  LineKey key{std::string(line.substr(0, node_end)), -1,
              std::string(line.substr(step_begin, step_end - step_begin))};
  // Steps past 2^32 are Slurm's named ones written as numbers: the range keeps them apart.
  if (const auto number = parse_whole_number(key.step, 0, 0xFFFFFFFFLL)) key.number = *number;
  if (key.number < 0) key.number = 0x100000000LL;
  return key;
}

std::vector<std::string_view> split(std::string_view text, std::string_view separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + separator.size());
  }
}

std::string cut(std::string text, size_t limit) {
  if (text.size() > limit) text = text.substr(0, limit - 3) + "...";
  return text;
}

}  // namespace

std::string record_line(const StepAudit& step, std::string_view node) {
  std::string text = describe_step(step);  // "job 123 step 0: 2 tasks: ..."
  text = text.substr(text.find(" step ") + 1);
  return without_delimiters(std::string(node) + ": " + text);
}

std::string merge_record(std::string_view previous, const std::vector<std::string>& now) {
  std::map<LineKey, std::string> lines;
  for (std::string_view line : split(previous, "\n"))
    if (const auto key = key_of(line)) lines[*key] = line;
  for (const std::string& line : now)
    if (const auto key = key_of(line)) lines[*key] = line;
  std::string record;
  for (const auto& [key, line] : lines)
    record += line + "\n";
  return record;
}

std::string merge_admin_comment(std::string_view comment, std::string_view record) {
  static constexpr std::string_view kOpen = "gpubind{";
  std::string before(comment), after;
  std::map<std::string, std::string> nodes;  // node -> "n1: step 0: ... / step 1: ..."
  int hidden = 0;                            // nodes counted, not shown
  if (const size_t open = comment.find(kOpen); open != std::string_view::npos) {
    const size_t close = comment.find('}', open);
    const size_t inner = open + kOpen.size();
    before = comment.substr(0, open);
    after = close == std::string_view::npos ? "" : std::string(comment.substr(close + 1));
    const std::string_view part = comment.substr(
        inner, close == std::string_view::npos ? std::string_view::npos : close - inner);
    for (std::string_view entry : split(part, " | ")) {
      if (entry.starts_with("+")) {
        hidden += static_cast<int>(
            parse_whole_number(entry.substr(1, entry.find(' ') - 1), 0, 1 << 30).value_or(0));
      } else if (const size_t colon = entry.find(": "); colon != std::string_view::npos) {
        nodes[std::string(entry.substr(0, colon))] = entry;
      }
    }
  }
  // The record's lines, a node's steps joined (merge_record keeps them in order).
  std::map<std::string, std::string> recorded;
  const std::string ordered = merge_record(record, {});
  for (std::string_view line : split(ordered, "\n")) {
    const auto key = key_of(line);
    if (!key) continue;
    std::string& entry = recorded[key->node];
    entry +=
        entry.empty() ? std::string(line) : " / " + std::string(line.substr(key->node.size() + 2));
  }
  for (auto& [node, entry] : recorded)
    nodes[node] = cut(without_delimiters(entry), kNodeEntryLimit);

  std::string part;
  for (const auto& [node, entry] : nodes) {
    if (kOpen.size() + part.size() + entry.size() + 40 > kAdminCommentLimit) {
      ++hidden;
      continue;
    }
    part += (part.empty() ? "" : " | ") + entry;
  }
  if (hidden > 0)
    part += (part.empty() ? "+" : " | +") + std::to_string(hidden) + " nodes not shown";
  if (!before.empty() && !before.ends_with(' ') && comment.find(kOpen) == std::string_view::npos)
    before += ' ';
  return before + std::string(kOpen) + part + "}" + after;
}

}  // namespace gpubind::audit
