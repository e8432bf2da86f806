// libgpubind_stepd.so: loaded by the SPANK plugin in slurmstepd only. Asks gpubindd for the
// step's plan, and plans in-process from the same library when the daemon cannot answer.
#include <cstdlib>
#include <cstring>
#include <exception>

#include "binder_client.h"
#include "gpubind/node.h"
#include "gpubind/planner.h"
#include "step_text.h"
#include "stepd_abi.h"

namespace gpubind::spank {
namespace {

Result<PlanRequest> to_plan_request(const StepRequest& step) {
  PlanRequest request;
  request.ntasks = step.ntasks;
  if (!step.allowed_cpus.empty()) {
    auto cpus = CpuSet::parse_list(step.allowed_cpus);
    if (!cpus) return make_error("the step's CPUs: " + cpus.error().message);
    request.allowed_cpus = *cpus;
  }
  if (!step.allowed_cores.empty()) {
    auto cores = CpuSet::parse_list(step.allowed_cores);
    if (!cores) return make_error("the step's cores: " + cores.error().message);
    request.allowed_cores = *cores;
  }
  if (step.gpus_given) {
    std::vector<StepGpu> gpus;
    for (const auto& [index, token] : step.gpus)
      gpus.push_back({index, token});
    request.gpus = std::move(gpus);
  }
  request.cpus_per_task = step.cpus_per_task;
  request.gpus_per_task = step.gpus_per_task;
  request.tasks_per_gpu = step.tasks_per_gpu;
  if (step.order == "gpu") request.order = Order::kGpu;
  if (step.order == "cpu") request.order = Order::kCpu;
  if (step.smt >= 0) request.smt = step.smt;
  request.gpu_env = !step.no_gpu_env;
  request.nic_env = !step.no_nic_env;
  if (step.omp) request.omp_places = true;
  return request;
}

StepPlan to_step_plan(const Plan& plan, const std::string& source) {
  StepPlan out;
  out.source = source;
  out.warnings = plan.warnings;
  for (const TaskPlan& task : plan.tasks) {
    TaskBinding binding;
    binding.rank = task.rank;
    binding.cpus = task.cpus.to_list();
    binding.numa = task.numa;
    binding.l3 = task.l3;
    for (const TaskGpu& gpu : task.gpus) {
      if (!binding.gpus.empty()) binding.gpus += " ";
      binding.gpus += gpu.token + " (" + gpu.pci + ")";
      binding.tokens += (binding.tokens.empty() ? "" : ",") + gpu.token;
      binding.vendor = vendor_name(gpu.vendor);
    }
    binding.ngpus = static_cast<int>(task.gpus.size());
    binding.nic = task.nic_name;
    for (const EnvVar& var : task.env)
      binding.env.push_back({var.name, var.value, var.only_if_unset});
    out.tasks.push_back(std::move(binding));
  }
  return out;
}

Result<StepPlan> plan_in_process(const StepRequest& step, const PlanRequest& request) {
  NodeSources sources;
  if (!step.policy.empty()) sources.policy_path = step.policy;
  auto node = load_node(sources);
  if (!node) return node.error();
  auto plan = make_plan(node->topology, node->policy, request);
  if (!plan) return plan.error();
  return to_step_plan(*plan, "fallback");
}

Result<StepPlan> plan_step(const std::string& text) {
  auto step = decode_request(text);
  if (!step) return step.error();
  auto request = to_plan_request(*step);
  if (!request) return request.error();
  client::BinderClient daemon(step->socket);
  auto reply = daemon.plan(*request, {step->job_id, step->step_id},
                           std::chrono::milliseconds(step->timeout_ms));
  if (reply) return to_step_plan(reply->plan, "daemon");
  // A request the daemon refuses would be refused in-process too: no point retrying.
  if (!step->fallback || reply.error().invalid_input) return reply.error();
  auto local = plan_in_process(*step, *request);
  if (!local) {
    return make_error(reply.error().message +
                      "; in-process planning failed too: " + local.error().message);
  }
  local->warnings.insert(local->warnings.begin(),
                         reply.error().message + "; planned in-process instead");
  return local;
}

char* copy_out(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

}  // namespace
}  // namespace gpubind::spank

extern "C" {

__attribute__((visibility("default"))) int gpubind_stepd_abi_version(void) {
  return GPUBIND_STEPD_ABI_VERSION;
}

__attribute__((visibility("default"))) int gpubind_stepd_plan(const char* request, char** answer) {
  using namespace gpubind::spank;
  try {
    auto plan = plan_step(request ? request : "");
    *answer = copy_out(plan ? encode(*plan) : plan.error().message);
    return plan ? 0 : 1;
  } catch (const std::exception& e) {
    *answer = copy_out(std::string("gpubind: internal error: ") + e.what());
  } catch (...) {
    *answer = copy_out("gpubind: internal error");
  }
  return 1;
}

__attribute__((visibility("default"))) void gpubind_stepd_free(char* answer) {
  std::free(answer);
}

}  // extern "C"
