#include "report.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "gpubind/json.h"

namespace gpubind::quality {
namespace {

struct Totals {
  int cases = 0;
  int tasks = 0;
  int straddles = 0;
  double worst_ratio = 0;
  int on_gpu_locality = 0;
  int locality_counted = 0;
  double cores_used_min = 1;
  double cores_used_mean = 0;
  int nic_not_nearest = 0;
  int violations = 0;
};

Totals totals_of(const DumpReport& dump) {
  Totals t;
  for (const CaseScore& c : dump.cases) {
    ++t.cases;
    t.tasks += c.tasks;
    t.straddles += c.straddles;
    t.worst_ratio = std::max(t.worst_ratio, c.worst_ratio);
    t.on_gpu_locality += c.on_gpu_locality;
    t.locality_counted += c.locality_counted;
    t.cores_used_min = std::min(t.cores_used_min, c.cores_used);
    t.cores_used_mean += c.cores_used;
    t.nic_not_nearest += c.nic_not_nearest;
    t.violations += static_cast<int>(c.violations.size());
  }
  if (t.cases > 0) t.cores_used_mean /= t.cases;
  return t;
}

std::string format(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

std::string percent(double fraction) {
  return format("%.0f%%", 100 * fraction);
}

std::string timing_cell(const std::optional<PlanTiming>& timing) {
  return timing ? format("%.1f", timing->median_us) : "-";
}

std::string markdown_row(const DumpReport& dump) {
  const Totals t = totals_of(dump);
  const std::string locality =
      t.locality_counted
          ? percent(static_cast<double>(t.on_gpu_locality) / t.locality_counted) + " (" +
                std::to_string(t.on_gpu_locality) + "/" + std::to_string(t.locality_counted) + ")"
          : "-";
  const std::vector<std::string> cells = {
      dump.name,
      std::to_string(dump.gpus),
      std::to_string(dump.nics),
      std::to_string(dump.cores),
      std::to_string(t.cases),
      std::to_string(t.straddles),
      t.worst_ratio > 0 ? format("%.2f", t.worst_ratio) : "-",
      locality,
      t.cases ? percent(t.cores_used_min) + " / " + percent(t.cores_used_mean) : "-",
      dump.nics && dump.gpus ? std::to_string(t.nic_not_nearest) : "-",
      timing_cell(dump.time_one_per_gpu),
      timing_cell(dump.time_one_per_core),
      std::to_string(t.violations)};
  std::string row = "|";
  for (const std::string& cell : cells)
    row += " " + cell + " |";
  return row + "\n";
}

std::map<std::string, int> violations_by_kind(const std::vector<DumpReport>& dumps) {
  std::map<std::string, int> kinds;
  for (const DumpReport& dump : dumps) {
    for (const CaseScore& c : dump.cases) {
      for (const Violation& v : c.violations)
        ++kinds[v.kind];
    }
  }
  return kinds;
}

std::string summary_line(const std::vector<DumpReport>& dumps) {
  int cases = 0, tasks = 0;
  for (const DumpReport& dump : dumps) {
    const Totals t = totals_of(dump);
    cases += t.cases;
    tasks += t.tasks;
  }
  std::string line = std::to_string(dumps.size()) + " dumps, " + std::to_string(cases) +
                     " cases, " + std::to_string(tasks) + " tasks: ";
  const int violations = violation_count(dumps);
  if (violations == 0) return line + "no violation\n";
  line += std::to_string(violations) + (violations == 1 ? " violation (" : " violations (");
  bool first = true;
  for (const auto& [kind, count] : violations_by_kind(dumps)) {
    line += (first ? "" : ", ") + kind + " " + std::to_string(count);
    first = false;
  }
  return line + ")\n";
}

void write_timing(JsonWriter& json, const char* key, const std::optional<PlanTiming>& timing) {
  json.key(key);
  if (timing)
    json.value(timing->median_us);
  else
    json.null();
}

void write_case(JsonWriter& json, const CaseScore& c) {
  json.begin_object();
  json.key("case").value(c.spec.label());
  json.key("ntasks").value(c.spec.ntasks);
  json.key("order").value(order_name(c.spec.order));
  json.key("reserve").value(c.spec.reserve);
  json.key("tasks").value(c.tasks);
  json.key("l3_straddles").value(c.straddles);
  json.key("worst_core_ratio").value(c.worst_ratio);
  json.key("on_gpu_locality").value(c.on_gpu_locality);
  json.key("locality_counted").value(c.locality_counted);
  json.key("cores_used").value(c.cores_used);
  json.key("nic_not_nearest").value(c.nic_not_nearest);
  json.key("violations").begin_array();
  for (const Violation& v : c.violations) {
    json.begin_object().key("kind").value(v.kind).key("what").value(v.what).end_object();
  }
  json.end_array().end_object();
}

void write_dump(JsonWriter& json, const DumpReport& dump) {
  const Totals t = totals_of(dump);
  json.begin_object();
  json.key("dump").value(dump.name);
  json.key("gpus").value(dump.gpus);
  json.key("nics").value(dump.nics);
  json.key("cores").value(dump.cores);
  json.key("cases").value(t.cases);
  json.key("l3_straddles").value(t.straddles);
  json.key("worst_core_ratio").value(t.worst_ratio);
  json.key("on_gpu_locality").value(t.on_gpu_locality);
  json.key("locality_counted").value(t.locality_counted);
  json.key("cores_used_min").value(t.cores_used_min);
  json.key("cores_used_mean").value(t.cores_used_mean);
  json.key("nic_not_nearest").value(t.nic_not_nearest);
  write_timing(json, "plan_one_per_gpu_us", dump.time_one_per_gpu);
  write_timing(json, "plan_one_per_core_us", dump.time_one_per_core);
  json.key("violations").value(t.violations);
  json.key("by_case").begin_array();
  for (const CaseScore& c : dump.cases)
    write_case(json, c);
  json.end_array().end_object();
}

}  // namespace

int violation_count(const std::vector<DumpReport>& dumps) {
  int count = 0;
  for (const auto& [kind, n] : violations_by_kind(dumps))
    count += n;
  return count;
}

std::string report_markdown(const std::vector<DumpReport>& dumps) {
  std::string out =
      "| dump | GPUs | NICs | cores | cases | L3 straddles | worst core ratio | tasks on GPU "
      "locality | cores used min / mean | NIC not nearest | plan n=G (us) | plan n=cores (us) | "
      "violations |\n"
      "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const DumpReport& dump : dumps)
    out += markdown_row(dump);
  out += "\n" + summary_line(dumps);
  for (const DumpReport& dump : dumps) {
    for (const CaseScore& c : dump.cases) {
      for (const Violation& v : c.violations)
        out +=
            "VIOLATION " + dump.name + " " + c.spec.label() + ": " + v.kind + ": " + v.what + "\n";
    }
  }
  return out;
}

std::string report_json(const std::vector<DumpReport>& dumps) {
  JsonWriter json;
  json.begin_object().key("dumps").begin_array();
  for (const DumpReport& dump : dumps)
    write_dump(json, dump);
  json.end_array();
  json.key("violations").value(violation_count(dumps));
  json.key("by_kind").begin_object();
  for (const auto& [kind, count] : violations_by_kind(dumps))
    json.key(kind).value(count);
  json.end_object();
  json.key("summary").value(summary_line(dumps).substr(0, summary_line(dumps).size() - 1));
  json.end_object();
  return json.str() + "\n";
}

}  // namespace gpubind::quality
