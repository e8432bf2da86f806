#include "gpubind/client/answer_check.h"

#include <algorithm>
#include <cctype>
#include <climits>

#include "gpubind/client/step_env.h"
#include "gpubind/cpuset.h"
#include "gpubind/env_names.h"
#include "gpubind/gpu_tokens.h"
#include "gpubind/gpu_vendors.h"
#include "gpubind/parse.h"

namespace gpubind::client {
namespace {

using gpu_tokens::is_number;

// How the step names the task's GPU `gpu`: its token, or "" when it is not the step's. A step
// given every GPU of the node names them by number within their vendor: at most the node index
// ("?" stands for "a number up to it"). A step that named its GPUs by bus id knows them so.
std::string step_token(const StepRequest& request, const TaskGpuInfo& gpu) {
  if (!request.gpus_given) return gpu.node_index >= 0 ? "?" : "";
  for (const auto& [pci, token] : request.gpus_by_pci)
    if (!pci.empty() && pci == gpu.pci) return token;
  for (const auto& [index, token] : request.gpus)
    if (index == gpu.node_index) return token;
  return "";
}

// Level Zero's flat hierarchy names tiles by number ("7", a whole card "6,7"): on Intel GPUs
// outside the composite hierarchy only, each a number.
bool flat_tiles(const StepRequest& request, const TaskBinding& task, const std::string& token) {
  if (task.vendor != "intel" || request.ze_hierarchy == "composite") return false;
  return gpu_tokens::is_flat_devices(token);
}

// Whether `token` may be the vendor's own number for a step GPU the step calls `step_token`:
// a vendor counts only its GPUs among those the task can see, so never past the step's number
// for it (Slurm's count over every vendor) nor its node index.
bool vendor_number(const std::string& token, const std::string& step_token, int node_index) {
  const auto step_number = parse_whole_number(step_token, 0, INT_MAX);
  return step_number &&
         parse_whole_number(token, 0, std::min<long long>(*step_number, node_index)).has_value();
}

// A task's name for a GPU of the step: the step's token, a tile of it ("3.1", Level Zero's
// composite hierarchy), or flat tile numbers. Tiles are Level Zero's alone: check_env lets only
// ZE_AFFINITY_MASK carry them. A numeric token may have become the GPU's number within its
// vendor (a node with GPUs of two vendors): never past the numbers the step names.
bool names_the_gpu(const StepRequest& request, const TaskBinding& task, const TaskGpuInfo& gpu,
                   const std::string& token) {
  if (token == "?") {
    // A number up to the node index, or a composite tile of one ("3.1").
    const std::string_view card = gpu_tokens::composite_card(gpu.token).value_or(gpu.token);
    if (parse_whole_number(card, 0, gpu.node_index)) return true;
  } else if (gpu.token == token) {
    return true;
  } else if (gpu_tokens::is_composite_tile_of(gpu.token, token)) {
    return true;
  } else if (vendor_number(gpu.token, token, gpu.node_index)) {
    return true;
  }
  return flat_tiles(request, task, gpu.token);
}

Status check_gpus(const StepRequest& request, const TaskBinding& task) {
  for (const TaskGpuInfo& gpu : task.gpus) {
    // Tokens the step gave alone (UUIDs, MIG instances), placed on a node GPU or not.
    const auto& unplaced = request.unplaced_gpus;
    if (!unplaced.empty()) {
      if (std::find(unplaced.begin(), unplaced.end(), gpu.token) == unplaced.end())
        return make_error("GPU '" + gpu.token + "' is not one of the step's");
      continue;
    }
    if (gpu.node_index < 0) return make_error("GPU '" + gpu.token + "' is not one of the step's");
    const std::string token = step_token(request, gpu);
    if (token.empty())
      return make_error("GPU " + std::to_string(gpu.node_index) + " is not one of the step's");
    if (!names_the_gpu(request, task, gpu, token))
      return make_error("GPU " + std::to_string(gpu.node_index) + " is named '" + gpu.token +
                        "', not as the step names it ('" + token + "')");
  }
  return Ok{};
}

// Whether the GPUs `var` names are whole GPUs as the step names them (or as their vendor numbers
// them), not tiles. HIP_VISIBLE_DEVICES numbers devices instead (check_visibility_value).
bool names_whole_gpus(const StepRequest& request, const TaskBinding& task, const TaskEnv& var) {
  if (var.name == "HIP_VISIBLE_DEVICES") return true;
  const std::vector<std::string> items = split_list(var.value);
  const auto& unplaced = request.unplaced_gpus;
  return std::all_of(task.gpus.begin(), task.gpus.end(), [&](const TaskGpuInfo& gpu) {
    // Tokens the step gave alone (UUIDs, MIG instances) name whole GPUs, placed or not.
    if (gpu.node_index < 0 ||
        std::find(unplaced.begin(), unplaced.end(), gpu.token) != unplaced.end())
      return true;
    const std::vector<std::string> parts = split_list(gpu.token);
    const bool named = std::any_of(parts.begin(), parts.end(), [&](const std::string& part) {
      return std::find(items.begin(), items.end(), part) != items.end();
    });
    if (!named) return true;
    if (parts.size() != 1) return false;  // a whole card as its FLAT tiles
    const std::string token = step_token(request, gpu);
    if (token == "?") return parse_whole_number(gpu.token, 0, gpu.node_index).has_value();
    return gpu.token == token || vendor_number(gpu.token, token, gpu.node_index);
  });
}

// Whether `var` hides every GPU of a vendor the task has none of, as that vendor's runtime is
// told to (gpu_vendors.h): an empty list, or for Level Zero one index past the step's GPUs.
bool hides_other_vendor(const StepRequest& request, const TaskEnv& var, const TaskBinding& task) {
  for (const GpuVendorRow& row : gpu_vendor_rows()) {
    if (row.visibility.name != var.name || row.name == task.vendor) continue;
    if (var.value.empty()) return true;
    const long listed = static_cast<long>(request.gpus.size() + request.gpus_by_pci.size());
    return row.hide == HideBy::kIndexNoDeviceHas &&
           parse_whole_number(var.value, listed, 1 << 20).has_value();
  }
  return false;
}

// A visibility variable names some of the task's GPUs (each vendor's its own), or none (a
// vendor the task has none of); HIP_VISIBLE_DEVICES numbers the task's devices from 0.
Status check_visibility_value(const StepRequest& request, const TaskEnv& var,
                              const TaskBinding& task) {
  if (hides_other_vendor(request, var, task)) return Ok{};
  const std::vector<std::string> mine = split_list(task.tokens);
  for (const std::string& item : split_list(var.value)) {
    const bool named =
        var.name == "HIP_VISIBLE_DEVICES"
            ? parse_whole_number(item, 0, static_cast<long>(mine.size()) - 1).has_value()
            : std::find(mine.begin(), mine.end(), item) != mine.end();
    if (!named)
      return make_error(var.name + "=" + var.value + " is not the task's GPUs (" + task.tokens +
                        ")");
  }
  return Ok{};
}

Status check_env(const StepRequest& request, const TaskBinding& task,
                 const std::vector<std::string>& site_env) {
  for (const TaskEnv& var : task.env) {
    if (changes_what_runs(var.name))
      return make_error("variable " + var.name + " changes what the task runs");
    if (!is_binding_variable(var.name, site_env))
      return make_error("variable " + var.name +
                        " is not one binding sets (a site allows more with env_allow=)");
    if (!is_gpu_visibility_var(var.name)) continue;
    if (auto named = check_visibility_value(request, var, task); !named) return named;
    if (var.name != "ZE_AFFINITY_MASK" && !names_whole_gpus(request, task, var))
      return make_error(var.name + "=" + var.value + " names tiles, which only Level Zero has");
  }
  return Ok{};
}

Status check_task(const StepRequest& request, const std::optional<CpuSet>& allowed,
                  const TaskBinding& task, const std::vector<std::string>& site_env) {
  auto cpus = CpuSet::parse_list(task.cpus);
  if (!cpus || cpus->empty()) return make_error("CPUs '" + task.cpus + "' are not a CPU list");
  if (allowed && !cpus->is_subset_of(*allowed))
    return make_error("CPUs " + task.cpus + " are not all the step's (" + allowed->to_list() + ")");
  if (auto gpus = check_gpus(request, task); !gpus) return gpus;
  return check_env(request, task, site_env);
}

}  // namespace

Status check_answer(const StepRequest& request, const StepPlan& plan,
                    const std::vector<std::string>& site_env) {
  if (static_cast<int>(plan.tasks.size()) != request.ntasks)
    return make_error(std::to_string(plan.tasks.size()) + " tasks planned for a step of " +
                      std::to_string(request.ntasks));
  std::optional<CpuSet> allowed;
  if (!request.allowed_cpus.empty()) {
    auto parsed = CpuSet::parse_list(request.allowed_cpus);
    if (!parsed) return parsed.error();
    allowed = *parsed;
  }
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const TaskBinding& task = plan.tasks[i];
    if (task.rank != static_cast<int>(i))
      return make_error("task " + std::to_string(i) + " is planned as rank " +
                        std::to_string(task.rank));
    if (auto checked = check_task(request, allowed, task, site_env); !checked)
      return make_error("task " + std::to_string(i) + ": " + checked.error().message);
  }
  return Ok{};
}

}  // namespace gpubind::client
