// StepRequest and StepPlan as binder.proto's bytes, through nanopb's generated C (binder.npb.h):
// no libprotobuf in srun or slurmstepd. Strings and repeated fields are nanopb callbacks, so
// nothing here has a size limit beyond the frame's.
#include <pb_decode.h>
#include <pb_encode.h>

#include "gpubind/protocol/client.h"
#include "gpubind/v1/binder.npb.h"

namespace gpubind::protocol {
namespace {

// Encoding: callbacks that write one field of the message they belong to.
bool write_string(pb_ostream_t* stream, const pb_field_iter_t* field, void* const* arg) {
  const auto* text = static_cast<const std::string*>(*arg);
  if (text->empty()) return true;  // proto3: an empty string is not sent
  return pb_encode_tag_for_field(stream, field) &&
         pb_encode_string(stream, reinterpret_cast<const pb_byte_t*>(text->data()), text->size());
}

bool write_strings(pb_ostream_t* stream, const pb_field_iter_t* field, void* const* arg) {
  for (const std::string& text : *static_cast<const std::vector<std::string>*>(*arg)) {
    if (!pb_encode_tag_for_field(stream, field) ||
        !pb_encode_string(stream, reinterpret_cast<const pb_byte_t*>(text.data()), text.size()))
      return false;
  }
  return true;
}

// A repeated uint32, one tagged varint each (proto3 readers accept it as well as packed).
bool write_numbers(pb_ostream_t* stream, const pb_field_iter_t* field, void* const* arg) {
  for (int value : *static_cast<const std::vector<int>*>(*arg)) {
    if (!pb_encode_tag(stream, PB_WT_VARINT, field->tag) ||
        !pb_encode_varint(stream, static_cast<uint32_t>(value)))
      return false;
  }
  return true;
}

pb_callback_t writes(const std::string& text) {
  pb_callback_t callback{};
  callback.funcs.encode = write_string;
  callback.arg = const_cast<std::string*>(&text);
  return callback;
}

bool write_gpus(pb_ostream_t* stream, const pb_field_iter_t* field, void* const* arg) {
  for (const auto& [index, token] :
       *static_cast<const std::vector<std::pair<int, std::string>>*>(*arg)) {
    gpubind_v1_StepGpu gpu = gpubind_v1_StepGpu_init_zero;
    gpu.node_index = static_cast<uint32_t>(index);
    gpu.token = writes(token);
    if (!pb_encode_tag_for_field(stream, field) ||
        !pb_encode_submessage(stream, gpubind_v1_StepGpu_fields, &gpu))
      return false;
  }
  return true;
}

bool write_gpus_by_pci(pb_ostream_t* stream, const pb_field_iter_t* field, void* const* arg) {
  for (const auto& [pci, token] :
       *static_cast<const std::vector<std::pair<std::string, std::string>>*>(*arg)) {
    gpubind_v1_StepGpu gpu = gpubind_v1_StepGpu_init_zero;
    gpu.token = writes(token);
    gpu.pci = writes(pci);
    if (!pb_encode_tag_for_field(stream, field) ||
        !pb_encode_submessage(stream, gpubind_v1_StepGpu_fields, &gpu))
      return false;
  }
  return true;
}

// A string written even when empty: presence says something (an inherited variable set empty).
bool write_present_string(pb_ostream_t* stream, const pb_field_iter_t* field, void* const* arg) {
  const auto* text = static_cast<const std::string*>(*arg);
  return pb_encode_tag_for_field(stream, field) &&
         pb_encode_string(stream, reinterpret_cast<const pb_byte_t*>(text->data()), text->size());
}

bool write_fixed_tasks(pb_ostream_t* stream, const pb_field_iter_t* field, void* const* arg) {
  for (const FixedTask& task : *static_cast<const std::vector<FixedTask>*>(*arg)) {
    gpubind_v1_FixedTask message = gpubind_v1_FixedTask_init_zero;
    message.gpus.funcs.encode = write_numbers;
    message.gpus.arg = const_cast<std::vector<int>*>(&task.gpus);
    message.cpus = writes(task.cpus);
    if (!pb_encode_tag_for_field(stream, field) ||
        !pb_encode_submessage(stream, gpubind_v1_FixedTask_fields, &message))
      return false;
  }
  return true;
}

// Decoding: callbacks that read one field into the value `arg` points at.
bool read_string(pb_istream_t* stream, const pb_field_iter_t*, void** arg) {
  auto* text = static_cast<std::string*>(*arg);
  text->resize(stream->bytes_left);
  return pb_read(stream, reinterpret_cast<pb_byte_t*>(text->data()), text->size());
}

pb_callback_t reads(std::string& text) {
  pb_callback_t callback{};
  callback.funcs.decode = read_string;
  callback.arg = &text;
  return callback;
}

bool read_warning(pb_istream_t* stream, const pb_field_iter_t* field, void** arg) {
  auto* warnings = static_cast<std::vector<std::string>*>(*arg);
  void* text = &warnings->emplace_back();
  return read_string(stream, field, &text);
}

bool read_env(pb_istream_t* stream, const pb_field_iter_t*, void** arg) {
  TaskEnv& var = static_cast<std::vector<TaskEnv>*>(*arg)->emplace_back();
  gpubind_v1_EnvVar message = gpubind_v1_EnvVar_init_zero;
  message.name = reads(var.name);
  message.value = reads(var.value);
  if (!pb_decode(stream, gpubind_v1_EnvVar_fields, &message)) return false;
  var.only_if_unset = message.only_if_unset;
  return true;
}

// A task's GPU: `arg` is the task, whose tokens and vendor each GPU extends.
bool read_task_gpu(pb_istream_t* stream, const pb_field_iter_t*, void** arg) {
  auto* task = static_cast<TaskBinding*>(*arg);
  TaskGpuInfo& gpu = task->gpus.emplace_back();
  std::string vendor;
  gpubind_v1_TaskGpu message = gpubind_v1_TaskGpu_init_zero;
  message.token = reads(gpu.token);
  message.pci = reads(gpu.pci);
  message.vendor = reads(vendor);
  message.locality = reads(gpu.locality);
  if (!pb_decode(stream, gpubind_v1_TaskGpu_fields, &message)) return false;
  gpu.node_index = message.node_index;
  task->tokens += (task->tokens.empty() ? "" : ",") + gpu.token;
  task->vendor = vendor;
  return true;
}

bool read_gpu_place(pb_istream_t* stream, const pb_field_iter_t*, void** arg) {
  GpuPlace& place = static_cast<std::vector<GpuPlace>*>(*arg)->emplace_back();
  gpubind_v1_GpuPlace message = gpubind_v1_GpuPlace_init_zero;
  message.cpus = reads(place.cpus);
  if (!pb_decode(stream, gpubind_v1_GpuPlace_fields, &message)) return false;
  place.node_index = static_cast<int>(message.node_index);
  return true;
}

bool read_task(pb_istream_t* stream, const pb_field_iter_t*, void** arg) {
  TaskBinding& task = static_cast<std::vector<TaskBinding>*>(*arg)->emplace_back();
  gpubind_v1_TaskPlan message = gpubind_v1_TaskPlan_init_zero;
  message.cpus = reads(task.cpus);
  message.nic_names = reads(task.nic_names);
  message.gpus.funcs.decode = read_task_gpu;
  message.gpus.arg = &task;
  message.env.funcs.decode = read_env;
  message.env.arg = &task.env;
  if (!pb_decode(stream, gpubind_v1_TaskPlan_fields, &message)) return false;
  task.rank = static_cast<int>(message.rank);
  task.numa_node = message.numa_node;
  task.l3_index = message.l3_index;
  return true;
}

Status check_request(const StepRequest& r) {
  if (r.ntasks < 0 || r.cpus_per_task < 0 || r.gpus_per_task < 0 || r.tasks_per_gpu < 0 ||
      r.smt < -1)
    return make_error("a count of the step is negative");
  for (const auto& gpu : r.gpus)
    if (gpu.first < 0) return make_error("GPU index " + std::to_string(gpu.first) + " is negative");
  if (!r.gpus.empty() && !r.gpus_by_pci.empty())
    return make_error("GPUs listed both by node index and by PCI bus id");
  if (!r.order.empty() && r.order != "gpu" && r.order != "cpu")
    return make_error("order '" + r.order + "': expected gpu or cpu");
  for (int index : r.unplaced_slurm_indices)
    if (index < 0) return make_error("Slurm GPU index " + std::to_string(index) + " is negative");
  if (r.ccl_worker_count < 0 || r.ccl_local_size < 0)
    return make_error("a oneCCL count of the step is negative");
  if (!r.slurm_gpu_rule.empty() && r.slurm_gpu_rule != "closest" && r.slurm_gpu_rule != "single")
    return make_error("slurm_gpu_rule '" + r.slurm_gpu_rule + "': expected closest or single");
  if (!r.ze_hierarchy.empty() && r.ze_hierarchy != "flat" && r.ze_hierarchy != "composite")
    return make_error("ze_hierarchy '" + r.ze_hierarchy + "': expected flat or composite");
  if (!r.fixed.empty() && static_cast<int>(r.fixed.size()) != r.ntasks)
    return make_error("fixed bindings for " + std::to_string(r.fixed.size()) + " of " +
                      std::to_string(r.ntasks) + " tasks");
  for (const FixedTask& task : r.fixed)
    for (int g : task.gpus)
      if (g < 0) return make_error("fixed GPU " + std::to_string(g) + " is negative");
  return Ok{};
}

}  // namespace

Result<std::string> encode_request(const StepRequest& r) {
  if (auto valid = check_request(r); !valid)
    return make_error("step request: " + valid.error().message);
  gpubind_v1_PlanRequest message = gpubind_v1_PlanRequest_init_zero;
  message.job_id = r.job_id;
  message.step_id = r.step_id;
  message.ntasks = static_cast<uint32_t>(r.ntasks);
  message.allowed_cpus = writes(r.allowed_cpus);
  message.allowed_cores = writes(r.allowed_cores);
  message.gpus_given = r.gpus_given;
  if (r.gpus_by_pci.empty()) {
    message.gpus.funcs.encode = write_gpus;
    message.gpus.arg = const_cast<std::vector<std::pair<int, std::string>>*>(&r.gpus);
  } else {
    message.gpus.funcs.encode = write_gpus_by_pci;
    message.gpus.arg =
        const_cast<std::vector<std::pair<std::string, std::string>>*>(&r.gpus_by_pci);
  }
  message.unplaced_gpus.funcs.encode = write_strings;
  message.unplaced_gpus.arg = const_cast<std::vector<std::string>*>(&r.unplaced_gpus);
  message.cpus_per_task = static_cast<uint32_t>(r.cpus_per_task);
  message.gpus_per_task = static_cast<uint32_t>(r.gpus_per_task);
  message.tasks_per_gpu = static_cast<uint32_t>(r.tasks_per_gpu);
  message.order = r.order == "gpu"   ? gpubind_v1_Order_ORDER_GPU
                  : r.order == "cpu" ? gpubind_v1_Order_ORDER_CPU
                                     : gpubind_v1_Order_ORDER_UNSPECIFIED;
  message.has_smt = r.smt >= 0;
  message.smt = r.smt >= 0 ? static_cast<uint32_t>(r.smt) : 0;
  message.no_gpu_env = r.no_gpu_env;
  message.no_nic_env = r.no_nic_env;
  // The plugin's flag can only ask for OpenMP places; unset leaves it to the policy.
  message.has_omp_places = r.omp;
  message.omp_places = r.omp;
  message.ze_hierarchy = r.ze_hierarchy == "composite"
                             ? gpubind_v1_ZeHierarchy_ZE_HIERARCHY_COMPOSITE
                             : gpubind_v1_ZeHierarchy_ZE_HIERARCHY_FLAT;
  message.unplaced_slurm_indices.funcs.encode = write_numbers;
  message.unplaced_slurm_indices.arg = const_cast<std::vector<int>*>(&r.unplaced_slurm_indices);
  message.ccl_worker_count = static_cast<uint32_t>(r.ccl_worker_count);
  message.ccl_process_launcher = writes(r.ccl_process_launcher);
  message.ccl_local_size = static_cast<uint32_t>(r.ccl_local_size);
  message.fixed_tasks.funcs.encode = write_fixed_tasks;
  message.fixed_tasks.arg = const_cast<std::vector<FixedTask>*>(&r.fixed);
  message.cpus_bound_at_launch = r.cpus_bound_at_launch;
  message.gpus_named_by_slurm = r.gpus_named_by_slurm;
  message.task_command = writes(r.task_command);
  message.slurm_gpu_rule =
      r.slurm_gpu_rule == "closest"  ? gpubind_v1_SlurmGpuRule_SLURM_GPU_RULE_CLOSEST
      : r.slurm_gpu_rule == "single" ? gpubind_v1_SlurmGpuRule_SLURM_GPU_RULE_SINGLE
                                     : gpubind_v1_SlurmGpuRule_SLURM_GPU_RULE_NONE;
  if (r.hip_inherited) {
    message.inherited_hip_visible_devices.funcs.encode = write_present_string;
    message.inherited_hip_visible_devices.arg = const_cast<std::string*>(&r.inherited_hip);
  }
  size_t size = 0;
  if (!pb_get_encoded_size(&size, gpubind_v1_PlanRequest_fields, &message))
    return make_error("step request: cannot be encoded");
  std::string bytes(size, '\0');
  pb_ostream_t stream = pb_ostream_from_buffer(reinterpret_cast<pb_byte_t*>(bytes.data()), size);
  if (!pb_encode(&stream, gpubind_v1_PlanRequest_fields, &message))
    return make_error(std::string("step request: ") + PB_GET_ERROR(&stream));
  return bytes;
}

Result<StepPlan> decode_plan(const std::string& bytes) {
  StepPlan plan;
  gpubind_v1_PlanResponse message = gpubind_v1_PlanResponse_init_zero;
  message.tasks.funcs.decode = read_task;
  message.tasks.arg = &plan.tasks;
  message.warnings.funcs.decode = read_warning;
  message.warnings.arg = &plan.warnings;
  message.gpu_places.funcs.decode = read_gpu_place;
  message.gpu_places.arg = &plan.gpu_places;
  pb_istream_t stream =
      pb_istream_from_buffer(reinterpret_cast<const pb_byte_t*>(bytes.data()), bytes.size());
  if (!pb_decode(&stream, gpubind_v1_PlanResponse_fields, &message))
    return make_error(std::string("the daemon's answer is not a plan: ") + PB_GET_ERROR(&stream));
  plan.facts_kept = message.facts_kept;
  return plan;
}

}  // namespace gpubind::protocol
