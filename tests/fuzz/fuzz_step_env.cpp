// A step's GPU variables and the step texts from arbitrary bytes: the GPUs read never leave what
// the variables list, and decoded texts encode back to something that decodes the same.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "step_env.h"
#include "step_text.h"

using namespace gpubind::spank;

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
  if (auto request = decode_request(text)) {
    auto again = decode_request(encode(*request));
    if (!again || encode(*again) != encode(*request)) std::abort();
  }
  if (auto plan = decode_plan(text)) {
    auto again = decode_plan(encode(*plan));
    if (!again || encode(*again) != encode(*plan)) std::abort();
  }
  return 0;
}
