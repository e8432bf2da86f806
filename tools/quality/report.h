// The quality report: one row per dump, as a Markdown table or as JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checks.h"
#include "gpubind/output/plan_timing.h"

namespace gpubind::quality {

struct DumpReport {
  std::string name;
  int gpus = 0;
  int nics = 0;
  int cores = 0;
  std::vector<CaseScore> cases;
  std::optional<PlanTiming> time_one_per_gpu;   // ntasks = G, order=gpu, no reserve
  std::optional<PlanTiming> time_one_per_core;  // ntasks = usable cores, order=gpu, no reserve
};

int violation_count(const std::vector<DumpReport>& dumps);

std::string report_markdown(const std::vector<DumpReport>& dumps);
std::string report_json(const std::vector<DumpReport>& dumps);

}  // namespace gpubind::quality
