// Phase 2a, the step's GPUs by name: which node GPU each of the step's tokens means (a node index,
// a PCI bus id, a GPU UUID, a MIG instance by its parent GPU), and what each vendor's runtime
// calls it in the task: that vendor's own number, a PVC tile's number, or the UUID itself.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <string_view>
#include <utility>

#include "gpubind/gpu_tokens.h"
#include "plan/plan_state.h"

namespace gpubind::planning {
namespace {

using gpu_tokens::is_gpu_uuid;
using gpu_tokens::legacy_mig_parent_uuid;
constexpr auto is_mig_token = gpu_tokens::is_mig;

// A GPU number: at most kMaxTasks (model_limits.h), past any node's GPUs, so tile numbers
// derived from it cannot overflow.
std::optional<int> token_number(std::string_view token) {
  int value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size() || value < 0 || value > kMaxTasks)
    return std::nullopt;
  return value;
}

bool same_text_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The GPU whose PCI bus id is `bus_id`, -1 if none.
int gpu_with_bus_id(const Topology& topology, const std::string& bus_id) {
  const std::string wanted = canonical_bus_id(bus_id);
  for (const Gpu& gpu : topology.gpus)
    if (!gpu.pci_bus_id.empty() && canonical_bus_id(gpu.pci_bus_id) == wanted) return gpu.index;
  return -1;
}

// The GPU whose UUID is `uuid` ("GPU-…"), -1 if none.
int gpu_with_uuid(const Topology& topology, std::string_view uuid) {
  for (const Gpu& gpu : topology.gpus)
    if (!gpu.uuid.empty() && same_text_ignoring_case(gpu.uuid, uuid)) return gpu.index;
  return -1;
}

// An Intel GPU on the root bus: the integrated one (0000:00:02.0), not a card behind a port.
bool intel_integrated(const Gpu& gpu) {
  if (gpu.vendor != Vendor::kIntel) return false;  // before the string work: runs in sorts
  const std::string bus = canonical_bus_id(gpu.pci_bus_id);
  return bus.size() > 7 && bus.compare(5, 3, "00:") == 0;
}

// The order a vendor's runtime counts its GPUs in: the node's numbering (PCI bus order, one
// device's partitions in turn: CUDA with CUDA_DEVICE_ORDER=PCI_BUS_ID, ROCr and ROCm SMI), except
// that Level Zero counts discrete cards before the integrated GPU (compute-runtime's device sort).
auto runtime_order(const Gpu& gpu) {
  return std::make_pair(intel_integrated(gpu), gpu.index);
}

}  // namespace

Status Planner::resolve_step_gpus() {
  if (!request_.unplaced_gpus.empty()) {
    if (request_.gpus && !request_.gpus->empty())
      return make_error("a step's GPUs are either node GPUs or unplaced tokens, not both");
    for (const std::string& token : request_.unplaced_gpus) {
      if (token.empty()) return make_error("an unplaced GPU has an empty token");
    }
    return place_tokens();
  }
  if (!request_.gpus) {
    step_gpus_.reserve(topo_.gpus.size());
    for (const Gpu& gpu : topo_.gpus)
      step_gpus_.push_back({gpu.index, std::to_string(gpu.index)});
    number_for_runtimes(true);
    return Ok{};
  }
  step_gpus_.assign(request_.gpus->begin(), request_.gpus->end());
  for (StepGpu& gpu : step_gpus_) {
    if (!gpu.pci.empty()) {
      const int found = gpu_with_bus_id(topo_, gpu.pci);
      if (found < 0) return node_mismatch("no GPU of this node has PCI bus id '" + gpu.pci + "'");
      gpu.node_index = found;
    } else if (is_gpu_uuid(gpu.token)) {
      // The runtime opens the GPU the UUID names, whatever index came with it.
      if (const int found = gpu_with_uuid(topo_, gpu.token); found >= 0) gpu.node_index = found;
    }
  }
  if (auto checked = check_step_gpus(); !checked) return checked;
  number_for_runtimes(false);
  return Ok{};
}

Status Planner::check_step_gpus() const {
  Scratch<bool> seen(topo_.gpus.size(), false);
  for (const StepGpu& gpu : step_gpus_) {
    if (gpu.node_index < 0)
      return make_error("GPU index " + std::to_string(gpu.node_index) + " is negative");
    if (gpu.node_index >= static_cast<int>(topo_.gpus.size())) {
      return node_mismatch("GPU " + std::to_string(gpu.node_index) +
                           " does not exist (the node has " + std::to_string(topo_.gpus.size()) +
                           " GPUs)");
    }
    if (gpu.token.empty())
      return make_error("GPU " + std::to_string(gpu.node_index) + " has an empty token");
    // MIG instances of one GPU share it; anything else names a GPU once.
    if (seen[gpu.node_index] && !is_mig_token(gpu.token))
      return make_error("GPU " + std::to_string(gpu.node_index) + " is listed twice");
    seen[gpu.node_index] = true;
  }
  return Ok{};
}

