#include "gpubind/client/step_env.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdio>

#include "gpubind/env.h"
#include "gpubind/gpu_tokens.h"
#include "gpubind/parse.h"
#include "gpubind/slurm_words.h"

namespace gpubind::client {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma - start);
    if (!item.empty()) items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

namespace {

std::optional<int> to_index(const std::string& text) {
  const auto value = parse_whole_number(text, 0, INT_MAX);
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

}  // namespace

// Slurm never sets HIP_VISIBLE_DEVICES: one in the task is the user's (or the plan's).
std::optional<EnvEntry> slurm_visibility_var(const EnvLookup& env) {
  for (const std::string_view name : slurm_visibility_vars())
    if (auto value = env(std::string(name))) return EnvEntry{std::string(name), *value};
  return std::nullopt;
}

StepGpus step_gpus_from_env(const EnvLookup& env) {
  StepGpus out;
  // The step's own list only: a step without GPUs in a job with GPUs (--gres=none, --gpus=0) has
  // the job's SLURM_JOB_GPUS but no SLURM_STEP_GPUS, and must get no GPU.
  const std::optional<std::string> indices = env(slurm::kStepGpus);
  const std::optional<EnvEntry> visibility = slurm_visibility_var(env);
  const std::optional<std::string> tokens =
      visibility ? std::optional<std::string>(visibility->value) : std::nullopt;
  const std::string token_var = visibility ? visibility->name : "";
  const std::vector<std::string> index_list =
      indices ? split_list(*indices) : std::vector<std::string>{};
  const std::vector<std::string> token_list =
      tokens ? split_list(*tokens) : std::vector<std::string>{};
  const auto is_mig = [](const std::string& t) { return gpu_tokens::is_mig(t); };
  const auto is_uuid = [](const std::string& t) { return gpu_tokens::is_gpu_uuid(t); };
  if (std::any_of(token_list.begin(), token_list.end(), is_mig)) {
    out.unplaced = token_list;
    if (index_list.size() == token_list.size()) {
      for (const std::string& text : index_list) {
        const auto index = to_index(text);
        if (!index) {
          out.unplaced_slurm_indices.clear();
          break;
        }
        out.unplaced_slurm_indices.push_back(*index);
      }
    }
    return out;
  }
  if (index_list.empty() && !token_list.empty() &&
      std::all_of(token_list.begin(), token_list.end(), is_uuid)) {
    out.unplaced = token_list;  // the node's UUIDs tell which GPUs they are
    return out;
  }
  if (!index_list.empty()) {
    const bool tokens_match = token_list.size() == index_list.size();
    if (tokens && !tokens_match) {
      out.warning = token_var + "=" + *tokens + " does not match SLURM_STEP_GPUS=" + *indices +
                    "; using the indices as tokens";
    }
    for (size_t i = 0; i < index_list.size(); ++i) {
      const auto index = to_index(index_list[i]);
      if (!index) {
        out.gpus.clear();
        out.warning = "cannot read GPU index '" + index_list[i] +
                      "' in SLURM_STEP_GPUS=" + *indices + "; binding without GPUs";
        return out;
      }
      out.gpus.emplace_back(*index, tokens_match ? token_list[i] : index_list[i]);
    }
    return out;
  }
  // No Slurm GPU indices: a numeric visibility list is the node's numbering.
  for (const std::string& token : token_list) {
    const auto index = to_index(token);
    if (!index) {
      out.gpus.clear();
      out.warning = "cannot map " + token_var + "=" + *tokens +
                    " to the node's GPUs without SLURM_STEP_GPUS; binding without GPUs";
      return out;
    }
    out.gpus.emplace_back(*index, token);
  }
  return out;
}

int count_from_env(const EnvLookup& env, const std::string& name) {
  const auto value = env(name);
  if (!value) return 0;
  // "a100:2" counts 2; "2" counts 2.
  const size_t colon = value->rfind(':');
  const auto number = to_index(colon == std::string::npos ? *value : value->substr(colon + 1));
  return number.value_or(0);
}

std::string ze_hierarchy_from_env(const EnvLookup& env) {
  // Level Zero compares the value exactly (compute-runtime's strcmp with "COMPOSITE"): any other
  // spelling, "composite" included, leaves it in FLAT, and so does the plan.
  return env("ZE_FLAT_DEVICE_HIERARCHY") == "COMPOSITE" ? "composite" : "";
}

std::string ze_hierarchy_warning(const EnvLookup& env) {
  const auto value = env("ZE_FLAT_DEVICE_HIERARCHY");
  if (!value || *value == "FLAT" || *value == "COMPOSITE" || *value == "COMBINED") return "";
  return "ZE_FLAT_DEVICE_HIERARCHY=" + value->substr(0, 32) +
         " is none of Level Zero's values (FLAT, COMPOSITE, COMBINED, compared exactly): Level "
         "Zero stays in FLAT, and the tasks' GPUs are named as FLAT devices";
}

namespace {

// Where the task's GPUs sit in the primary variable's list as the task will see it (the plan's
// value, or Slurm's whole-step list when the site's policy leaves the variable alone or sets it
// only if unset): runtimes that apply a variable after the primary count in that list.
std::optional<std::string> positions_in_primary(const EnvLookup& task_env, const TaskBinding& task,
                                                const std::string& primary) {
  const auto value = task_env(primary);
  if (!value) return std::nullopt;  // nothing applied first: the tokens stand on their own
  const std::vector<std::string> listed = split_list(*value);
  std::string positions;
  for (const std::string& token : split_list(task.tokens)) {
    const auto at = std::find(listed.begin(), listed.end(), token);
    if (at == listed.end()) return std::nullopt;
    positions += (positions.empty() ? "" : ",") + std::to_string(at - listed.begin());
  }
  return positions;
}

// FNV-1a: a value's fingerprint in the record, so the record does not repeat the values.
std::string fingerprint(const std::string& value) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : value)
    hash = (hash ^ c) * 16777619u;
  char text[9];
  std::snprintf(text, sizeof text, "%08x", hash);
  return text;
}

}  // namespace

