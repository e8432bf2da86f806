#include "report.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "gpubind/output/json.h"

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

using output::Json;

Json timing_json(const std::optional<PlanTiming>& timing) {
  return timing ? Json(timing->median_us) : Json(nullptr);
}

Json case_json(const CaseScore& c) {
  Json violations = Json::array();
  for (const Violation& v : c.violations)
    violations.push_back(Json{{"kind", v.kind}, {"what", v.what}});
  return Json{{"case", c.spec.label()},
              {"ntasks", c.spec.ntasks},
              {"order", order_name(c.spec.order)},
              {"reserve", c.spec.reserve},
              {"tasks", c.tasks},
              {"l3_straddles", c.straddles},
              {"worst_core_ratio", c.worst_ratio},
              {"on_gpu_locality", c.on_gpu_locality},
              {"locality_counted", c.locality_counted},
              {"cores_used", c.cores_used},
              {"nic_not_nearest", c.nic_not_nearest},
              {"violations", std::move(violations)}};
}

Json dump_json(const DumpReport& dump) {
  const Totals t = totals_of(dump);
  Json cases = Json::array();
  for (const CaseScore& c : dump.cases)
    cases.push_back(case_json(c));
  return Json{{"dump", dump.name},
              {"gpus", dump.gpus},
              {"nics", dump.nics},
              {"cores", dump.cores},
              {"cases", t.cases},
              {"l3_straddles", t.straddles},
              {"worst_core_ratio", t.worst_ratio},
              {"on_gpu_locality", t.on_gpu_locality},
              {"locality_counted", t.locality_counted},
              {"cores_used_min", t.cores_used_min},
              {"cores_used_mean", t.cores_used_mean},
              {"nic_not_nearest", t.nic_not_nearest},
              {"plan_one_per_gpu_us", timing_json(dump.time_one_per_gpu)},
              {"plan_one_per_core_us", timing_json(dump.time_one_per_core)},
              {"violations", t.violations},
              {"by_case", std::move(cases)}};
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
  Json all = Json::array(), by_kind = Json::object();
  for (const DumpReport& dump : dumps)
    all.push_back(dump_json(dump));
  for (const auto& [kind, count] : violations_by_kind(dumps))
    by_kind[kind] = count;
  const std::string summary = summary_line(dumps);
  return output::to_text(Json{{"dumps", std::move(all)},
                              {"violations", violation_count(dumps)},
                              {"by_kind", std::move(by_kind)},
                              {"summary", summary.substr(0, summary.size() - 1)}}) +
         "\n";
}

}  // namespace gpubind::quality
