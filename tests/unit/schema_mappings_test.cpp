// Every hand-kept mapping of binder.proto carries every field of the schema, or says here why it
// does not. Each test fills a message in full by its descriptors (schema_fields.h), sends it
// through one mapping and compares what comes back field by field: a field added to binder.proto
// fails each mapping that does not carry it, by name, until the mapping carries it or an
// omission below gives the reason. The schema probe build (schema_probe.cmake) compiles these
// tests and the mappings against binder.proto with a field added to each message, and checks
// that each test reports exactly those fields.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gpubind/api/convert.h"
#include "gpubind/api/status_convert.h"
#include "gpubind/output/json.h"
#include "gpubind/output/plan_format.h"
#include "gpubind/protocol/client.h"
#include "schema_fields.h"

#ifndef GPUBIND_SCHEMA_PROBE
#include <unistd.h>

#include "gpubind/daemon/binder_service.h"
#include "gpubind/daemon/daemon_state.h"
#endif

namespace gpubind {
namespace {

using testing::fields_lost;
using testing::fields_lost_in_json;
using testing::fill_every_field;
using testing::JsonKey;
using testing::LostField;
using testing::Omission;

// The fields the probe build adds ("schema_probe", one per message) that a test must find lost:
// none in the real build.
std::vector<std::string> probe_fields(std::initializer_list<const char*> messages) {
  std::vector<std::string> names;
#ifdef GPUBIND_SCHEMA_PROBE
  for (const char* message : messages)
    names.push_back(std::string("gpubind.v1.") + message + ".schema_probe");
  std::sort(names.begin(), names.end());
#else
  (void)messages;
#endif
  return names;
}

void expect_lost(const std::vector<LostField>& lost, const std::vector<std::string>& expected) {
  EXPECT_EQ(testing::names_of(lost), expected)
      << "fields of binder.proto this mapping does not carry (carry them, or add an omission "
         "with its reason):\n"
      << testing::describe(lost);
}

template <typename List>
void expect_known(const List& list) {
  EXPECT_EQ(testing::unknown_fields(list), std::vector<std::string>{})
      << "listed fields binder.proto does not have";
}

// ---- PlanRequest -------------------------------------------------------------------------------

// A request with every field set, as the planner accepts it: CPU lists are cpu lists.
v1::PlanRequest full_request() {
  v1::PlanRequest request;
  fill_every_field(request);
  request.set_allowed_cpus("2-5,9");
  request.set_allowed_cores("1-3");
  // Names of hardware in their syntax, as request_from_proto checks it.
  for (int i = 0; i < request.gpus_size(); ++i)
    request.mutable_gpus(i)->set_pci("0000:c" + std::to_string(i % 10) + ":00.0");
  for (int i = 0; i < request.unplaced_gpus_size(); ++i)
    request.set_unplaced_gpus(i, "MIG-" + std::to_string(i));
  request.set_inherited_hip_visible_devices("1,0");
  request.set_ccl_process_launcher("hydra");
  request.set_task_command("apptainer");
  request.set_ntasks(static_cast<uint32_t>(request.fixed_tasks_size()));  // one per task
  for (v1::FixedTask& task : *request.mutable_fixed_tasks())
    task.set_cpus("2-3");
  return request;
}

constexpr Omission kPlannerRequestOmits[] = {
    {"gpubind.v1.PlanRequest.job_id",
     "for the daemon's logs: the planner's request has no ids (BinderClient::plan sets them)"},
    {"gpubind.v1.PlanRequest.step_id", "the same as job_id"},
    {"gpubind.v1.PlanRequest.bypass_cache",
     "the daemon reads it off the message, the planner has no cache (bench_plan sets it)"},
};

// api: request_from_proto (the daemon, the fallback) and request_to_proto (the tools).
TEST(SchemaMappings, PlannerRequestCarriesEveryField) {
  expect_known(kPlannerRequestOmits);
  const v1::PlanRequest sent = full_request();
  auto request = api::request_from_proto(sent);
  ASSERT_TRUE(request) << request.error().message;
  expect_lost(fields_lost(sent, api::request_to_proto(*request), kPlannerRequestOmits),
              probe_fields({"PlanRequest", "StepGpu"}));
}

// The plugin's request as its step types hold it.
protocol::StepRequest step_request(const v1::PlanRequest& p, bool gpus_by_pci) {
  protocol::StepRequest r;
  r.job_id = p.job_id();
  r.step_id = p.step_id();
  r.ntasks = static_cast<int>(p.ntasks());
  r.allowed_cpus = p.allowed_cpus();
  r.allowed_cores = p.allowed_cores();
  r.gpus_given = p.gpus_given();
  for (const v1::StepGpu& gpu : p.gpus()) {
    if (gpus_by_pci)
      r.gpus_by_pci.emplace_back(gpu.pci(), gpu.token());
    else
      r.gpus.emplace_back(static_cast<int>(gpu.node_index()), gpu.token());
  }
  r.unplaced_gpus.assign(p.unplaced_gpus().begin(), p.unplaced_gpus().end());
  r.cpus_per_task = static_cast<int>(p.cpus_per_task());
  r.gpus_per_task = static_cast<int>(p.gpus_per_task());
  r.tasks_per_gpu = static_cast<int>(p.tasks_per_gpu());
  r.order = p.order() == v1::ORDER_GPU ? "gpu" : p.order() == v1::ORDER_CPU ? "cpu" : "";
  r.smt = p.has_smt() ? static_cast<int>(p.smt()) : -1;
  r.no_gpu_env = p.no_gpu_env();
  r.no_nic_env = p.no_nic_env();
  r.omp = p.has_omp_places() && p.omp_places();
  r.ze_hierarchy = p.ze_hierarchy() == v1::ZE_HIERARCHY_COMPOSITE ? "composite" : "flat";
  for (uint32_t index : p.unplaced_slurm_indices())
    r.unplaced_slurm_indices.push_back(static_cast<int>(index));
  r.ccl_worker_count = static_cast<int>(p.ccl_worker_count());
  r.ccl_process_launcher = p.ccl_process_launcher();
  r.ccl_local_size = static_cast<int>(p.ccl_local_size());
  for (const v1::FixedTask& task : p.fixed_tasks()) {
    protocol::FixedTask& fixed = r.fixed.emplace_back();
    for (uint32_t g : task.gpus())
      fixed.gpus.push_back(static_cast<int>(g));
    fixed.cpus = task.cpus();
  }
  r.cpus_bound_at_launch = p.cpus_bound_at_launch();
  r.gpus_named_by_slurm = p.gpus_named_by_slurm();
  r.slurm_gpu_rule = p.slurm_gpu_rule() == v1::SLURM_GPU_RULE_CLOSEST  ? "closest"
                     : p.slurm_gpu_rule() == v1::SLURM_GPU_RULE_SINGLE ? "single"
                                                                       : "";
  r.hip_inherited = p.has_inherited_hip_visible_devices();
  r.inherited_hip = p.inherited_hip_visible_devices();
  r.task_command = p.task_command();
  return r;
}

v1::PlanRequest as_daemon_reads(const std::string& bytes) {
  v1::PlanRequest request;
  EXPECT_TRUE(request.ParseFromString(bytes));
  return request;
}

constexpr Omission kPluginRequestOmits[] = {
    {"gpubind.v1.PlanRequest.bypass_cache",
     "a step may always be answered from the cache; only benchmarks skip it, over gRPC"},
    {"gpubind.v1.StepGpu.pci",
     "this encoding names GPUs by node index; the one by bus id is checked beside it"},
};
constexpr Omission kPluginGpuByPciOmits[] = {
    {"gpubind.v1.StepGpu.node_index", "a GPU named by its bus id has no node index"},
};

// protocol: encode_request (nanopb), read by the daemon's libprotobuf.
TEST(SchemaMappings, PluginRequestCarriesEveryField) {
  expect_known(kPluginRequestOmits);
  expect_known(kPluginGpuByPciOmits);
  const v1::PlanRequest sent = full_request();
  auto by_index = protocol::encode_request(step_request(sent, false));
  ASSERT_TRUE(by_index) << by_index.error().message;
  std::vector<LostField> lost = fields_lost(sent, as_daemon_reads(*by_index), kPluginRequestOmits);

  auto by_pci = protocol::encode_request(step_request(sent, true));
  ASSERT_TRUE(by_pci) << by_pci.error().message;
  const v1::PlanRequest read = as_daemon_reads(*by_pci);
  ASSERT_EQ(read.gpus_size(), sent.gpus_size());
  for (int i = 0; i < sent.gpus_size(); ++i) {
    for (LostField& f : fields_lost(sent.gpus(i), read.gpus(i), kPluginGpuByPciOmits))
      if (std::find_if(lost.begin(), lost.end(),
                       [&](const LostField& l) { return l.field == f.field; }) == lost.end())
        lost.push_back(std::move(f));
  }
  expect_lost(lost, probe_fields({"PlanRequest", "StepGpu"}));
}

// ---- PlanResponse ------------------------------------------------------------------------------

// A node whose GPU i sits in L3 100+i: the answer's writer names each GPU's locality from it.
Topology node_of_many_gpus() {
  Topology node;
  for (int i = 0; i < 512; ++i) {
    Gpu gpu;
    gpu.index = i;
    gpu.locality.kind = LocalityKind::kL3;
    gpu.locality.l3_index = 100 + i;
    node.gpus.push_back(gpu);
  }
  return node;
}

// An answer with every field set, as a plan on `node` can be: the planner's model holds CPUs as
// a set (a cpu list in its own spelling, the mask its hex), vendors by name, and no locality
// but its GPU's on the node.
v1::PlanResponse full_answer(const Topology& node) {
  v1::PlanResponse answer;
  fill_every_field(answer);
  const char* const cpus[] = {"1-3", "8,10"};
  const char* const vendors[] = {"nvidia", "amd", "intel"};
  int t = 0, g = 0;
  for (v1::TaskPlan& task : *answer.mutable_tasks()) {
    task.set_cpus(cpus[t++ % 2]);
    task.set_cpu_mask(CpuSet::parse_list(task.cpus())->to_mask());
    for (v1::TaskGpu& gpu : *task.mutable_gpus()) {
      gpu.set_vendor(vendors[g++ % 3]);
      gpu.set_locality(describe_locality(node.gpus.at(gpu.node_index()).locality));
    }
  }
  for (v1::GpuPlace& place : *answer.mutable_gpu_places())
    place.set_cpus(cpus[t++ % 2]);
  return answer;
}

constexpr Omission kAnswerWriterOmits[] = {
    {"gpubind.v1.PlanResponse.cached",
     "the daemon appends cached=true to an answer it takes from its cache (binder_service.cpp)"},
};

// api: plan_from_proto (the gRPC client) and serialize_plan (the daemon and the fallback write
// their answers with it), which must write libprotobuf's very bytes.
TEST(SchemaMappings, AnswerWriterCarriesEveryFieldInLibprotobufsBytes) {
  expect_known(kAnswerWriterOmits);
  const Topology node = node_of_many_gpus();
  v1::PlanResponse sent = full_answer(node);
  const Plan plan = api::plan_from_proto(sent);
  const std::string bytes = api::serialize_plan(
      plan, &node, {sent.policy_generation(), sent.topology_generation(), sent.hostname()});
  v1::PlanResponse read;
  ASSERT_TRUE(read.ParseFromString(bytes));
  expect_lost(fields_lost(sent, read, kAnswerWriterOmits),
              probe_fields({"PlanResponse", "TaskPlan", "TaskGpu", "EnvVar"}));
  EXPECT_EQ(bytes, read.SerializeAsString()) << "fields in number order, defaults left out";
#ifndef GPUBIND_SCHEMA_PROBE
  sent.clear_cached();
  EXPECT_EQ(bytes, sent.SerializeAsString());
#endif
}

// The plugin's plan as its step types hold it, back as the answer it was read from.
v1::PlanResponse as_answer(const protocol::StepPlan& plan) {
  v1::PlanResponse answer;
  for (const std::string& warning : plan.warnings)
    answer.add_warnings(warning);
  answer.set_facts_kept(plan.facts_kept);
  for (const protocol::GpuPlace& in : plan.gpu_places) {
    v1::GpuPlace& place = *answer.add_gpu_places();
    place.set_node_index(static_cast<uint32_t>(in.node_index));
    place.set_cpus(in.cpus);
  }
  for (const protocol::TaskBinding& in : plan.tasks) {
    v1::TaskPlan& task = *answer.add_tasks();
    task.set_rank(static_cast<uint32_t>(in.rank));
    task.set_cpus(in.cpus);
    task.set_numa_node(in.numa_node);
    task.set_l3_index(in.l3_index);
    task.set_nic_names(in.nic_names);
    for (const protocol::TaskGpuInfo& info : in.gpus) {
      v1::TaskGpu& gpu = *task.add_gpus();
      gpu.set_node_index(info.node_index);
      gpu.set_token(info.token);
      gpu.set_pci(info.pci);
      gpu.set_vendor(in.vendor);
      gpu.set_locality(info.locality);
    }
    for (const protocol::TaskEnv& var : in.env) {
      v1::EnvVar& env = *task.add_env();
      env.set_name(var.name);
      env.set_value(var.value);
      env.set_only_if_unset(var.only_if_unset);
    }
  }
  return answer;
}

constexpr Omission kPluginAnswerOmits[] = {
    {"gpubind.v1.PlanResponse.policy_generation",
     "which policy planned is the daemon's to log; a step applies the plan whatever it is"},
    {"gpubind.v1.PlanResponse.topology_generation", "the same as policy_generation"},
    {"gpubind.v1.PlanResponse.hostname", "the plugin asked its own node's daemon"},
    {"gpubind.v1.PlanResponse.cached", "how the daemon answered, not what a task applies"},
    {"gpubind.v1.TaskPlan.cpu_mask", "the same CPUs as cpus, in hex, for people"},
    {"gpubind.v1.TaskPlan.ncores", "a count for people; the plugin binds the CPUs"},
    {"gpubind.v1.TaskPlan.nic_index",
     "a node NIC number: the task's environment names its NICs, the log line their names"},
    {"gpubind.v1.TaskPlan.nic_indices", "the same as nic_index"},
    {"gpubind.v1.TaskGpu.step_index",
     "the plugin checks each GPU by its node index and token against its own request"},
    {"gpubind.v1.TaskGpu.tile_index", "the token names the tile already (\"3.1\")"},
};

// protocol: decode_plan (nanopb) reads libprotobuf's answer.
TEST(SchemaMappings, PluginReadsEveryAnswerFieldItUses) {
  expect_known(kPluginAnswerOmits);
  v1::PlanResponse sent = full_answer(node_of_many_gpus());
  // A task's GPUs share a vendor, which the plugin keeps once per task.
  for (v1::TaskPlan& task : *sent.mutable_tasks())
    for (v1::TaskGpu& gpu : *task.mutable_gpus())
      gpu.set_vendor(task.gpus(0).vendor());
  auto plan = protocol::decode_plan(sent.SerializeAsString());
  ASSERT_TRUE(plan) << plan.error().message;
  expect_lost(fields_lost(sent, as_answer(*plan), kPluginAnswerOmits),
              probe_fields({"PlanResponse", "TaskPlan", "TaskGpu", "EnvVar"}));
  for (size_t t = 0; t < plan->tasks.size(); ++t)
    EXPECT_EQ(plan->tasks[t].tokens,
              sent.tasks(t).gpus(0).token() + "," + sent.tasks(t).gpus(1).token());
}

// plan_to_json writes a task's environment as {"NAME": "value"} and the names set only where
// unset in a list beside it: back as binder.proto's list of EnvVar, to compare.
output::Json env_as_list(output::Json json) {
  for (output::Json& task : json["tasks"]) {
    output::Json list = output::Json::array();
    const output::Json& unset_only = task["env_only_if_unset"];
    for (const auto& [name, value] : task["env"].items()) {
      const bool only_if_unset =
          std::find(unset_only.begin(), unset_only.end(), name) != unset_only.end();
      list.push_back({{"name", name}, {"value", value}, {"only_if_unset", only_if_unset}});
    }
    task["env"] = std::move(list);
  }
  return json;
}

constexpr Omission kPlanJsonOmits[] = {
    {"gpubind.v1.PlanResponse.policy_generation",
     "the daemon's reload count, not the plan's (gpubindctl status prints it)"},
    {"gpubind.v1.PlanResponse.topology_generation", "the same as policy_generation"},
    {"gpubind.v1.PlanResponse.hostname", "the node asked, not the plan (gpubindctl topology)"},
    {"gpubind.v1.PlanResponse.cached", "how the daemon answered, not the plan"},
    {"gpubind.v1.TaskGpu.locality",
     "a plan names no localities without its topology (gpubindctl topology, plan --svg)"},
    {"gpubind.v1.PlanResponse.gpu_places",
     "the launch side's check of Slurm's closest/single; gpubindctl topology shows localities"},
    {"gpubind.v1.PlanResponse.facts_kept", "which daemon planned, not the plan"},
};
// tools/output: plan_to_json (gpubindctl plan --json) of the plan the client reads, whose keys are
// binder.proto's names.
TEST(SchemaMappings, PlanJsonCarriesEveryField) {
  expect_known(kPlanJsonOmits);
  const v1::PlanResponse sent = full_answer(node_of_many_gpus());
  const output::Json json =
      env_as_list(output::Json::parse(plan_to_json(api::plan_from_proto(sent))));
  expect_lost(fields_lost_in_json(sent, json, kPlanJsonOmits),
              probe_fields({"PlanResponse", "TaskPlan", "TaskGpu", "EnvVar"}));
}

// ---- GetTopologyResponse -----------------------------------------------------------------------

// A topology with every field set, as the model holds one: kinds and vendors by name, CPU lists.
v1::GetTopologyResponse full_topology() {
  v1::GetTopologyResponse topology;
  fill_every_field(topology);
  const char* const cpus[] = {"0-7", "16,18", "32-33", "40"};
  const char* const kinds[] = {"L3", "NUMA", "package", "machine"};
  int l = 0;
  const auto fix = [&](v1::Locality& locality) {
    locality.set_cpus(cpus[l % 4]);
    locality.set_kind(kinds[l++ % 4]);
  };
  const char* const vendors[] = {"nvidia", "amd"};
  int g = 0;
  for (v1::Gpu& gpu : *topology.mutable_gpus()) {
    gpu.set_vendor(vendors[g++ % 2]);
    fix(*gpu.mutable_locality());
  }
  const char* const nic_kinds[] = {"slingshot", "infiniband"};
  int n = 0;
  for (v1::Nic& nic : *topology.mutable_nics()) {
    nic.set_kind(nic_kinds[n++ % 2]);
    fix(*nic.mutable_locality());
  }
  return topology;
}

constexpr Omission kTopologyOmits[] = {
    {"gpubind.v1.GetTopologyResponse.topology_generation",
     "the daemon's reload count, set beside the topology (binder_service.cpp)"},
    {"gpubind.v1.GetTopologyResponse.reserved_cpus",
     "the policy's, not the topology's: set beside it by the daemon"},
};

// api: topology_to_proto (the daemon) and topology_from_proto (the tools).
TEST(SchemaMappings, TopologyCarriesEveryField) {
  expect_known(kTopologyOmits);
  const v1::GetTopologyResponse sent = full_topology();
  v1::GetTopologyResponse back;
  api::topology_to_proto(api::topology_from_proto(sent), back);
  expect_lost(fields_lost(sent, back, kTopologyOmits),
              probe_fields({"GetTopologyResponse", "Core", "Gpu", "Nic", "Locality"}));
}

constexpr Omission kTopologyJsonOmits[] = {
    {"gpubind.v1.GetTopologyResponse.topology_generation",
     "the daemon's reload count, not the node's (gpubindctl status prints it)"},
    {"gpubind.v1.GetTopologyResponse.reserved_cpus",
     "the policy's, not the node's (gpubindctl plan --svg draws them)"},
    {"gpubind.v1.GetTopologyResponse.cores",
     "the JSON counts cores and PUs (\"cores\":N,\"pus\":M); the list is the hwloc dump's"},
    {"gpubind.v1.Locality.pci_path",
     "the planner's distance input; the JSON names the locality people read"},
};
constexpr JsonKey kTopologyJsonKeys[] = {
    {"gpubind.v1.GetTopologyResponse.package_count", "packages"},
    {"gpubind.v1.GetTopologyResponse.numa_count", "numa_nodes"},
    {"gpubind.v1.GetTopologyResponse.l3_count", "l3_caches"},
};

// tools/output: topology_to_json (gpubindctl topology --json) of the topology the client reads.
TEST(SchemaMappings, TopologyJsonCarriesEveryField) {
  expect_known(kTopologyJsonOmits);
  expect_known(kTopologyJsonKeys);
  const v1::GetTopologyResponse sent = full_topology();
  const output::Json json = output::Json::parse(topology_to_json(api::topology_from_proto(sent)));
  expect_lost(fields_lost_in_json(sent, json, kTopologyJsonOmits, kTopologyJsonKeys),
              probe_fields({"GetTopologyResponse", "Gpu", "Nic", "Locality"}));
}

// ---- GetStatusResponse -------------------------------------------------------------------------

// The client's status as it holds it, back as the answer it was read from.
v1::GetStatusResponse as_response(const api::DaemonStatus& status) {
  v1::GetStatusResponse response;
  response.set_version(status.version);
  response.set_uptime_s(status.uptime_s);
  response.set_policy_source(status.policy_source);
  response.set_policy_generation(status.policy_generation);
  response.set_topology_source(status.topology_source);
  response.set_topology_generation(status.topology_generation);
  response.set_requests(status.requests);
  response.set_errors(status.errors);
  response.set_cache_hits(status.cache_hits);
  response.set_p50_us(status.p50_us);
  response.set_p99_us(status.p99_us);
  response.set_rss_bytes(status.rss_bytes);
  response.set_last_reload_error(status.last_reload_error);
  response.set_socket_activated(status.socket_activated);
  response.set_cpu_s(status.cpu_s);
  response.set_pid(static_cast<uint32_t>(status.pid));
  response.mutable_plans()->set_cache(status.plans_cache);
  response.mutable_plans()->set_worker(status.plans_worker);
  response.mutable_plans()->set_refused(status.plans_refused);
  response.mutable_plans()->set_node_mismatch(status.plans_node_mismatch);
  for (const auto& [le_s, count] : status.latency_buckets) {
    v1::LatencyBucket& bucket = *response.add_latency_buckets();
    bucket.set_le_s(le_s);
    bucket.set_count(count);
  }
  response.set_latency_count(status.latency_count);
  response.set_latency_sum_s(status.latency_sum_s);
  response.set_reloads(status.reloads);
  response.set_reloads_refused(status.reloads_refused);
  for (const auto& [cause, count] : status.refusals) {
    v1::RefusalCount& refusal = *response.add_refusals();
    refusal.set_cause(cause);
    refusal.set_count(count);
  }
  for (const auto& [reason, count] : status.fallbacks) {
    v1::FallbackCount& fallback = *response.add_fallbacks();
    fallback.set_reason(reason);
    fallback.set_count(count);
  }
  response.set_start_time_s(status.start_time_s);
  return response;
}

// api: status_from_proto (BinderClient::status, so gpubindctl status and the tests' clients).
TEST(SchemaMappings, ClientStatusCarriesEveryField) {
  v1::GetStatusResponse sent;
  fill_every_field(sent);
  expect_lost(fields_lost(sent, as_response(api::status_from_proto(sent)), {}),
              probe_fields({"GetStatusResponse", "PlanCounts", "LatencyBucket", "FallbackCount"}));
}

#ifndef GPUBIND_SCHEMA_PROBE
// The daemon's side, BinderService::GetStatus, writes each field from its own state and counters:
// a daemon that has planned, answered from its cache, refused a request and a reload, and was
// socket activated holds no field at its default, unless GetStatus forgets it. Not in the probe
// build: the service needs the real schema's gRPC stubs.
// Counts that are 0 in any daemon's answer: buckets below its fastest call, reasons never reported.
constexpr Omission kDaemonStatusZeros[] = {
    {"gpubind.v1.LatencyBucket.count", "buckets below the fastest call hold 0; checked below"},
    {"gpubind.v1.FallbackCount.count", "reasons never reported hold 0; checked below"},
    {"gpubind.v1.RefusalCount.count", "causes no request had hold 0; checked below"},
};

TEST(SchemaMappings, DaemonStatusSetsEveryField) {
  const std::string fixtures = GPUBIND_FIXTURES;
  auto state = daemon::load_state({fixtures + "/lumi-g.policy", fixtures + "/lumi-g.xml"}, nullptr);
  ASSERT_TRUE(state) << state.error().message;
  daemon::BinderService service(*state, /*socket_activated=*/true);
  char spool[] = "/tmp/gpubind-schema-XXXXXX";
  ASSERT_NE(mkdtemp(spool), nullptr);
  service.set_fallback_spool(spool);
  std::ofstream(std::string(spool) + "/1.2.3.4") << "unavailable: gone\n";
  v1::PlanRequest planned, refused, mismatch;
  planned.set_ntasks(8);
  refused.set_ntasks(0);
  mismatch.set_ntasks(1);
  mismatch.set_gpus_given(true);
  mismatch.add_gpus()->set_node_index(99);
  mismatch.mutable_gpus(0)->set_token("99");
  for (const v1::PlanRequest* request : {&planned, &planned, &refused, &mismatch}) {
    auto keyed = service.receive(request->SerializeAsString());
    ASSERT_TRUE(keyed) << keyed.error().message;
    EXPECT_EQ(service.answer(*keyed).ok(), request == &planned);
  }
  service.replace_state(*state);
  service.set_reload_error("the policy's line 3 is wrong");

  v1::GetStatusResponse status;
  ASSERT_TRUE(service.GetStatus(nullptr, nullptr, &status).ok());
  rmdir(spool);
  expect_known(kDaemonStatusZeros);
  expect_lost(testing::fields_unset(status, kDaemonStatusZeros), {});
  EXPECT_EQ(status.latency_buckets(status.latency_buckets_size() - 1).count(), 2u);
  EXPECT_EQ(status.refusals(0).cause(), "malformed");
  EXPECT_EQ(status.refusals(0).count(), 1u);
  EXPECT_EQ(status.fallbacks(0).reason(), "unavailable");
  EXPECT_EQ(status.fallbacks(0).count(), 1u);
  EXPECT_EQ(status.policy_source(), fixtures + "/lumi-g.policy");
  EXPECT_EQ(status.topology_source(), fixtures + "/lumi-g.xml");
  EXPECT_EQ(status.policy_generation(), 1u);
  EXPECT_EQ(status.topology_generation(), 1u);
  EXPECT_EQ(status.requests(), 2u);
  EXPECT_EQ(status.errors(), 2u);
  EXPECT_EQ(status.cache_hits(), 1u);
  EXPECT_EQ(status.last_reload_error(), "the policy's line 3 is wrong");
  EXPECT_EQ(status.pid(), static_cast<uint32_t>(getpid()));
}
#endif

// ---- The walk itself ---------------------------------------------------------------------------

// Every field of `type` and of the message types inside it, by full name, sorted.
std::vector<std::string> every_field(const google::protobuf::Descriptor* type) {
  std::vector<std::string> names;
  std::vector<const google::protobuf::Descriptor*> todo = {type}, seen;
  while (!todo.empty()) {
    const auto* message = todo.back();
    todo.pop_back();
    if (std::find(seen.begin(), seen.end(), message) != seen.end()) continue;
    seen.push_back(message);
    for (int i = 0; i < message->field_count(); ++i) {
      names.emplace_back(message->field(i)->full_name());
      if (message->field(i)->message_type()) todo.push_back(message->field(i)->message_type());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Clears `field` wherever it occurs in `message`'s tree.
void clear_everywhere(google::protobuf::Message& message,
                      const google::protobuf::FieldDescriptor* field) {
  const google::protobuf::Reflection& r = *message.GetReflection();
  if (message.GetDescriptor() == field->containing_type()) r.ClearField(&message, field);
  std::vector<const google::protobuf::FieldDescriptor*> set;
  r.ListFields(message, &set);
  for (const auto* inner : set) {
    if (!inner->message_type()) continue;
    if (!inner->is_repeated()) {
      clear_everywhere(*r.MutableMessage(&message, inner), field);
      continue;
    }
    for (int e = 0; e < r.FieldSize(message, inner); ++e)
      clear_everywhere(*r.MutableRepeatedMessage(&message, inner, e), field);
  }
}

// Whichever one field of a filled message goes missing, the comparison names it, and that field
// alone: the mapping tests above see every field.
TEST(SchemaFields, EveryFieldLostIsNamed) {
  v1::PlanRequest request;
  v1::PlanResponse answer;
  v1::GetTopologyResponse topology;
  v1::GetStatusResponse status;
  for (google::protobuf::Message* message :
       std::initializer_list<google::protobuf::Message*>{&request, &answer, &topology, &status}) {
    fill_every_field(*message);
    EXPECT_TRUE(fields_lost(*message, *message, {}).empty());
    const std::vector<std::string> fields = every_field(message->GetDescriptor());
    EXPECT_GT(fields.size(), 10u);
    for (const std::string& name : fields) {
      std::unique_ptr<google::protobuf::Message> copy(message->New());
      copy->CopyFrom(*message);
      clear_everywhere(*copy,
                       google::protobuf::DescriptorPool::generated_pool()->FindFieldByName(name));
      EXPECT_EQ(testing::names_of(fields_lost(*message, *copy, {})),
                std::vector<std::string>{name});
    }
  }
  ASSERT_EQ(answer.tasks_size(), 2);
  EXPECT_TRUE(answer.tasks(0).env(0).only_if_unset());
  EXPECT_FALSE(answer.tasks(0).env(1).only_if_unset()) << "the second element's bools are false";
  EXPECT_NE(answer.tasks(0).rank(), answer.tasks(1).rank());
}

// A flat message filled in full holds no default; each field cleared is named, alone.
TEST(SchemaFields, EveryFieldAtItsDefaultIsNamed) {
  v1::GetStatusResponse status;
  fill_every_field(status);
  EXPECT_EQ(testing::names_of(testing::fields_unset(status, {})), std::vector<std::string>{});
  for (const std::string& name : every_field(status.GetDescriptor())) {
    v1::GetStatusResponse copy = status;
    clear_everywhere(copy,
                     google::protobuf::DescriptorPool::generated_pool()->FindFieldByName(name));
    EXPECT_EQ(testing::names_of(testing::fields_unset(copy, {})), std::vector<std::string>{name});
  }
}

TEST(SchemaFields, JsonWithoutAKeyOrWithAnotherValueLosesTheField) {
  v1::EnvVar var;
  fill_every_field(var);
  const output::Json json{{"name", var.name()}, {"value", "other"}};
  const auto lost = fields_lost_in_json(var, json, {});
  std::vector<std::string> expected = probe_fields({"EnvVar"});
  expected.insert(expected.end(), {"gpubind.v1.EnvVar.only_if_unset", "gpubind.v1.EnvVar.value"});
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(testing::names_of(lost), expected) << testing::describe(lost);
}

}  // namespace
}  // namespace gpubind
