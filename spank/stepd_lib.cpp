// libgpubind_stepd.so: the in-process fallback planner, loaded by the SPANK plugin in slurmstepd
// only, and only when gpubindd cannot answer: it brings hwloc and the policy loader, which
// srun, sbatch and salloc (they load every SPANK plugin) never need.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>

#include "gpubind/node.h"
#include "gpubind/planner.h"
#include "step_convert.h"
#include "step_text.h"
#include "stepd_abi.h"

namespace gpubind::spank {
namespace {

Result<StepPlan> plan_in_process(const StepRequest& step, const PlanRequest& request) {
  NodeSources sources;
  // The daemon's rule: the named policy, else the site's file when there is one.
  if (!step.policy.empty()) {
    sources.policy_path = step.policy;
  } else if (access(kDefaultPolicyPath, F_OK) == 0) {
    sources.policy_path = kDefaultPolicyPath;
  }
  auto node = load_node(sources);
  if (!node) return node.error();
  auto plan = make_plan(node->topology, node->policy, request);
  if (!plan) return plan.error();
  return to_step_plan(*plan, "fallback", &node->topology);
}

Result<StepPlan> plan_step(const std::string& text) {
  auto step = decode_request(text);
  if (!step) return step.error();
  auto request = to_plan_request(*step);
  if (!request) return request.error();
  return plan_in_process(*step, *request);
}

char* copy_out(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

}  // namespace
}  // namespace gpubind::spank

extern "C" {

__attribute__((visibility("default"))) int gpubind_stepd_abi_version(void) {
  return GPUBIND_STEPD_ABI_VERSION;
}

__attribute__((visibility("default"))) int gpubind_stepd_plan(const char* request, char** answer) {
  using namespace gpubind::spank;
  try {
    auto plan = plan_step(request ? request : "");
    *answer = copy_out(plan ? encode(*plan) : plan.error().message);
    return plan ? 0 : 1;
  } catch (const std::exception& e) {
    *answer = copy_out(std::string("gpubind: internal error: ") + e.what());
  } catch (...) {
    *answer = copy_out("gpubind: internal error");
  }
  return 1;
}

__attribute__((visibility("default"))) void gpubind_stepd_free(char* answer) {
  std::free(answer);
}

}  // extern "C"
