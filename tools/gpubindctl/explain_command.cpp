// gpubindctl explain: the plan for a step shape with the planner's reasons for each task's cores,
// GPUs, NIC and variables. Offline from a dump, or on the daemon's node: its topology and its
// policy file, planned here with the reasons recorded and checked against the daemon's own plan.
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "ctl.h"
#include "gpubind/api/binder_client.h"
#include "gpubind/explain.h"
#include "gpubind/output/explain_format.h"
#include "gpubind/policy_loader.h"

namespace gpubind::cli {
namespace {

struct Explained {
  Topology topology;
  Plan plan;
  PlanExplanation explanation;
  PolicyLines policy_lines;
};

// Where the policy file writes each field, for explain to cite; nothing for the defaults or a
// file that cannot be read again (the words then name the file alone).
PolicyLines lines_of(const std::optional<std::string>& policy_file) {
  if (!policy_file) return {};
  std::ifstream in(*policy_file);
  std::stringstream text;
  text << in.rdbuf();
  return in ? policy_field_lines(text.str()) : PolicyLines{};
}

Result<Explained> explain_offline(const Args& args, const PlanRequest& request) {
  auto node = load_offline(args);
  if (!node) return node.error();
  Explained out;
  auto planned = make_plan(node->topology, node->policy, request, out.explanation);
  if (!planned) return Error{"cannot plan: " + planned.error().message, true};
  out.topology = std::move(node->topology);
  out.plan = std::move(*planned);
  out.policy_lines = lines_of(args.get("policy"));
  return out;
}

// Where the two plans part, or "" when each task has the same CPUs, GPUs and NICs.
std::string first_difference(const Plan& mine, const Plan& daemons) {
  if (mine.tasks.size() != daemons.tasks.size()) return "task counts differ";
  for (size_t t = 0; t < mine.tasks.size(); ++t) {
    const TaskPlan &a = mine.tasks[t], &b = daemons.tasks[t];
    const std::string task = "local task " + std::to_string(t);
    if (a.cpus != b.cpus)
      return task + ": CPUs " + a.cpus.to_list() + " here, " + b.cpus.to_list() + " in gpubindd";
    if (a.nic_indices != b.nic_indices)
      return task + ": NICs " + a.nic_names + " here, " + b.nic_names + " in gpubindd";
    if (a.gpus.size() != b.gpus.size()) return task + ": GPU counts differ";
    for (size_t g = 0; g < a.gpus.size(); ++g) {
      if (a.gpus[g].step_index != b.gpus[g].step_index || a.gpus[g].token != b.gpus[g].token)
        return task + ": GPU " + a.gpus[g].token + " here, " + b.gpus[g].token + " in gpubindd";
    }
  }
  return "";
}

// The daemon's topology and policy file, planned here; the daemon's own answer must agree, so
// what is explained is what its tasks get.
Result<Explained> explain_from_daemon(const Args& args, const PlanRequest& request) {
  auto access = daemon_access(args);
  if (!access) return access.error();
  client::BinderClient client(access->socket);
  auto status = client.status(access->timeout);
  if (!status) return status.error();
  auto node = client.topology(access->timeout);
  if (!node) return node.error();
  SitePolicy policy;
  Explained out;
  if (status->policy_source != SitePolicy{}.source) {
    out.policy_lines = lines_of(status->policy_source);
    auto loaded = load_policy_file(status->policy_source);
    if (!loaded) {
      return make_error("cannot read gpubindd's policy to explain its plan: " +
                        loaded.error().message);
    }
    policy = std::move(*loaded);
  }
  auto planned = make_plan(node->topology, policy, request, out.explanation);
  auto reply = client.plan(request, {}, access->timeout);
  if (!reply) return reply.error();
  if (!planned) return Error{"cannot plan: " + planned.error().message, true};
  if (const std::string differs = first_difference(*planned, reply->plan); !differs.empty()) {
    return make_error("gpubindd plans this step otherwise than its policy file " +
                      status->policy_source + " does now (" + differs +
                      "): the file changed since its last reload? (systemctl reload gpubindd)");
  }
  out.topology = std::move(node->topology);
  out.plan = std::move(reply->plan);
  return out;
}

}  // namespace

int run_explain(const Args& args) {
  auto request = request_from(args);
  if (!request) return fail(request.error().message);
  std::optional<int> rank;
  if (args.has("rank")) {
    auto parsed = args.get_int("rank", 0, 0, request->ntasks - 1);
    if (!parsed) return fail(parsed.error().message);
    rank = *parsed;
  }
  if (!offline(args) && args.has("policy"))
    return fail("--policy applies offline only (with --topology)");
  auto explained =
      offline(args) ? explain_offline(args, *request) : explain_from_daemon(args, *request);
  if (!explained) {
    if (offline(args)) return fail(explained.error().message, kExitBadInput);
    const bool bad_input = explained.error().invalid_input || explained.error().node_mismatch;
    return fail_from_daemon(args.get("socket").value_or(client::default_socket()),
                            explained.error(), bad_input ? kExitBadInput : kExitFailed);
  }
  const Explained& e = *explained;
  std::cout << (args.has("json")
                    ? explain_to_json(e.topology, e.plan, e.explanation, rank, e.policy_lines)
                    : explain_to_text(e.topology, e.plan, e.explanation, rank, e.policy_lines));
  return kExitOk;
}

}  // namespace gpubind::cli
