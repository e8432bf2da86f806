// binder.proto's request and answer as the plugin encodes and decodes them (nanopb), against what
// the daemon and the fallback library read and write (libprotobuf): one schema, two libraries.
#include <gtest/gtest.h>

#include <google/protobuf/unknown_field_set.h>

#include "../support/fixtures.h"
#include "../support/requests.h"
#include "gpubind/api/convert.h"
#include "gpubind/client/step_env.h"
#include "gpubind/protocol/client.h"

namespace gpubind::protocol {
namespace {

// request_with_every_field(), as the plugin holds it.
StepRequest step_with_every_field() {
  StepRequest r;
  r.job_id = 42;
  r.step_id = 3;
  r.ntasks = 4;
  r.allowed_cpus = "8-15,72-79";
  r.allowed_cores = "4-7";
  r.gpus_given = true;
  r.gpus = {{3, "GPU-x"}, {1, "GPU-y"}};
  r.unplaced_gpus = {"MIG-a", "MIG-b"};
  r.cpus_per_task = 3;
  r.gpus_per_task = 1;
  r.tasks_per_gpu = 2;
  r.order = "cpu";
  r.smt = 1;
  r.no_nic_env = true;
  r.omp = true;
  r.ze_hierarchy = "composite";
  r.fixed = {{{1}, "8-9"}, {{0}, "10-11"}, {{1}, "12-13"}, {{0}, "14-15"}};
  r.hip_inherited = true;
  r.inherited_hip = "1,0";
  r.cpus_bound_at_launch = true;
  r.gpus_named_by_slurm = true;
  r.slurm_gpu_rule = "closest";
  r.task_command = "apptainer";
  return r;
}

v1::PlanRequest as_daemon_reads(const std::string& bytes) {
  v1::PlanRequest proto;
  EXPECT_TRUE(proto.ParseFromString(bytes));
  return proto;
}

TEST(Wire, TheDaemonReadsEveryFieldThePluginSends) {
  auto bytes = encode_request(step_with_every_field());
  ASSERT_TRUE(bytes) << bytes.error().message;
  const v1::PlanRequest proto = as_daemon_reads(*bytes);
  EXPECT_EQ(proto.job_id(), 42u);
  EXPECT_EQ(proto.step_id(), 3u);
  auto request = api::request_from_proto(proto);
  ASSERT_TRUE(request) << request.error().message;
  testing::expect_same_request(*request, testing::request_with_every_field());
}

TEST(Wire, GpusNamedByBusIdReachTheDaemonInStepOrder) {
  StepRequest r;
  r.gpus_given = true;
  r.gpus_by_pci = {{"0000:d1:00.0", "3"}, {"0000:c1:00.0", "GPU-a"}};
  auto bytes = encode_request(r);
  ASSERT_TRUE(bytes) << bytes.error().message;
  auto request = api::request_from_proto(as_daemon_reads(*bytes));
  ASSERT_TRUE(request) << request.error().message;
  ASSERT_TRUE(request->gpus);
  ASSERT_EQ(request->gpus->size(), 2u);
  EXPECT_EQ((*request->gpus)[0].pci, "0000:d1:00.0");
  EXPECT_EQ((*request->gpus)[0].token, "3");
  EXPECT_EQ((*request->gpus)[1].pci, "0000:c1:00.0");
  EXPECT_EQ((*request->gpus)[1].token, "GPU-a");
}

TEST(Wire, DefaultsStayUnset) {
  auto bytes = encode_request(StepRequest{});
  ASSERT_TRUE(bytes);
  auto request = api::request_from_proto(as_daemon_reads(*bytes));
  ASSERT_TRUE(request) << request.error().message;
  EXPECT_FALSE(request->gpus) << "gpus_given=false: every GPU of the node";
  EXPECT_FALSE(request->smt) << "smt=-1: the policy's";
  EXPECT_FALSE(request->omp_places) << "no omp flag: the policy's";
  EXPECT_FALSE(request->order);
  EXPECT_FALSE(request->allowed_cpus);
}

TEST(Wire, ValuesTheSchemaCannotCarryAreRefused) {
  const auto refused_with = [](StepRequest r, const std::string& why) {
    auto bytes = encode_request(r);
    ASSERT_FALSE(bytes);
    EXPECT_NE(bytes.error().message.find(why), std::string::npos) << bytes.error().message;
  };
  StepRequest r;
  r.gpus_per_task = -1;
  refused_with(r, "negative");
  r = {};
  r.smt = -5;
  refused_with(r, "negative");
  r = {};
  r.gpus_given = true;
  r.gpus = {{-1, "x"}};
  refused_with(r, "GPU index -1 is negative");
  r = {};
  r.gpus_given = true;
  r.gpus = {{0, "0"}};
  r.gpus_by_pci = {{"0000:c1:00.0", "1"}};
  refused_with(r, "both by node index and by PCI bus id");
  r = {};
  r.order = "sideways";
  refused_with(r, "order 'sideways'");
  r = {};
  r.ze_hierarchy = "tiles";
  refused_with(r, "ze_hierarchy 'tiles'");
}

// What the daemon answers for LUMI-G, 8 tasks, with the localities of the plan's topology.
v1::PlanResponse lumi_answer(bool with_topology) {
  const Topology& lumi = testing::fixture("lumi-g");
  PlanRequest request;
  request.ntasks = 8;
  auto plan = make_plan(lumi, SitePolicy{}, request);
  EXPECT_TRUE(plan) << plan.error().message;
  plan->warnings = {"first", "second"};
  v1::PlanResponse response;
  EXPECT_TRUE(
      response.ParseFromString(api::serialize_plan(*plan, with_topology ? &lumi : nullptr, {})));
  return response;
}

TEST(Wire, ThePluginReadsTheDaemonsPlan) {
  const v1::PlanResponse response = lumi_answer(true);
  auto plan = decode_plan(response.SerializeAsString());
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->tasks.size(), 8u);
  EXPECT_EQ(plan->warnings, (std::vector<std::string>{"first", "second"}));
  for (int i = 0; i < 8; ++i) {
    const v1::TaskPlan& sent = response.tasks(i);
    const TaskBinding& got = plan->tasks[i];
    EXPECT_EQ(got.rank, static_cast<int>(sent.rank()));
    EXPECT_EQ(got.cpus, sent.cpus());
    EXPECT_EQ(got.numa_node, sent.numa_node());
    EXPECT_EQ(got.l3_index, sent.l3_index());
    EXPECT_EQ(got.nic_names, sent.nic_names());
    EXPECT_EQ(got.vendor, "amd");
    EXPECT_EQ(got.tokens, sent.gpus(0).token());
    ASSERT_EQ(got.env.size(), static_cast<size_t>(sent.env_size()));
    for (int e = 0; e < sent.env_size(); ++e) {
      EXPECT_EQ(got.env[e].name, sent.env(e).name());
      EXPECT_EQ(got.env[e].value, sent.env(e).value());
      EXPECT_EQ(got.env[e].only_if_unset, sent.env(e).only_if_unset());
    }
  }
}

TEST(Wire, TheVerboseLineNamesEachGpusLocality) {
  auto plan = decode_plan(lumi_answer(true).SerializeAsString());
  ASSERT_TRUE(plan);
  EXPECT_EQ(client::describe_gpus(plan->tasks[0].gpus), "0 (0000:c1:00.0, L3 6)");
  auto bare = decode_plan(lumi_answer(false).SerializeAsString());
  ASSERT_TRUE(bare);
  EXPECT_EQ(client::describe_gpus(bare->tasks[0].gpus), "0 (0000:c1:00.0)")
      << "without the topology, the bus id alone";
}

// A newer daemon's answer: fields this plugin does not know, at the top and inside a task and a
// GPU, are skipped; what it knows reads the same.
TEST(Wire, APluginSkipsAnswerFieldsItDoesNotKnow) {
  v1::PlanResponse response = lumi_answer(true);
  const std::string known = response.SerializeAsString();
  const auto add_unknown = [](google::protobuf::Message& message) {
    auto* unknown = message.GetReflection()->MutableUnknownFields(&message);
    unknown->AddVarint(901, 7);
    unknown->AddLengthDelimited(902, "a field of a later release");
    unknown->AddFixed64(903, 1);
  };
  add_unknown(response);
  add_unknown(*response.mutable_tasks(0));
  add_unknown(*response.mutable_tasks(0)->mutable_gpus(0));
  add_unknown(*response.mutable_tasks(0)->mutable_env(0));
  const std::string newer = response.SerializeAsString();
  ASSERT_GT(newer.size(), known.size());
  auto from_known = decode_plan(known);
  auto from_newer = decode_plan(newer);
  ASSERT_TRUE(from_newer) << from_newer.error().message;
  ASSERT_EQ(from_newer->tasks.size(), from_known->tasks.size());
  for (size_t i = 0; i < from_known->tasks.size(); ++i) {
    EXPECT_EQ(from_newer->tasks[i].cpus, from_known->tasks[i].cpus);
    EXPECT_EQ(from_newer->tasks[i].tokens, from_known->tasks[i].tokens);
    EXPECT_EQ(from_newer->tasks[i].env.size(), from_known->tasks[i].env.size());
  }
}

// A newer plugin's request, read by this daemon's libprotobuf: the same request.
TEST(Wire, ADaemonSkipsRequestFieldsItDoesNotKnow) {
  auto bytes = encode_request(step_with_every_field());
  ASSERT_TRUE(bytes);
  v1::PlanRequest newer = as_daemon_reads(*bytes);
  newer.GetReflection()->MutableUnknownFields(&newer)->AddLengthDelimited(77, "later");
  auto request = api::request_from_proto(as_daemon_reads(newer.SerializeAsString()));
  ASSERT_TRUE(request) << request.error().message;
  testing::expect_same_request(*request, testing::request_with_every_field());
}

TEST(Wire, BytesThatAreNoPlanAreRefused) {
  EXPECT_FALSE(decode_plan(std::string("\x0a\xff\xff\xff\xff\x0f", 6))) << "length past the end";
  EXPECT_FALSE(decode_plan(std::string("\x0a\x05\x12\x09", 4))) << "a task cut short";
  const std::string whole = lumi_answer(true).SerializeAsString();
  EXPECT_FALSE(decode_plan(whole.substr(0, whole.size() - 3)));
  EXPECT_TRUE(decode_plan(""));  // no tasks: the caller checks the count
}

}  // namespace
}  // namespace gpubind::protocol
