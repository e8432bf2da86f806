// A step's GPU variables and the daemon's answer from arbitrary bytes: the GPUs read never leave
// what the variables list, and every PlanResponse a daemon can send (libprotobuf), the plugin's
// decoder (nanopb) reads with the same tasks.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gpubind/client/step_env.h"
#include "gpubind/protocol/client.h"
#include "gpubind/v1/binder.pb.h"

using namespace gpubind::client;

namespace {

bool has_unknown_fields(const google::protobuf::Message& message) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  if (!reflection->GetUnknownFields(message).empty()) return true;
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const auto* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (!field->is_repeated()) {
      if (has_unknown_fields(reflection->GetMessage(message, field))) return true;
      continue;
    }
    for (int i = 0; i < reflection->FieldSize(message, field); ++i)
      if (has_unknown_fields(reflection->GetRepeatedMessage(message, field, i))) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Split the input over the variables the plugin reads.
  const char* names[] = {"SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                         "SLURM_GPUS_PER_TASK"};
  std::map<std::string, std::string> env;
  size_t start = 0;
  for (const char* name : names) {
    const size_t bar = text.find('|', start);
    env[name] = text.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  const EnvLookup lookup = [&](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  const StepGpus gpus = step_gpus_from_env(lookup);
  for (const auto& [index, token] : gpus.gpus) {
    if (index < 0 || token.find(',') != std::string::npos) std::abort();
  }
  (void)count_from_env(lookup, "SLURM_GPUS_PER_TASK");
  const auto plan = gpubind::protocol::decode_plan(text);
  gpubind::v1::PlanResponse proto;
  // Any bytes: no crash. Bytes in the schema's own terms (libprotobuf keeps a field of another
  // wire type aside as unknown, where nanopb reads it as data): the same tasks.
  if (plan && proto.ParseFromString(text) && !has_unknown_fields(proto)) {
    if (static_cast<int>(plan->tasks.size()) != proto.tasks_size()) std::abort();
    for (int i = 0; i < proto.tasks_size(); ++i)
      if (plan->tasks[i].cpus != proto.tasks(i).cpus()) std::abort();
  }
  return 0;
}
