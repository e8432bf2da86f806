// libgpubind_stepd.so: the in-process fallback planner, loaded by the SPANK plugin in slurmstepd
// only, and only when gpubindd cannot answer: it brings hwloc, protobuf and the policy loader,
// which srun, sbatch and salloc (they load every SPANK plugin) never need. It answers the bytes
// the daemon answers, through the same conversions (local_plan.h).
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "gpubind/fallback/stepd_abi.h"
#include "local_plan.h"

namespace gpubind::fallback {
namespace {

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
}  // namespace gpubind::fallback

extern "C" {

__attribute__((visibility("default"))) int gpubind_stepd_abi_version(void) {
  return GPUBIND_STEPD_ABI_VERSION;
}

__attribute__((visibility("default"))) int gpubind_stepd_plan_on(
    const void* request, size_t request_size, const char* policy, const char* topology,
    void** answer, size_t* answer_size) {
  using namespace gpubind::fallback;
  *answer = nullptr;
  *answer_size = 0;
  const auto named = [](const char* text) {
    return text && *text ? std::optional<std::string>(text) : std::nullopt;
  };
  try {
    auto plan = gpubind::fallback::plan_here(request, request ? request_size : 0, named(policy),
                                             named(topology));
    *answer = copy_out(plan ? *plan : plan.error().message, answer_size);
    return plan ? 0 : 1;
  } catch (const std::exception& e) {
    *answer = copy_out(std::string("gpubind: internal error: ") + e.what(), answer_size);
  } catch (...) {
    *answer = copy_out("gpubind: internal error", answer_size);
  }
  return 1;
}

__attribute__((visibility("default"))) int gpubind_stepd_plan(const void* request,
                                                              size_t request_size,
                                                              const char* policy, void** answer,
                                                              size_t* answer_size) {
  return gpubind_stepd_plan_on(request, request_size, policy, nullptr, answer, answer_size);
}

__attribute__((visibility("default"))) void gpubind_stepd_free(void* answer) {
  std::free(answer);
}

}  // extern "C"
