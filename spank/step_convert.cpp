#include "step_convert.h"

namespace gpubind::spank {

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
    for (const auto& [index, token] : step.gpus) {
      if (index < 0) return make_error("GPU index " + std::to_string(index) + " is negative");
      gpus.push_back({index, token});
    }
    request.gpus = std::move(gpus);
  }
  request.unplaced_gpus = step.unplaced_gpus;
  // Counts are 0 ("not given") or more, on every path: the daemon's protobuf has no negatives.
  const std::pair<int, const char*> counts[] = {{step.cpus_per_task, "cpus_per_task"},
                                                {step.gpus_per_task, "gpus_per_task"},
                                                {step.tasks_per_gpu, "tasks_per_gpu"}};
  for (const auto& [value, name] : counts) {
    if (value < 0)
      return make_error(std::string(name) + " is negative (" + std::to_string(value) + ")");
  }
  request.cpus_per_task = step.cpus_per_task;
  request.gpus_per_task = step.gpus_per_task;
  request.tasks_per_gpu = step.tasks_per_gpu;
  if (step.order == "gpu") request.order = Order::kGpu;
  if (step.order == "cpu") request.order = Order::kCpu;
  if (step.smt < -1) return make_error("smt is negative (" + std::to_string(step.smt) + ")");
  if (step.smt >= 0) request.smt = step.smt;
  request.gpu_env = !step.no_gpu_env;
  request.nic_env = !step.no_nic_env;
  if (step.omp) request.omp_places = true;
  if (step.ze_hierarchy == "composite") request.ze_hierarchy = ZeHierarchy::kComposite;
  return request;
}

StepRequest to_step_request(const PlanRequest& request) {
  StepRequest step;
  step.ntasks = request.ntasks;
  if (request.allowed_cpus) step.allowed_cpus = request.allowed_cpus->to_list();
  if (request.allowed_cores) step.allowed_cores = request.allowed_cores->to_list();
  step.gpus_given = request.gpus.has_value();
  step.unplaced_gpus = request.unplaced_gpus;
  if (request.gpus) {
    for (const StepGpu& gpu : *request.gpus)
      step.gpus.emplace_back(gpu.gpu, gpu.token);
  }
  step.cpus_per_task = request.cpus_per_task;
  step.gpus_per_task = request.gpus_per_task;
  step.tasks_per_gpu = request.tasks_per_gpu;
  if (request.order) step.order = order_name(*request.order);
  step.smt = request.smt.value_or(-1);
  step.no_gpu_env = !request.gpu_env;
  step.no_nic_env = !request.nic_env;
  // The step text can only ask for OpenMP places, not refuse the policy's: false means "as the
  // policy says", as the plugin's flag does.
  step.omp = request.omp_places.value_or(false);
  if (request.ze_hierarchy == ZeHierarchy::kComposite) step.ze_hierarchy = "composite";
  return step;
}

StepPlan to_step_plan(const Plan& plan, const std::string& source, const Topology* topology) {
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
      std::string about = gpu.pci;
      if (topology && gpu.gpu >= 0 && gpu.gpu < static_cast<int>(topology->gpus.size())) {
        about += (about.empty() ? "" : ", ") + describe_locality(topology->gpus[gpu.gpu].locality);
      }
      binding.gpus += about.empty() ? gpu.token : gpu.token + " (" + about + ")";
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

}  // namespace gpubind::spank
