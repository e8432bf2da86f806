// gpubindctl topology and plan: the node as gpubind sees it and the plan for a step shape, offline
// from an hwloc XML dump or from gpubindd.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "ctl.h"
#include "gpubind/api/binder_client.h"
#include "gpubind/output/json.h"
#include "gpubind/output/plan_format.h"
#include "gpubind/output/plan_svg.h"
#include "gpubind/output/plan_timing.h"

namespace gpubind::ctl {
namespace {

// What a plan is drawn on: the node, its reserved CPUs and the plan itself.
struct PlannedNode {
  Topology topology;
  CpuSet reserved;
  Plan plan;
  std::optional<PlanTiming> timing;  // --time (offline only)
};

Result<PlannedNode> plan_offline(const Args& args, const PlanRequest& request) {
  auto node = load_offline(args);
  if (!node) return node.error();
  auto planned = make_plan(node->topology, node->policy, request);
  if (!planned) return Error{"cannot plan: " + planned.error().message, true};
  const CpuSet reserved = reserved_cpus(node->topology, node->policy);
  std::optional<PlanTiming> timing;
  if (args.has("time")) timing = time_make_plan(node->topology, node->policy, request);
  return PlannedNode{std::move(node->topology), reserved, std::move(*planned), timing};
}

// The topology is fetched only for --svg, and again if a reload came between the two calls.
Result<PlannedNode> plan_from_daemon(const Args& args, const PlanRequest& request) {
  auto access = daemon_access(args);
  if (!access) return access.error();
  api::BinderClient client(access->socket);
  for (int attempt = 0;; ++attempt) {
    auto reply = client.plan(request, {}, access->timeout);
    if (!reply) return reply.error();
    PlannedNode planned{{}, {}, std::move(reply->plan), std::nullopt};
    if (!args.has("svg")) return planned;
    auto node = client.topology(access->timeout);
    if (!node) return node.error();
    if (node->topology_generation == reply->topology_generation || attempt == 1) {
      planned.topology = std::move(node->topology);
      planned.reserved = node->reserved;
      return planned;
    }
  }
}

std::string svg_title(const PlannedNode& node) {
  const std::string host = node.topology.hostname.empty() ? "node" : node.topology.hostname;
  const size_t tasks = node.plan.tasks.size();
  return "gpubind plan: " + std::to_string(tasks) + (tasks == 1 ? " task on " : " tasks on ") +
         host + " (" + node.topology.source + ")";
}

// The plan's JSON object with "planner_us" added as its last key.
std::string json_with_timing(const Plan& plan, const PlanTiming& timing) {
  std::string json = plan_to_json(plan);
  const size_t close = json.rfind('}');
  char key[64];
  std::snprintf(key, sizeof key, ",\"planner_us\":%.1f", timing.median_us);
  return json.insert(close, key);
}

std::string plan_output(const Args& args, const PlannedNode& planned) {
  const bool json = args.has("json");
  if (!planned.timing) return json ? plan_to_json(planned.plan) : plan_to_table(planned.plan);
  if (json) return json_with_timing(planned.plan, *planned.timing);
  char line[96];
  std::snprintf(line, sizeof line, "planner: %.1f us median of %d runs\n",
                planned.timing->median_us, planned.timing->runs);
  return plan_to_table(planned.plan) + line;
}

}  // namespace

int run_topology(const Args& args) {
  Topology topology;
  if (offline(args)) {
    auto node = load_offline(args);
    if (!node) return fail(node.error().message);
    topology = std::move(node->topology);
  } else {
    if (args.has("policy")) return fail("--policy applies offline only (with --topology)");
    auto access = daemon_access(args);
    if (!access) return fail(access.error().message);
    auto fetched = api::BinderClient(access->socket).topology(access->timeout);
    if (!fetched) return fail_from_daemon(access->socket, fetched.error());
    topology = std::move(fetched->topology);
  }
  std::cout << (args.has("json") ? topology_to_json(topology) : topology_to_text(topology));
  return kExitOk;
}

int run_plan(const Args& args) {
  auto request = request_from(args);
  if (!request) return fail(request.error().message);
  if (args.has("svg") && args.get("svg")->empty()) return fail("--svg: empty path");
  if (!offline(args) && args.has("policy"))
    return fail("--policy applies offline only (with --topology)");
  if (!offline(args) && args.has("time"))
    return fail("--time applies offline only (with --topology)");
  auto planned = offline(args) ? plan_offline(args, *request) : plan_from_daemon(args, *request);
  if (!planned) {
    if (offline(args)) return fail(planned.error().message, kExitBadInput);
    // A GPU or CPU the daemon's node lacks is, here, one the command line named.
    const bool bad_input = planned.error().invalid_input || planned.error().node_mismatch;
    return fail_from_daemon(args.get("socket").value_or(api::default_socket()), planned.error(),
                            bad_input ? kExitBadInput : kExitFailed);
  }
  if (auto svg = args.get("svg")) {
    const std::string drawing =
        plan_to_svg(planned->topology, planned->reserved, planned->plan, svg_title(*planned));
    if (auto written = write_file_atomically(*svg, drawing); !written)
      return fail("--svg: " + written.error().message, kExitFailed);
  }
  std::cout << plan_output(args, *planned);
  return kExitOk;
}

}  // namespace gpubind::ctl
