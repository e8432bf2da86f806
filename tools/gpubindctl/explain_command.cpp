// gpubindctl explain: the plan for a step shape with the planner's reasons for each task's cores,
// GPUs, NIC and variables. Offline from a dump, or on the daemon's node: its topology and its
// policy file, planned here with the reasons recorded and checked against the daemon's own plan.
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include <algorithm>
#include "ctl.h"
#include "gpubind/api/binder_client.h"
#include "gpubind/api/convert.h"
#include "gpubind/client/slurm_gpu_choice.h"
#include "gpubind/explain.h"
#include "gpubind/output/explain_format.h"
#include "gpubind/policy_loader.h"
#include "gpubind/protocol/client.h"
#include "gpubind/slurm_words.h"

namespace gpubind::ctl {
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

Status fix_slurm_gpus(const Topology& topology, PlanRequest& request, std::string binding);

// The request with Slurm's per-task GPU binding, where --slurm-gpu-bind gives one, as the
// planner takes it.
Result<PlanRequest> with_slurm_choice(const Args& args, const Topology& topology,
                                      PlanRequest request) {
  if (const auto binding = args.get("slurm-gpu-bind")) {
    if (auto fixed = fix_slurm_gpus(topology, request, *binding); !fixed)
      return Error{fixed.error().message, true};
  }
  return request;
}

Result<Explained> explain_offline(const Args& args, const PlanRequest& asked) {
  auto node = load_offline(args);
  if (!node) return node.error();
  auto request = with_slurm_choice(args, node->topology, asked);
  if (!request) return request.error();
  Explained out;
  auto planned = make_plan(node->topology, node->policy, *request, out.explanation);
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
Result<Explained> explain_from_daemon(const Args& args, const PlanRequest& asked) {
  auto access = daemon_access(args);
  if (!access) return access.error();
  api::BinderClient client(access->socket);
  auto status = client.status(access->timeout);
  if (!status) return status.error();
  auto node = client.topology(access->timeout);
  if (!node) return node.error();
  auto fixed_request = with_slurm_choice(args, node->topology, asked);
  if (!fixed_request) return fixed_request.error();
  const PlanRequest& request = *fixed_request;
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

// Slurm's per-task GPU binding `binding` (--gpu-bind's map_gpu, mask_gpu or per_task) as what
// it is to the planner: each task's GPUs fixed before planning, as the plugin's request carries
// them (client::add_facts). closest and single depend on the CPUs Slurm binds each task to,
// which only the running step knows.
Status fix_slurm_gpus(const Topology& topology, PlanRequest& request, std::string binding) {
  binding = slurm::without_verbosity(binding);
  if (client::gpus_chosen_by_cpus(binding)) {
    return make_error("--slurm-gpu-bind " + binding +
                      ": Slurm chooses by the CPUs it binds each task to, which only the running "
                      "step knows (srun --gpu-bind-auto=verbose shows what it kept)");
  }
  std::vector<int> step_gpus;
  if (request.gpus) {
    for (const StepGpu& gpu : *request.gpus)  // --gpus names node indices
      step_gpus.push_back(gpu.node_index);
  } else {
    for (size_t g = 0; g < topology.gpus.size(); ++g)
      step_gpus.push_back(static_cast<int>(g));
  }
  if (step_gpus.empty()) return make_error("--slurm-gpu-bind: the step has no GPUs");
  const auto map = client::slurm_gpu_map(binding, step_gpus, request.ntasks);
  if (!map) {
    return make_error("--slurm-gpu-bind: cannot read '" + binding +
                      "' (map_gpu:LIST, mask_gpu:LIST or per_task:N, as srun --gpu-bind takes, "
                      "naming GPUs of the step)");
  }
  request.fixed.assign(map->size(), {});
  for (size_t task = 0; task < map->size(); ++task) {
    for (int gpu : (*map)[task]) {
      const auto at = std::find(step_gpus.begin(), step_gpus.end(), gpu);
      request.fixed[task].gpus.push_back(static_cast<int>(at - step_gpus.begin()));
    }
  }
  return Ok{};
}

}  // namespace

int run_explain(const Args& args) {
  if (args.get("job")) return run_explain_job(args);
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
    return fail_from_daemon(args.get("socket").value_or(api::default_socket()), explained.error(),
                            bad_input ? kExitBadInput : kExitFailed);
  }
  const Explained& e = *explained;
  std::cout << (args.has("json")
                    ? explain_to_json(e.topology, e.plan, e.explanation, rank, e.policy_lines)
                    : explain_to_text(e.topology, e.plan, e.explanation, rank, e.policy_lines));
  return kExitOk;
}

}  // namespace gpubind::ctl
