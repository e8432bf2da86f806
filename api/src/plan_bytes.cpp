// A plan as a serialized gpubind.v1.PlanResponse, written field by field: the bytes libprotobuf
// makes of the same message (fields in number order, proto3 defaults left out, repeated numbers
// packed), without building ~11 messages per task first (3 to 4 times the CPU time). Field
// numbers come from the generated code, so binder.proto stays the one definition of the format;
// tests/unit/schema_mappings_test.cpp checks every field against libprotobuf's bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpubind/api/convert.h"

namespace gpubind::api {
namespace {

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  static size_t varint_size(uint64_t value) {
    size_t size = 1;
    for (; value >= 0x80; value >>= 7)
      ++size;
    return size;
  }
  void varint(uint64_t value) {
    char bytes[10];
    size_t n = 0;
    for (; value >= 0x80; value >>= 7)
      bytes[n++] = static_cast<char>(value | 0x80);
    bytes[n++] = static_cast<char>(value);
    out_.append(bytes, n);
  }
  void unsigned_field(int field, uint64_t value) {
    if (value == 0) return;
    tag(field, kVarint);
    varint(value);
  }
  // int32: a negative value goes out sign-extended to 64 bits, as protobuf writes it.
  void signed_field(int field, int32_t value) {
    unsigned_field(field, static_cast<uint64_t>(static_cast<int64_t>(value)));
  }
  void string_field(int field, std::string_view text) {
    if (text.empty()) return;
    tag(field, kLengthDelimited);
    varint(text.size());
    out_.append(text);
  }
  // The bytes string_field writes.
  static size_t string_field_size(int field, std::string_view text) {
    return text.empty() ? 0 : tag_size(field) + varint_size(text.size()) + text.size();
  }
  // The header of a repeated field's element of `size` bytes, which the caller writes next.
  void element_header(int field, size_t size) {
    tag(field, kLengthDelimited);
    varint(size);
  }
  // An element of a repeated field (a message or a string), written even when empty.
  void element_field(int field, std::string_view body) {
    tag(field, kLengthDelimited);
    varint(body.size());
    out_.append(body);
  }
  void packed_field(int field, const std::vector<int>& values) {
    if (values.empty()) return;
    size_t size = 0;
    for (int value : values)
      size += varint_size(static_cast<uint64_t>(static_cast<int64_t>(value)));
    tag(field, kLengthDelimited);
    varint(size);
    for (int value : values)
      varint(static_cast<uint64_t>(static_cast<int64_t>(value)));
  }

 private:
  static constexpr int kVarint = 0;
  static constexpr int kLengthDelimited = 2;
  void tag(int field, int wire_type) { varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  static size_t tag_size(int field) { return varint_size(static_cast<uint64_t>(field) << 3); }

  std::string& out_;
};

void write_gpu(const TaskGpu& gpu, const Topology* topology, std::string& out) {
  using F = v1::TaskGpu;
  Writer w(out);
  w.unsigned_field(F::kStepIndexFieldNumber, static_cast<uint32_t>(gpu.step_index));
  w.signed_field(F::kNodeIndexFieldNumber, gpu.node_index);
  w.string_field(F::kTokenFieldNumber, gpu.token);
  w.string_field(F::kPciFieldNumber, gpu.pci);
  w.string_field(F::kVendorFieldNumber, vendor_name(gpu.vendor));
  w.signed_field(F::kTileIndexFieldNumber, gpu.tile_index);
  if (topology && gpu.node_index >= 0 && gpu.node_index < static_cast<int>(topology->gpus.size()))
    w.string_field(F::kLocalityFieldNumber,
                   describe_locality(topology->gpus[gpu.node_index].locality));
}

// An element of TaskPlan's env, sized beforehand: the bulk of a plan's bytes, copied once.
void write_env(int field, const EnvVar var, Writer& w) {
  using F = v1::EnvVar;
  const size_t size = Writer::string_field_size(F::kNameFieldNumber, var.name) +
                      Writer::string_field_size(F::kValueFieldNumber, var.value) +
                      (var.only_if_unset ? 2 : 0);  // tag 3 and the value 1: a byte each
  w.element_header(field, size);
  w.string_field(F::kNameFieldNumber, var.name);
  w.string_field(F::kValueFieldNumber, var.value);
  w.unsigned_field(F::kOnlyIfUnsetFieldNumber, var.only_if_unset ? 1 : 0);
}

// Scratch for the nested messages, reused task after task.
struct Scratch {
  std::string gpu, cpus;
};

void write_task(const TaskPlan& task, const Topology* topology, Scratch& scratch,
                std::string& out) {
  using F = v1::TaskPlan;
  Writer w(out);
  w.unsigned_field(F::kRankFieldNumber, static_cast<uint32_t>(task.rank));
  scratch.cpus.clear();
  task.cpus.append_list(scratch.cpus);
  w.string_field(F::kCpusFieldNumber, scratch.cpus);
  w.string_field(F::kCpuMaskFieldNumber, task.cpus.to_mask());
  w.unsigned_field(F::kNcoresFieldNumber, static_cast<uint32_t>(task.ncores));
  for (const TaskGpu& gpu : task.gpus) {
    scratch.gpu.clear();
    write_gpu(gpu, topology, scratch.gpu);
    w.element_field(F::kGpusFieldNumber, scratch.gpu);
  }
  w.signed_field(F::kNicIndexFieldNumber, task.nic_index);
  w.string_field(F::kNicNamesFieldNumber, task.nic_names);
  w.signed_field(F::kNumaNodeFieldNumber, task.numa_node);
  w.signed_field(F::kL3IndexFieldNumber, task.l3_index);
  for (const EnvVar var : task.env)
    write_env(F::kEnvFieldNumber, var, w);
  w.packed_field(F::kNicIndicesFieldNumber, task.nic_indices);
}

}  // namespace

std::string serialize_plan(const Plan& plan, const Topology* topology,
                           const ResponseFields& fields) {
  using F = v1::PlanResponse;
  std::string out, body;
  Scratch scratch;
  Writer w(out);
  for (const TaskPlan& task : plan.tasks) {
    body.clear();
    write_task(task, topology, scratch, body);
    if (out.empty()) out.reserve(plan.tasks.size() * (body.size() + body.size() / 4 + 8));
    w.element_field(F::kTasksFieldNumber, body);
  }
  for (const std::string& warning : plan.warnings)
    w.element_field(F::kWarningsFieldNumber, warning);
  w.unsigned_field(F::kPolicyGenerationFieldNumber, fields.policy_generation);
  w.unsigned_field(F::kTopologyGenerationFieldNumber, fields.topology_generation);
  w.string_field(F::kHostnameFieldNumber, fields.hostname);
  std::string place;
  for (const GpuPlace& gpu : plan.gpu_places) {
    place.clear();
    Writer p(place);
    p.unsigned_field(v1::GpuPlace::kNodeIndexFieldNumber, static_cast<uint32_t>(gpu.node_index));
    p.string_field(v1::GpuPlace::kCpusFieldNumber, gpu.cpus.to_list());
    w.element_field(F::kGpuPlacesFieldNumber, place);
  }
  w.unsigned_field(F::kFactsKeptFieldNumber, plan.facts_kept ? 1 : 0);
  return out;
}

}  // namespace gpubind::api
