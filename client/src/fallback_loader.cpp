#include "fallback_loader.h"

#include "gpubind/protocol/client.h"
#define GPUBIND_STEPD_LOADER
#include "gpubind/fallback/stepd_abi.h"

namespace gpubind::client {

Result<StepPlan> plan_with_stepd_lib(const std::string& lib_path, const std::string& encoded,
                                     const std::string& policy, const std::string& topology) {
  void* lib = dlopen(lib_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return make_error(std::string("cannot load ") + lib_path + ": " + dlerror());
  gpubind_stepd_api api{};
  if (gpubind_stepd_resolve(lib, &api) != 0)
    return make_error(lib_path + " is not a matching gpubind step library");
  void* answer = nullptr;
  size_t answer_size = 0;
  if (!api.plan_on && !topology.empty())
    return make_error(lib_path + " is too old to plan on a topology file");
  const int rc =
      api.plan_on ? api.plan_on(encoded.data(), encoded.size(), policy.c_str(), topology.c_str(),
                                &answer, &answer_size)
                  : api.plan(encoded.data(), encoded.size(), policy.c_str(), &answer, &answer_size);
  const std::string reply = answer ? std::string(static_cast<const char*>(answer), answer_size)
                                   : std::string("no answer");
  api.free(answer);
  // The library stays loaded: unloading hwloc and protobuf buys nothing in a process that
  // ends with the step (or execs the worker's program).
  if (rc != 0) {
    Error refused = make_error(reply);
    refused.invalid_input = true;  // the live node's planner refused the step itself
    return refused;
  }
  return protocol::decode_plan(reply);
}

}  // namespace gpubind::client
