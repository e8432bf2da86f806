#include "gpubind/client/worker_gpus.h"

#include <algorithm>
#include <climits>
#include <set>

#include "gpubind/gpu_tokens.h"
#include "gpubind/gpu_vendors.h"
#include "gpubind/parse.h"
#include "gpubind/slurm_words.h"

namespace gpubind::client {
namespace {

bool by_recorded_bus_ids(const EnvLookup& env, const std::vector<std::string>& tokens,
                         StepRequest& request) {
  if (env("GPUBIND_BOUND") != "1") return false;
  const auto recorded_tokens = env("GPUBIND_GPUS");
  const auto recorded_pcis = env("GPUBIND_GPU_PCI");
  if (!recorded_tokens || !recorded_pcis) return false;
  const std::vector<std::string> names = split_list(*recorded_tokens);
  const std::vector<std::string> pcis = split_list(*recorded_pcis);
  // One bus id per token; a card's tiles share one and cannot be told apart by it.
  if (names.size() != pcis.size() || std::set(pcis.begin(), pcis.end()).size() != pcis.size())
    return false;
  std::vector<std::pair<std::string, std::string>> found;
  for (const std::string& token : tokens) {
    const auto at = std::find(names.begin(), names.end(), token);
    if (at == names.end()) return false;  // changed since gpubind set it
    found.emplace_back(pcis[at - names.begin()], token);
  }
  request.gpus_by_pci = std::move(found);
  return true;
}

// A task gpubind bound whose vendors' visibility variables still hold what it set, together
// naming every GPU it recorded (on a node with GPUs of several vendors each vendor's variable
// holds that vendor's own numbers, so a token alone may name two GPUs): every recorded GPU.
bool as_recorded(const EnvLookup& env, StepRequest& request) {
  if (env("GPUBIND_BOUND") != "1") return false;
  const auto recorded_tokens = env("GPUBIND_GPUS");
  const auto recorded_pcis = env("GPUBIND_GPU_PCI");
  if (!recorded_tokens || !recorded_pcis) return false;
  std::vector<std::string> names = split_list(*recorded_tokens);
  const std::vector<std::string> pcis = split_list(*recorded_pcis);
  if (names.size() != pcis.size() || std::set(pcis.begin(), pcis.end()).size() != pcis.size())
    return false;
  std::vector<std::string> listed;
  for (const GpuVendorRow& row : gpu_vendor_rows()) {
    for (std::string& token : split_list(env(std::string(row.visibility.name)).value_or("")))
      listed.push_back(std::move(token));
  }
  std::vector<std::string> sorted_names = names;
  std::sort(sorted_names.begin(), sorted_names.end());
  std::sort(listed.begin(), listed.end());
  if (listed != sorted_names) return false;
  std::vector<std::pair<std::string, std::string>> found;
  for (size_t i = 0; i < names.size(); ++i)
    found.emplace_back(pcis[i], names[i]);
  request.gpus_by_pci = std::move(found);
  return true;
}

// Slurm's list of node GPU numbers paired with the visibility tokens, position by position, where
// both name the same number of GPUs.
bool by_position(const std::string& indices, const std::vector<std::string>& tokens,
                 StepRequest& request) {
  const std::vector<std::string> numbers = split_list(indices);
  if (numbers.size() != tokens.size()) return false;
  std::vector<std::pair<int, std::string>> found;
  for (size_t i = 0; i < numbers.size(); ++i) {
    const auto index = parse_whole_number(numbers[i], 0, INT_MAX);
    if (!index) return false;
    found.emplace_back(static_cast<int>(*index), tokens[i]);
  }
  request.gpus = std::move(found);
  return true;
}

// Flux under resource containment: each number is a position among this node's GPUs in the
// job's R, which lists them ascending.
bool by_flux_positions(const std::vector<std::string>& tokens, const FluxJob& flux,
                       StepRequest& request) {
  if (!flux.gpus) return false;
  std::vector<std::pair<int, std::string>> found;
  for (const std::string& token : tokens) {
    const auto position = parse_whole_number(token, 0, INT_MAX);
    if (!position || *position >= static_cast<long long>(flux.gpus->size())) return false;
    found.emplace_back((*flux.gpus)[static_cast<size_t>(*position)], token);
  }
  request.gpus = std::move(found);
  return true;
}

std::string joined(const std::vector<int>& numbers) {
  std::string text;
  for (int n : numbers)
    text += (text.empty() ? "" : ",") + std::to_string(n);
  return text;
}

bool by_node_numbers(const std::vector<std::string>& tokens, StepRequest& request) {
  std::vector<std::pair<int, std::string>> found;
  for (const std::string& token : tokens) {
    const auto index = parse_whole_number(token, 0, INT_MAX);
    if (!index) return false;
    found.emplace_back(static_cast<int>(*index), token);
  }
  request.gpus = std::move(found);
  return true;
}

// Under Flux's constrained resources: positions within the job's GPUs here, mapped through R.
WorkerGpus flux_worker_gpus(const std::string& named, const std::vector<std::string>& tokens,
                            const FluxJob& flux, StepRequest& request) {
  WorkerGpus out;
  if (by_flux_positions(tokens, flux, request)) {
    out.how = named + ", positions within the Flux job's GPUs here: the node's GPUs " +
              joined(*flux.gpus) + " (the job's R; FLUX_EXEC_CONSTRAINED_RESOURCES)";
    return out;
  }
  request.unplaced_gpus = tokens;
  out.how = named + ", by token";
  out.warning =
      named + " are positions within the Flux job's GPUs on this node (constrained " +
      "resources), and " +
      (flux.gpus ? "the job's R gives " + std::to_string(flux.gpus->size()) + " GPU(s) here"
                 : flux.error) +
      ": each worker gets its share of them, but cores are placed without their locality";
  return out;
}

// Tokens no rule above placed: the planner places MIG instances and GPU UUIDs (PBS's cgroup
// hook, Slurm's env_uuid) on the node's GPUs itself and says when it cannot; anything else is
// shared out without locality, said.
WorkerGpus by_token(const std::string& named, const std::vector<std::string>& tokens,
                    StepRequest& request) {
  WorkerGpus out;
  request.unplaced_gpus = tokens;
  out.how = named + ", by token";
  const bool by_name = std::all_of(tokens.begin(), tokens.end(), [](const std::string& t) {
    return gpu_tokens::is_mig(t) || gpu_tokens::is_gpu_uuid(t);
  });
  if (!by_name) {
    out.warning = "cannot tell which of the node's GPUs " + named +
                  " names: each worker gets its share of them, but cores are placed without "
                  "their locality";
  }
  return out;
}

}  // namespace

WorkerGpus worker_gpus(const EnvLookup& env, StepRequest& request, const FluxJob& flux) {
  WorkerGpus out;
  request.gpus_given = true;
  if (as_recorded(env, request)) {
    out.how = "GPUBIND_GPUS=" + env("GPUBIND_GPUS").value_or("") +
              ", by the bus ids gpubind recorded (GPUBIND_GPU_PCI=" +
              env("GPUBIND_GPU_PCI").value_or("") + ")";
    return out;
  }
  // The first variable that names GPUs; an empty one (a vendor the task has none of, on a node
  // with GPUs of several) only where none does.
  const char* var = nullptr;
  std::optional<std::string> value;
  for (const std::string_view name : gpu_visibility_vars()) {
    const auto listed = env(std::string(name));
    if (!listed) continue;
    if (!var || (value->empty() && !listed->empty())) {
      var = name.data();
      value = listed;
    }
  }
  if (!var) {
    if (env(slurm::kJobId) && !slurm_says_nothing_about_gpus(env)) {
      out.how = "none: the Slurm step has no GPU";
      return out;
    }
    request.gpus_given = false;
    out.how = "every GPU of the node (no visibility variable is set)";
    return out;
  }
  const std::string named = std::string(var) + "=" + *value;
  const std::vector<std::string> tokens = split_list(*value);
  if (tokens.empty()) {
    out.how = "none (" + named + ")";
    return out;
  }
  // HIP renumbers CUDA_VISIBLE_DEVICES within ROCR_VISIBLE_DEVICES (gpubind sets both so): the
  // variable that names the recorded GPUs is the one to read.
  for (const std::string_view var_name : gpu_visibility_vars()) {
    const char* name = var_name.data();
    const auto listed = env(name);
    if (listed && by_recorded_bus_ids(env, split_list(*listed), request)) {
      out.how = std::string(name) + "=" + *listed + ", by the bus ids gpubind recorded (" +
                "GPUBIND_GPU_PCI=" + env("GPUBIND_GPU_PCI").value_or("") + ")";
      return out;
    }
  }
  if (const auto step = env(slurm::kStepGpus); step && split_list(*step).size() == tokens.size()) {
    StepGpus gpus = step_gpus_from_env(env);
    if (gpus.warning.empty() && gpus.unplaced.empty() && !gpus.gpus.empty()) {
      request.gpus = std::move(gpus.gpus);
      out.how = named + ", the node's GPUs " + *step + " (SLURM_STEP_GPUS)";
      return out;
    }
  }
  // A batch script or salloc shell: the job's GPUs, as Slurm lists them beside its tokens.
  if (const auto job = env(slurm::kJobGpus);
      job && !env(slurm::kStepGpus) && by_position(*job, tokens, request)) {
    out.how = named + ", the node's GPUs " + *job + " (SLURM_JOB_GPUS)";
    return out;
  }
  if (flux.constrained) return flux_worker_gpus(named, tokens, flux, request);
  // Outside Slurm only: inside a job, a device cgroup may have renumbered them.
  if (!env(slurm::kJobId) && by_node_numbers(tokens, request)) {
    out.how = named + ", the node's GPU numbers";
    return out;
  }
  return by_token(named, tokens, request);
}

}  // namespace gpubind::client