std::string record_of_set_vars(const std::vector<std::pair<std::string, std::string>>& set) {
  std::string record;
  for (const auto& [name, value] : set) {
    // What Slurm sets for a step's GPUs is its own again in a nested step: never recorded. HIP's
    // list, which Slurm never sets, is, so a nested step tells gpubind's from the user's.
    const auto slurms = slurm_visibility_vars();
    if (std::find(slurms.begin(), slurms.end(), name) != slurms.end() ||
        name.rfind("GPUBIND_", 0) == 0)
      continue;
    record += (record.empty() ? "" : ",") + name + ":" + fingerprint(value);
  }
  return record;
}

std::vector<EnvEntry> inherited_values(const EnvLookup& env) {
  std::vector<EnvEntry> held;
  const std::optional<std::string> record = env(kSetRecordVar);
  if (!record) return held;
  size_t begin = 0;
  while (begin < record->size()) {
    size_t end = record->find(',', begin);
    if (end == std::string::npos) end = record->size();
    const std::string entry = record->substr(begin, end - begin);
    begin = end + 1;
    const size_t colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0) continue;
    const std::string name = entry.substr(0, colon);
    const std::optional<std::string> value = env(name);
    if (value && fingerprint(*value) == entry.substr(colon + 1)) held.push_back({name, *value});
  }
  return held;
}

std::vector<std::string> binding_info_vars(const EnvLookup& env) {
  std::vector<std::string> info;
  for (const char* name : kBindingInfoVars) {
    if (env(name)) info.push_back(name);
  }
  if (env(kSetRecordVar)) info.push_back(kSetRecordVar);
  return info;
}

std::vector<std::string> stale_binding_vars(const EnvLookup& env) {
  std::vector<std::string> stale = binding_info_vars(env);
  for (const EnvEntry& var : inherited_values(env))
    stale.push_back(var.name);
  return stale;
}

std::vector<VisibilityUpdate> other_visibility_vars(const EnvLookup& task_env,
                                                    const TaskBinding& task) {
  const GpuVendorRow* row = gpu_vendor(task.vendor);
  std::vector<VisibilityUpdate> updates;
  if (!row || task.gpus.empty()) return updates;
  const std::string primary(row->visibility.name);
  const std::optional<std::string> after_primary =
      row->read_after[0].name.empty() ? std::nullopt
                                      : positions_in_primary(task_env, task, primary);
  auto planned = [&](const char* name) {
    return std::any_of(task.env.begin(), task.env.end(),
                       [&](const TaskEnv& var) { return var.name == name; });
  };
  for (const std::string_view var : slurm_visibility_vars()) {
    const std::string name(var);
    if (name == primary || !task_env(name) || planned(name.c_str())) continue;
    const bool applied_after_primary = after_primary && row->reads_after(name);
    updates.push_back({name, applied_after_primary ? *after_primary : task.tokens});
  }
  return updates;
}

std::optional<int> het_component(const EnvLookup& env, unsigned long job_id, int components) {
  const std::string id = std::to_string(job_id);
  for (int k = 0; k < components && k < slurm::kMaxHetComponents; ++k) {
    for (const char* prefix : slurm::kHetGroupPrefixes) {
      if (env(prefix + std::to_string(k)) == id) return k;
    }
  }
  return std::nullopt;
}

bool slurm_says_nothing_about_gpus(const EnvLookup& env) {
  for (const char* name : slurm::kGpuCountVars)
    if (env(name)) return false;
  for (const std::string_view name : slurm_visibility_vars())
    if (env(std::string(name))) return false;
  return true;
}

TaskBinding with_launch_cpus(const TaskBinding& task, const std::string& cpus) {
  TaskBinding out = task;
  out.cpus = cpus;
  out.l3_index = -1;
  out.env.push_back({"GPUBIND_CPUS", cpus, false});
  return out;
}

std::string describe_gpus(const std::vector<TaskGpuInfo>& gpus) {
  std::string text;
  for (const TaskGpuInfo& gpu : gpus) {
    const std::string about =
        gpu.pci + (gpu.pci.empty() || gpu.locality.empty() ? "" : ", ") + gpu.locality;
    text += (text.empty() ? "" : " ") + gpu.token + (about.empty() ? "" : " (" + about + ")");
  }
  return text;
}

std::string describe_binding(const std::string& host, unsigned global_rank, const TaskBinding& task,
                             const std::string& source) {
  std::string line = "gpubind: " + host + " rank " + std::to_string(global_rank) + " (local " +
                     std::to_string(task.rank) + "): cpus " + task.cpus;
  std::string where;
  if (task.l3_index >= 0) where += "L3 " + std::to_string(task.l3_index);
  if (task.numa_node >= 0)
    where += std::string(where.empty() ? "" : ", ") + "NUMA " + std::to_string(task.numa_node);
  if (!where.empty()) line += " (" + where + ")";
  line += ", GPU " + (task.gpus.empty() ? std::string("-") : describe_gpus(task.gpus));
  line += ", NIC " + (task.nic_names.empty() ? std::string("-") : task.nic_names);
  line += " [" + source + "]";
  return line;
}

}  // namespace gpubind::client