// Tokens the step gave without node indices: GPU UUIDs (a user's own list, or a launcher's) and
// MIG instances. Each is placed on its GPU where the node's UUIDs, or its MIG layout, say which;
// where any cannot be, all stay tokens, handed out by hand_out_unplaced_gpus.
Status Planner::place_tokens() {
  const std::vector<std::string>& tokens = request_.unplaced_gpus;
  Scratch<StepGpu> placed;
  placed.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    int gpu = -1;
    if (is_gpu_uuid(token)) {
      gpu = gpu_with_uuid(topo_, token);
    } else if (is_mig_token(token)) {
      const int slurm_index =
          i < request_.unplaced_slurm_indices.size() ? request_.unplaced_slurm_indices[i] : -1;
      gpu = mig_parent(token, slurm_index);
    }
    if (gpu < 0) {
      unplaced_ = true;
      return Ok{};
    }
    placed.push_back({gpu, token});
  }
  step_gpus_ = std::move(placed);
  if (auto checked = check_step_gpus(); !checked) return checked;
  number_for_runtimes(false);
  return Ok{};
}

// The GPU holding MIG instance `token`: the one its legacy name gives; else the node's only GPU
// with MIG instances (or only NVIDIA GPU); else, from Slurm's index for the instance, the GPU
// whose instances that index falls among. Slurm's NVML plugin lists the GPUs without MIG first
// (gres_gpu.c sorts records without NVLink information, MIG instances, last), then the
// instances GPU by GPU, in device-file order: the node's order where its minors follow the PCI
// order. -1 when none of these tells.
int Planner::mig_parent(const std::string& token, int slurm_index) const {
  if (const std::string_view uuid = legacy_mig_parent_uuid(token); !uuid.empty())
    return gpu_with_uuid(topo_, uuid);
  Scratch<int> nvidia, with_mig;
  for (const Gpu& gpu : topo_.gpus) {
    if (gpu.vendor != Vendor::kNvidia) continue;
    nvidia.push_back(gpu.index);
    if (gpu.mig_instances > 0) with_mig.push_back(gpu.index);
  }
  if (nvidia.size() == 1) return nvidia[0];
  if (with_mig.size() == 1) return with_mig[0];
  if (slurm_index < 0 || with_mig.empty()) return -1;
  int first = static_cast<int>(nvidia.size() - with_mig.size());  // the GPUs without MIG
  for (int gpu : with_mig) {
    const int count = topo_.gpus[gpu].mig_instances;
    if (slurm_index < first + count) return gpu;
    first += count;
  }
  return -1;
}

// Each vendor's runtime counts only its own GPUs, in runtime_order, among those the task can
// see: every GPU of the node, or only the step's where Slurm's device cgroup hides the others
// (Slurm then numbers the step's GPUs from 0, whatever their vendor). So on a node with GPUs of
// two vendors, Slurm's numbers are not either runtime's; each numeric token becomes its GPU's
// number within its vendor. Tokens that are not numbers (UUIDs) name the GPU themselves.
void Planner::number_for_runtimes(bool whole_node) {
  const int count = static_cast<int>(step_gpus_.size());
  flat_first_device_.assign(count, -1);
  bool node_numbers = true, step_numbers = true;
  for (int g = 0; g < count; ++g) {
    // Slurm lists a step's GPUs by node index, numbered 0.. in that order under a device cgroup.
    step_numbers =
        step_numbers && (g == 0 || step_gpus_[g - 1].node_index < step_gpus_[g].node_index);
    // A UUID stands in for the number of a GPU that has one (Slurm's env_uuid).
    const std::optional<int> number = token_number(step_gpus_[g].token);
    if (!number) continue;
    node_numbers = node_numbers && number == step_gpus_[g].node_index;
    step_numbers = step_numbers && number == g;
  }
  if (!whole_node && !node_numbers && !step_numbers) {
    // What these numbers count cannot be told: they stay as given, a card's tiles after them.
    for (int g = 0; g < count; ++g) {
      if (const std::optional<int> number = token_number(step_gpus_[g].token))
        flat_first_device_[g] = *number * std::max(1, topo_.gpus[step_gpus_[g].node_index].tiles);
    }
    return;
  }
  Scratch<int> visible;
  if (whole_node || node_numbers) {
    for (const Gpu& gpu : topo_.gpus)
      visible.push_back(gpu.index);
  } else {
    for (const StepGpu& gpu : step_gpus_)
      visible.push_back(gpu.node_index);
  }
  // Each GPU's place in its runtime's order, once: the comparisons below are G x G.
  Scratch<std::pair<bool, int>> order;  // by position in topo_.gpus
  order.reserve(topo_.gpus.size());
  for (const Gpu& gpu : topo_.gpus)
    order.push_back(runtime_order(gpu));
  auto position = [&](const Gpu& gpu) { return static_cast<size_t>(&gpu - topo_.gpus.data()); };
  for (int g = 0; g < count; ++g) {
    const Gpu& mine = topo_.gpus[step_gpus_[g].node_index];
    if (mine.vendor == Vendor::kUnknown || !token_number(step_gpus_[g].token)) continue;
    int before = 0, devices_before = 0;
    for (int other : visible) {
      const Gpu& gpu = topo_.gpus[other];
      if (gpu.vendor != mine.vendor || !(order[position(gpu)] < order[position(mine)])) continue;
      ++before;
      devices_before += std::max(1, gpu.tiles);
    }
    step_gpus_[g].token = std::to_string(before);
    flat_first_device_[g] = devices_before;
  }
}

