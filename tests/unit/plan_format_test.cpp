#include "gpubind/output/plan_format.h"

#include <gtest/gtest.h>

#include "../support/fixtures.h"
#include "gpubind/output/json.h"

namespace gpubind {
namespace {

using testing::fixture;

Plan lumi_plan(int ntasks) {
  PlanRequest request;
  request.ntasks = ntasks;
  auto plan = make_plan(fixture("lumi-g"), testing::lumi_policy(), request);
  EXPECT_TRUE(plan);
  return plan ? *plan : Plan{};
}

TEST(PlanFormat, JsonHasTheDocumentedShape) {
  const std::string json = plan_to_json(lumi_plan(8));
  EXPECT_EQ(json.rfind(R"({"tasks":[{"rank":0,"cpus":"49-55","cpu_mask":"0xfe000000000000",)", 0),
            0u)
      << json.substr(0, 200);
  EXPECT_NE(json.find(R"("gpus":[{"step_index":0,"pci":"0000:c1:00.0",)"), std::string::npos);
  EXPECT_NE(json.find(R"("nic_index":0,"nic_names":"hsn0","nic_indices":[0],"numa_node":3,)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("env":{"ROCR_VISIBLE_DEVICES":"0",)"), std::string::npos);
  EXPECT_NE(
      json.find(
          R"("env_only_if_unset":["MPICH_OFI_NIC_POLICY","MPICH_OFI_NIC_MAPPING","OMP_NUM_THREADS"])"),
      std::string::npos)
      << json;
  EXPECT_NE(json.find(R"(],"warnings":[]})"), std::string::npos);
}

TEST(PlanFormat, JsonEscapesAndWarnings) {
  Plan plan = lumi_plan(1);
  plan.warnings.push_back("a \"quoted\"\nline");
  const std::string json = plan_to_json(plan);
  EXPECT_NE(json.find(R"("warnings":["a \"quoted\"\nline"])"), std::string::npos) << json;
}

// A daemon up 14 days: its uptime in full, not "1.23457e+06"; large counters exactly.
TEST(PlanFormat, JsonNumbersArePrintedExactly) {
  const output::Json json{{"uptime_s", 1234567.25}, {"requests", 18446744073709551615ull}};
  EXPECT_EQ(output::to_text(json), "{\"uptime_s\":1234567.25,\"requests\":18446744073709551615}");
}

// Environment values are bytes: text that is not UTF-8 is replaced, not an exception.
TEST(PlanFormat, JsonReplacesTextThatIsNotUtf8) {
  const output::Json json{{"CUDA_VISIBLE_DEVICES",
                           "\xff"
                           "1"}};
  EXPECT_EQ(output::to_text(json),
            "{\"CUDA_VISIBLE_DEVICES\":\"\xef\xbf\xbd"
            "1\"}");
}

TEST(PlanFormat, TableShowsEveryTaskAndWarnings) {
  Plan plan = lumi_plan(8);
  plan.warnings.push_back("something to know");
  const std::string table = plan_to_table(plan);
  EXPECT_EQ(table.rfind("rank  cpus", 0), 0u) << table;
  EXPECT_NE(table.find("0     49-55  0xfe000000000000"), std::string::npos) << table;
  EXPECT_NE(table.find("0 (0000:c1:00.0)  hsn0"), std::string::npos) << table;
  EXPECT_NE(table.find("warning: something to know"), std::string::npos);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 10);
}

TEST(PlanFormat, TopologyJsonAndText) {
  const Topology& t = fixture("lumi-g");
  const std::string json = topology_to_json(t);
  EXPECT_NE(json.find(R"("packages":1,"numa_nodes":4,"l3_caches":8,"cores":64,"pus":128)"),
            std::string::npos);
  EXPECT_NE(json.find(R"({"index":0,"pci":"0000:c1:00.0","vendor":"amd")"), std::string::npos);
  EXPECT_NE(json.find(R"("locality":{"kind":"L3","index":6,"cpus":"48-55,112-119")"),
            std::string::npos);
  EXPECT_NE(json.find(R"("name":"hsn0","netdev":"hsn0","rdma":"cxi0","rdma_port":1)"),
            std::string::npos);
  const std::string text = topology_to_text(t);
  EXPECT_NE(text.find("NIC  name  netdev  rdma  port  kind"), std::string::npos) << text;
  EXPECT_NE(text.find("1 package, 4 NUMA nodes, 8 L3s, 64 cores, 128 PUs"), std::string::npos);
  EXPECT_NE(text.find("L3 6"), std::string::npos);
  EXPECT_NE(topology_to_text(fixture("workstation-mixed")).find("No high-speed NICs"),
            std::string::npos);
}

TEST(PlanFormat, TopologySaysAGpusMigInstances) {
  Topology t = fixture("dgx-h100");
  t.gpus[2].mig_instances = 3;
  EXPECT_NE(topology_to_json(t).find(R"("mig_instances":3,)"), std::string::npos);
  const std::string text = topology_to_text(t);
  EXPECT_NE(text.find("; 3 MIG instances"), std::string::npos) << text;
  EXPECT_EQ(text.find("MIG instance", text.find("GPU 3:")), std::string::npos) << text;
}

}  // namespace
}  // namespace gpubind
