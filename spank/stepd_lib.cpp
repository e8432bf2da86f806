// libgpubind_stepd.so: the in-process fallback planner, loaded by the SPANK plugin in slurmstepd
// only, and only when gpubindd cannot answer: it brings hwloc, protobuf and the policy loader,
// which srun, sbatch and salloc (they load every SPANK plugin) never need. It answers the bytes
// the daemon answers, through the same conversions.
#include <cstdlib>
#include <cstring>
#include <exception>

#include "api_convert.h"
#include "gpubind/node.h"
#include "gpubind/planner.h"
#include "gpubind/protocol/limits.h"
#include "stepd_abi.h"

namespace gpubind::spank {
namespace {

Result<std::string> plan_step(const void* bytes, size_t size, const char* policy) {
  if (size > protocol::kMaxRequestBytes) return make_error("request too large");
  v1::PlanRequest proto;
  if (!proto.ParseFromArray(bytes, static_cast<int>(size)))
    return make_error("not a gpubind.v1.PlanRequest");
  auto request = api::request_from_proto(proto);
  if (!request) return request.error();
  NodeSources sources;
  sources.policy_path = policy_to_load(policy ? std::optional<std::string>(policy) : std::nullopt);
  auto node = load_node(sources);
  if (!node) return node.error();
  auto plan = make_plan(node->topology, node->policy, *request);
  if (!plan) return plan.error();
  v1::PlanResponse response;
  api::plan_to_proto(*plan, response, &node->topology);
  response.set_hostname(node->topology.hostname);
  return response.SerializeAsString();
}

// A malloc'd copy with a NUL after it (an error text reads as a C string).
void* copy_out(const std::string& bytes, size_t* size) {
  char* out = static_cast<char*>(std::malloc(bytes.size() + 1));
  if (!out) return nullptr;
  std::memcpy(out, bytes.data(), bytes.size());
  out[bytes.size()] = '\0';
  *size = bytes.size();
  return out;
}

}  // namespace
}  // namespace gpubind::spank

extern "C" {

__attribute__((visibility("default"))) int gpubind_stepd_abi_version(void) {
  return GPUBIND_STEPD_ABI_VERSION;
}

__attribute__((visibility("default"))) int gpubind_stepd_plan(const void* request,
                                                              size_t request_size,
                                                              const char* policy, void** answer,
                                                              size_t* answer_size) {
  using namespace gpubind::spank;
  *answer = nullptr;
  *answer_size = 0;
  try {
    auto plan = plan_step(request, request ? request_size : 0, policy);
    *answer = copy_out(plan ? *plan : plan.error().message, answer_size);
    return plan ? 0 : 1;
  } catch (const std::exception& e) {
    *answer = copy_out(std::string("gpubind: internal error: ") + e.what(), answer_size);
  } catch (...) {
    *answer = copy_out("gpubind: internal error", answer_size);
  }
  return 1;
}

__attribute__((visibility("default"))) void gpubind_stepd_free(void* answer) {
  std::free(answer);
}

}  // extern "C"