// Tokens without a node GPU (MIG instances whose GPU is not known here, UUIDs the node does not
// list) go to tasks like GPUs do, in blocks or shared, after the cores were planned without them.
void Planner::hand_out_unplaced_gpus() {
  if (!unplaced_) return;
  const std::vector<std::string>& tokens = request_.unplaced_gpus;
  const int n = static_cast<int>(tokens.size());
  const int per_task = request_.gpus_per_task;
  for (int task = 0; task < ntasks_; ++task) {
    int begin = 0, end = 0;
    if (per_task > 0) {
      begin = (task * per_task) % n;
      end = begin + std::min(per_task, n);
    } else if (n >= ntasks_) {
      begin = task * n / ntasks_;
      end = (task + 1) * n / ntasks_;
    } else {
      begin = task * n / ntasks_;
      end = begin + 1;
    }
    for (int i = begin; i < end; ++i) {
      const int at = i % n;
      plan_.tasks[task].gpus.push_back({at, -1, -1, tokens[at], "", Vendor::kNvidia});
      if (explain_) {
        GpuChoice choice;
        choice.step_index = at;
        choice.reason = GpuReason::kUnplaced;
        record_gpu(task, choice);
      }
    }
  }
  if (per_task > 0 && per_task * ntasks_ > n) {
    warn(counted(ntasks_, "task") + " x " + std::to_string(per_task) +
         " GPUs per task need more than the step's " + counted(n, "GPU") + ": tasks share them");
  }
  const std::string& first = tokens.front();
  warn(is_mig_token(first)
           ? "the step's GPUs are MIG instances (" + first +
                 "...): which GPU holds each is not known here, so tasks' cores are not placed "
                 "near them"
           : "the step names GPUs this node does not list (" + first +
                 "...): tasks' cores are not placed near them");
}

// What the task's runtime calls the GPU (or one tile of it). Tiled cards (Intel PVC) are "g" and
// "g.t" under Level Zero's COMPOSITE hierarchy; under FLAT every tile is a device of its own,
// numbered card by card in the order the runtime counts the cards.
std::string Planner::device_token(int step_gpu, int tile) {
  const Gpu& gpu = topo_.gpus[step_gpus_[step_gpu].node_index];
  const std::string& step_token = step_gpus_[step_gpu].token;
  const int tiles = gpu.tiles;
  const int first = flat_first_device_[step_gpu];
  // Under FLAT an untiled Level Zero GPU is one device, numbered after every tile before it.
  const bool flat = request_.ze_hierarchy != ZeHierarchy::kComposite;
  if (flat && tiles < 2 && gpu.vendor == Vendor::kIntel && first >= 0) return std::to_string(first);
  if (tiles < 2 || !flat) {
    return tile >= 0 ? gpu_tokens::composite_tile(step_token, tile) : step_token;
  }
  if (first < 0) {
    warn("GPU token '" + step_token +
         "' is not a card number: its tiles cannot be named under ZE_FLAT_DEVICE_HIERARCHY=FLAT; "
         "the card.tile form is used");
    return tile >= 0 ? gpu_tokens::composite_tile(step_token, tile) : step_token;
  }
  return tile >= 0 ? gpu_tokens::flat_devices(first + tile, 1)
                   : gpu_tokens::flat_devices(first, tiles);
}

}  // namespace gpubind::planning
