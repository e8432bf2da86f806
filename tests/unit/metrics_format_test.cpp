// gpubindctl metrics' text: the Prometheus exposition format node_exporter's textfile collector
// reads (HELP and TYPE per family, counters in _total, a histogram with its +Inf bucket).
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "gpubind/output/metrics_format.h"

namespace gpubind::output {
namespace {

DaemonMetrics sample_metrics() {
  DaemonMetrics m;
  m.version = "1.2.3";
  m.start_time_s = 1700000000.5;
  m.plans_cache = 7;
  m.plans_worker = 3;
  m.plans_refused = 2;
  m.plans_node_mismatch = 1;
  m.latency_buckets = {{10e-6, 4}, {1e-3, 9}, {1.0, 10}};
  m.latency_count = 11;
  m.latency_sum_s = 1.25;
  m.fallbacks = {{"unavailable", 5}, {"timeout", 0}};
  m.policy_generation = 2;
  m.topology_generation = 1;
  m.reloads = 1;
  m.reloads_refused = 4;
  m.rss_bytes = 123456;
  m.cpu_s = 0.5;
  return m;
}

// Each sample line ("name{labels}" -> value), and each family's TYPE.
struct Parsed {
  std::map<std::string, std::string> samples;
  std::map<std::string, std::string> types;
  std::map<std::string, int> helps;
};

Parsed parse(const std::string& text) {
  Parsed parsed;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, type;
      words >> name >> type;
      parsed.types[name] = type;
    } else if (line.rfind("# HELP ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name;
      words >> name;
      ++parsed.helps[name];
    } else {
      const auto space = line.rfind(' ');
      parsed.samples[line.substr(0, space)] = line.substr(space + 1);
    }
  }
  return parsed;
}

TEST(MetricsFormat, DaemonDownIsOneGauge) {
  EXPECT_EQ(metrics_text(nullptr),
            "# HELP gpubind_daemon_up Whether gpubindd answered when these metrics were collected "
            "(1) or not (0).\n# TYPE gpubind_daemon_up gauge\ngpubind_daemon_up 0\n");
}

TEST(MetricsFormat, EverySeriesWithItsValue) {
  const DaemonMetrics m = sample_metrics();
  const Parsed p = parse(metrics_text(&m));
  EXPECT_EQ(p.samples.at("gpubind_daemon_up"), "1");
  EXPECT_EQ(p.samples.at("gpubind_build_info{version=\"1.2.3\"}"), "1");
  EXPECT_EQ(p.samples.at("gpubind_daemon_start_time_seconds"), "1700000000.5");
  EXPECT_EQ(p.samples.at("gpubind_plans_total{source=\"cache\"}"), "7");
  EXPECT_EQ(p.samples.at("gpubind_plans_total{source=\"worker\"}"), "3");
  EXPECT_EQ(p.samples.at("gpubind_plans_total{source=\"refused\"}"), "2");
  EXPECT_EQ(p.samples.at("gpubind_plans_total{source=\"node_mismatch\"}"), "1");
  EXPECT_EQ(p.samples.at("gpubind_plan_duration_seconds_bucket{le=\"1e-05\"}"), "4");
  EXPECT_EQ(p.samples.at("gpubind_plan_duration_seconds_bucket{le=\"0.001\"}"), "9");
  EXPECT_EQ(p.samples.at("gpubind_plan_duration_seconds_bucket{le=\"1\"}"), "10");
  EXPECT_EQ(p.samples.at("gpubind_plan_duration_seconds_bucket{le=\"+Inf\"}"), "11");
  EXPECT_EQ(p.samples.at("gpubind_plan_duration_seconds_count"), "11");
  EXPECT_EQ(p.samples.at("gpubind_plan_duration_seconds_sum"), "1.25");
  EXPECT_EQ(p.samples.at("gpubind_fallbacks_total{reason=\"unavailable\"}"), "5");
  EXPECT_EQ(p.samples.at("gpubind_fallbacks_total{reason=\"timeout\"}"), "0");
  EXPECT_EQ(p.samples.at("gpubind_policy_generation"), "2");
  EXPECT_EQ(p.samples.at("gpubind_topology_generation"), "1");
  EXPECT_EQ(p.samples.at("gpubind_reloads_total{result=\"succeeded\"}"), "1");
  EXPECT_EQ(p.samples.at("gpubind_reloads_total{result=\"refused\"}"), "4");
  EXPECT_EQ(p.samples.at("gpubind_resident_memory_bytes"), "123456");
  EXPECT_EQ(p.samples.at("gpubind_cpu_seconds_total"), "0.5");
}

// What promtool's lint and node_exporter's parser ask: one HELP and TYPE per family, counters
// named _total, every sample of a declared family.
TEST(MetricsFormat, FamiliesAreDeclaredOnceAndNamedByType) {
  const DaemonMetrics m = sample_metrics();
  const std::string text = metrics_text(&m);
  ASSERT_EQ(text.back(), '\n');
  const Parsed p = parse(text);
  for (const auto& [name, type] : p.types) {
    EXPECT_EQ(p.helps.at(name), 1) << name;
    EXPECT_EQ(name.rfind("gpubind_", 0), 0u) << name;
    if (type == "counter") {
      EXPECT_TRUE(name.ends_with("_total")) << name;
    }
    if (type == "histogram") {
      EXPECT_TRUE(name.ends_with("_seconds")) << name;
    }
  }
  for (const auto& [series, value] : p.samples) {
    std::string family = series.substr(0, series.find('{'));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (!p.types.count(family) && family.ends_with(suffix))
        family.resize(family.size() - std::string(suffix).size());
    }
    EXPECT_TRUE(p.types.count(family)) << series << " has no TYPE";
  }
}

TEST(MetricsFormat, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  DaemonMetrics m = sample_metrics();
  m.version = "1.0 \"rc\"";
  EXPECT_NE(metrics_text(&m).find("gpubind_build_info{version=\"1.0 \\\"rc\\\"\"} 1\n"),
            std::string::npos);
}

}  // namespace
}  // namespace gpubind::output
