#include "gpubind/api/convert.h"

#include <gtest/gtest.h>

#include "../support/fixtures.h"
#include "../support/invariants.h"
#include "../support/requests.h"
#include "gpubind/daemon/plan_cache.h"
#include "gpubind/output/plan_format.h"

namespace gpubind {
namespace {

using testing::fixture;

TEST(ApiConvert, TopologyRoundTripsExactly) {
  for (const char* name : {"lumi-g", "aurora-pvc", "dgx-h100", "mi300a-tpx"}) {
    const Topology& t = fixture(name);
    v1::GetTopologyResponse proto;
    api::topology_to_proto(t, proto);
    const Topology back = api::topology_from_proto(proto);
    EXPECT_EQ(topology_to_json(back), topology_to_json(t)) << name;
    ASSERT_EQ(back.cores.size(), t.cores.size());
    EXPECT_EQ(back.cores[5].pus, t.cores[5].pus);
    // Plans on the round-tripped topology are the same plans.
    PlanRequest request;
    request.ntasks = 2 * static_cast<int>(t.gpus.size());
    auto a = make_plan(t, testing::lumi_policy(), request);
    auto b = make_plan(back, testing::lumi_policy(), request);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(testing::fingerprint(*a), testing::fingerprint(*b)) << name;
  }
}

// A NIC's RDMA port crosses the wire; a daemon from before the field sends none (0), and used 1.
TEST(ApiConvert, NicRdmaPortCrossesAndAbsentMeansOne) {
  Topology t = fixture("dgx-h100");
  t.nics[0].rdma_port = 2;
  v1::GetTopologyResponse proto;
  api::topology_to_proto(t, proto);
  EXPECT_EQ(api::topology_from_proto(proto).nics[0].rdma_port, 2);
  proto.mutable_nics(0)->clear_rdma_port();
  EXPECT_EQ(api::topology_from_proto(proto).nics[0].rdma_port, 1);
}

TEST(ApiConvert, PlanRoundTripsExactly) {
  PlanRequest request;
  request.ntasks = 12;
  auto plan = make_plan(fixture("aurora-pvc"), SitePolicy(), request);
  ASSERT_TRUE(plan);
  plan->warnings.push_back("a warning");
  v1::PlanResponse proto;
  ASSERT_TRUE(proto.ParseFromString(api::serialize_plan(*plan, nullptr, {})));
  const Plan back = api::plan_from_proto(proto);
  EXPECT_EQ(testing::fingerprint(back), testing::fingerprint(*plan));
  EXPECT_EQ(plan_to_json(back), plan_to_json(*plan));
  EXPECT_EQ(back.tasks[1].gpus[0].tile_index, 1);
}

// The daemon writes its answers straight from the plan: libprotobuf's very bytes (every field is
// checked against them in schema_mappings_test.cpp), here on real plans of every kind (tiles and
// negative numbers, MIG tokens without a node GPU, NIC lists, empty and non-empty warnings, large
// plans), read back as the same plan with each placed GPU's locality.
TEST(ApiConvert, SerializedPlansAreLibprotobufsBytes) {
  struct Case {
    const char* fixture;
    PlanRequest request;
    bool with_topology;
  };
  std::vector<Case> cases;
  for (const char* name :
       {"lumi-g", "aurora-pvc", "dgx-h100", "mi300a-tpx", "a100-pcionly", "workstation-mixed"}) {
    for (int n : {1, 3, 8, 12, 64, 300}) {
      PlanRequest request;
      request.ntasks = n;
      cases.push_back({name, request, n % 2 == 0});
    }
  }
  PlanRequest mig;
  mig.ntasks = 3;
  mig.unplaced_gpus = {"MIG-aaaa", "MIG-bbbb"};
  cases.push_back({"dgx-h100", mig, true});
  PlanRequest none;
  none.ntasks = 2;
  none.gpus = std::vector<StepGpu>{};
  cases.push_back({"lumi-g", none, true});
  PlanRequest big;
  big.ntasks = kMaxTasks;
  cases.push_back({"dgx-h100", big, true});

  for (const Case& c : cases) {
    const Topology& t = fixture(c.fixture);
    auto plan = make_plan(t, testing::lumi_policy(), c.request);
    ASSERT_TRUE(plan) << c.fixture << " " << plan.error().message;
    plan->warnings.push_back("");
    plan->warnings.push_back("a warning");
    const Topology* topology = c.with_topology ? &t : nullptr;
    const std::string bytes = api::serialize_plan(*plan, topology, {7, 300, "node-1"});
    v1::PlanResponse proto;
    ASSERT_TRUE(proto.ParseFromString(bytes));
    const std::string what = std::string(c.fixture) + " ntasks " + std::to_string(c.request.ntasks);
    EXPECT_EQ(bytes, proto.SerializeAsString()) << what;
    const Plan back = api::plan_from_proto(proto);
    EXPECT_EQ(testing::fingerprint(back), testing::fingerprint(*plan)) << what;
    EXPECT_EQ(plan_to_json(back), plan_to_json(*plan)) << what;
    EXPECT_EQ(proto.policy_generation(), 7u);
    EXPECT_EQ(proto.topology_generation(), 300u);
    EXPECT_EQ(proto.hostname(), "node-1");
    for (const v1::TaskPlan& task : proto.tasks()) {
      for (const v1::TaskGpu& gpu : task.gpus()) {
        const bool placed = topology && gpu.node_index() >= 0;
        EXPECT_EQ(gpu.locality(),
                  placed ? describe_locality(t.gpus.at(gpu.node_index()).locality) : "")
            << what;
      }
    }
  }
  EXPECT_EQ(api::serialize_plan(Plan{}, nullptr, {}), v1::PlanResponse().SerializeAsString());
}

TEST(ApiConvert, RequestRoundTripsAndDefaultsStayUnset) {
  const PlanRequest request = testing::request_with_every_field();
  auto back = api::request_from_proto(api::request_to_proto(request));
  ASSERT_TRUE(back) << back.error().message;
  testing::expect_same_request(*back, request);

  PlanRequest plain;
  plain.ntasks = 1;
  auto defaults = api::request_from_proto(api::request_to_proto(plain));
  ASSERT_TRUE(defaults);
  testing::expect_same_request(*defaults, plain);
  EXPECT_FALSE(defaults->smt);
  EXPECT_FALSE(defaults->omp_places);

  PlanRequest no_gpus;
  no_gpus.ntasks = 1;
  no_gpus.gpus = std::vector<StepGpu>{};
  auto none = api::request_from_proto(api::request_to_proto(no_gpus));
  ASSERT_TRUE(none && none->gpus);
  EXPECT_TRUE(none->gpus->empty()) << "an empty GPU list stays empty";
}

TEST(ApiConvert, LimitsAreEnforced) {
  v1::PlanRequest proto;
  proto.set_ntasks(1);
  proto.set_allowed_cpus("0-x");
  auto bad_cpus = api::request_from_proto(proto);
  ASSERT_FALSE(bad_cpus);
  EXPECT_NE(bad_cpus.error().message.find("allowed_cpus: invalid cpu list"), std::string::npos);
  proto.set_allowed_cpus("");
  proto.add_gpus()->set_token("0");
  auto inconsistent = api::request_from_proto(proto);
  ASSERT_FALSE(inconsistent);
  EXPECT_NE(inconsistent.error().message.find("gpus_given is false"), std::string::npos);
  proto.clear_gpus();
  proto.set_smt(65);
  EXPECT_FALSE(api::request_from_proto(proto));
  proto.clear_smt();
  proto.set_cpus_per_task(100000);
  EXPECT_FALSE(api::request_from_proto(proto));
  proto.clear_cpus_per_task();
  // A value of a later release (an open enum keeps the number): refused by name, not planned as
  // the default order.
  proto.set_order(static_cast<v1::Order>(7));
  auto unknown_order = api::request_from_proto(proto);
  ASSERT_FALSE(unknown_order);
  EXPECT_EQ(unknown_order.error().message, "order 7 is not one this daemon knows");
  proto.set_order(v1::ORDER_CPU);
  proto.set_ze_hierarchy(static_cast<v1::ZeHierarchy>(2));
  EXPECT_FALSE(api::request_from_proto(proto));
}

// Names of hardware are checked against their syntax where a request is read, and refused with
// the value quoted printable and cut: nothing later (a log line, a journal record, a message)
// quotes anything else.
TEST(ApiConvert, HardwareNamesAreCheckedAgainstTheirSyntax) {
  auto refused = [](const v1::PlanRequest& proto) {
    auto request = api::request_from_proto(proto);
    return request ? std::string() : request.error().message;
  };
  v1::PlanRequest proto;
  proto.set_ntasks(1);
  proto.set_gpus_given(true);
  v1::StepGpu& gpu = *proto.add_gpus();
  gpu.set_token("0");
  for (const char* good : {"0000:c1:00.0", "0000:C1:1f.7", "10000:e1:00.0", ""}) {
    gpu.set_pci(good);
    EXPECT_EQ(refused(proto), "") << good;
  }
  for (const char* bad : {"0000:c1:00.8", "000:c1:00.0", "0000:c1:00", "0000:c1:00.0 ",
                          "0000:g1:00.0", "x\n<0>gpubindd: FORGED", "000000000:c1:00.0"}) {
    gpu.set_pci(bad);
    const std::string why = refused(proto);
    EXPECT_NE(why.find("is not a PCI bus id"), std::string::npos) << bad << ": " << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  gpu.set_pci("");
  for (const char* good :
       {"0", "GPU-8f0ce0a1-47a4-d2b4-0c5d-1a2b3c4d5e6f", "MIG-GPU-abc/1/0", "3.1", "6,7"}) {
    gpu.set_token(good);
    EXPECT_EQ(refused(proto), "") << good;
  }
  for (const char* bad : {"0 ", "", "a\nb", "'0'", "0;rm"}) {
    gpu.set_token(bad);
    EXPECT_NE(refused(proto).find("names no GPU"), std::string::npos) << bad;
  }
  gpu.set_token(std::string(200, 'x') + "\n");
  EXPECT_NE(refused(proto).find("longer than 128 bytes"), std::string::npos);
  gpu.set_token("0");
  proto.add_unplaced_gpus("MIG-\x1b[2J");
  EXPECT_NE(refused(proto).find("'MIG-\\x1b[2J' names no GPU"), std::string::npos)
      << refused(proto);
  proto.clear_unplaced_gpus();
  proto.set_ccl_process_launcher("hydra\n<0>x");
  EXPECT_NE(refused(proto).find("'hydra\\n<0>x' is not a launcher's name"), std::string::npos)
      << refused(proto);
  proto.set_ccl_process_launcher("hydra");
  proto.set_inherited_hip_visible_devices("0,\n1");
  EXPECT_NE(refused(proto).find("is not a list of GPU tokens"), std::string::npos);
  proto.set_inherited_hip_visible_devices("");  // hides every GPU: HIP's own meaning
  EXPECT_EQ(refused(proto), "");
}

TEST(PlanCache, KeysIgnoreJobIdsButNotTheShapeOrGeneration) {
  v1::PlanRequest a;
  a.set_ntasks(8);
  a.set_job_id(1);
  v1::PlanRequest b = a;
  b.set_job_id(2);
  b.set_step_id(5);
  EXPECT_EQ(daemon::PlanCache::key_of(1, a), daemon::PlanCache::key_of(1, b));
  EXPECT_NE(daemon::PlanCache::key_of(1, a), daemon::PlanCache::key_of(2, a));
  b.set_ntasks(4);
  EXPECT_NE(daemon::PlanCache::key_of(1, a), daemon::PlanCache::key_of(1, b));
}

// Entries cost their key (twice), their answer and 256 bytes: four 700-byte answers with
// one-letter keys fit a 4000-byte budget, a fifth evicts the least recently used.
TEST(PlanCache, EvictsTheLeastRecentlyUsedToStayInItsByteBudget) {
  daemon::PlanCache cache(4000);
  auto entry = [](char c) { return std::make_shared<const std::string>(700, c); };
  for (char key : std::string("abcd"))
    cache.insert(std::string(1, key), entry(key));
  EXPECT_EQ(cache.size(), 4u);
  ASSERT_TRUE(cache.find("a"));  // a is now the most recent
  cache.insert("e", entry('e'));
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_LE(cache.bytes(), 4000u);
  EXPECT_TRUE(cache.find("a"));
  EXPECT_FALSE(cache.find("b"));
  EXPECT_EQ(cache.find("e")->front(), 'e');
}

TEST(PlanCache, KeepsNoEntryLargerThanAQuarterOfItsBudget) {
  daemon::PlanCache cache(1 << 20);
  cache.insert("small", std::make_shared<const std::string>(1000, 'x'));
  cache.insert("huge", std::make_shared<const std::string>(300 * 1024, 'y'));
  EXPECT_FALSE(cache.find("huge"));
  EXPECT_TRUE(cache.find("small"));
  // Distinct large answers never take the cache past its budget, however many arrive.
  for (int k = 0; k < 100; ++k)
    cache.insert(std::to_string(k), std::make_shared<const std::string>(200 * 1024, 'z'));
  EXPECT_LE(cache.bytes(), size_t{1} << 20);
  EXPECT_GE(cache.size(), 4u);
}

}  // namespace
}  // namespace gpubind
