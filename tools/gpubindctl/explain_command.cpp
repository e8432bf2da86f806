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
#include "gpubind/api/convert.h"
#include "gpubind/client/slurm_gpu_choice.h"
#include "gpubind/explain.h"
#include "gpubind/output/explain_format.h"
#include "gpubind/policy_loader.h"
#include "gpubind/protocol/client.h"

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

// The step's GPUs as (node index, the step's token): what the plugin's step table holds.
std::vector<std::pair<int, std::string>> step_table(const Topology& topology,
                                                    const PlanRequest& request) {
  std::vector<std::pair<int, std::string>> table;
  if (!request.gpus) {
    for (size_t g = 0; g < topology.gpus.size(); ++g)
      table.emplace_back(static_cast<int>(g), std::to_string(g));
    return table;
  }
  for (const StepGpu& gpu : *request.gpus)  // --gpus names node indices
    table.emplace_back(gpu.node_index, gpu.token);
  return table;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items)
    out += (out.empty() ? "" : ",") + item;
  return out;
}

// What explain says of a task whose GPUs Slurm chose: the binding the plugin keeps for it.
SlurmGpuChoice kept_choice(const client::KeptBinding& kept) {
  using Basis = client::KeptBinding::Basis;
  SlurmGpuChoice out;
  // No binding kept (no plan to take cores from): the plugin then applies the plan as it is.
  out.basis = kept.basis == Basis::kSameGpus        ? SlurmGpuChoice::Basis::kSameGpus
              : kept.basis == Basis::kSomeOfItsGpus ? SlurmGpuChoice::Basis::kSomeOfItsGpus
              : kept.basis == Basis::kOwnTask       ? SlurmGpuChoice::Basis::kOwnTask
                                                    : SlurmGpuChoice::Basis::kStepGpus;
  out.gpus = kept.task.tokens;
  for (const auto& var : kept.task.env)
    if (var.name == "GPUBIND_GPU_PCI") out.gpu_pci = var.value;
  out.planned_rank = kept.planned_rank;
  out.cpus = kept.task.cpus;
  out.nics = kept.task.nic_names;
  out.may_share = kept.cores_may_be_shared;
  return out;
}

// Each task under Slurm's per-task GPU binding `binding` (--gpu-bind's map_gpu, mask_gpu or
// per_task), through the plugin's own functions: Slurm's GPUs for each task as slurmstepd lists
// them (SLURM_STEP_GPUS by node index, as without ConstrainDevices), then the binding the
// plugin keeps for it. closest and single depend on the CPUs Slurm binds each task to, which
// only the running step knows.
Result<std::vector<SlurmGpuChoice>> slurm_choices(const Explained& e, const PlanRequest& request,
                                                  std::string binding) {
  // srun's --gpu-bind=verbose,map_gpu:... : verbose only makes Slurm say it.
  if (binding.rfind("verbose,", 0) == 0) binding.erase(0, 8);
  const std::string kind = binding.substr(0, binding.find(':'));
  if (kind == "closest" || kind == "single") {
    return make_error("--slurm-gpu-bind " + binding +
                      ": Slurm chooses by the CPUs it binds each task to, which only the running "
                      "step knows (srun --gpu-bind-auto=verbose shows what it kept)");
  }
  const auto table = step_table(e.topology, request);
  std::vector<int> step_gpus;
  for (const auto& entry : table)
    step_gpus.push_back(entry.first);
  if (step_gpus.empty()) return make_error("--slurm-gpu-bind: the step has no GPUs");
  const int ntasks = static_cast<int>(e.plan.tasks.size());
  const auto map = client::slurm_gpu_map(binding, step_gpus, ntasks);
  if (!map) {
    return make_error("--slurm-gpu-bind: cannot read '" + binding +
                      "' (map_gpu:LIST, mask_gpu:LIST or per_task:N, as srun --gpu-bind takes, "
                      "naming GPUs of the step)");
  }
  // The plan as the plugin holds it: the daemon's answer bytes, decoded by the plugin's codec.
  auto step_plan = protocol::decode_plan(api::serialize_plan(e.plan, &e.topology, {}));
  if (!step_plan) return step_plan.error();
  std::vector<SlurmGpuChoice> choices;
  for (int task = 0; task < ntasks; ++task) {
    std::vector<std::string> indices, tokens;
    for (int gpu : (*map)[task]) {
      indices.push_back(std::to_string(gpu));
      for (const auto& [index, token] : table)
        if (index == gpu) tokens.push_back(token);
    }
    const std::string listed = joined(indices);
    const client::EnvLookup env = [&](const std::string& name) -> std::optional<std::string> {
      if (name == "SLURM_STEP_GPUS") return listed;
      if (name == "SLURMD_TRES_BIND") return "gres/gpu:" + binding;
      return std::nullopt;
    };
    const auto choice = client::slurm_task_gpus(env, step_gpus, task, ntasks, *step_plan, "");
    SlurmGpuChoice out;
    if (choice) {
      out = kept_choice(client::keep_slurm_gpus(*step_plan, table, *choice, task, joined(tokens)));
    }
    out.rank = task;
    out.binding = binding;
    choices.push_back(std::move(out));
  }
  return choices;
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
  std::vector<SlurmGpuChoice> slurm;
  if (const auto binding = args.get("slurm-gpu-bind")) {
    auto choices = slurm_choices(e, *request, *binding);
    if (!choices) return fail(choices.error().message, kExitBadInput);
    slurm = std::move(*choices);
  }
  std::cout << (args.has("json") ? explain_to_json(e.topology, e.plan, e.explanation, rank,
                                                   e.policy_lines, slurm)
                                 : explain_to_text(e.topology, e.plan, e.explanation, rank,
                                                   e.policy_lines, slurm));
  return kExitOk;
}

}  // namespace gpubind::cli
