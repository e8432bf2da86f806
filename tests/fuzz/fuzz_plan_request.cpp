// The daemon's request handling on arbitrary bytes: a gpubind.v1.PlanRequest parsed from them is
// refused or planned on the LUMI-G fixture; a plan never leaves the request's CPUs.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpubind/api/convert.h"
#include "gpubind/node.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gpubind::Node node = [] {
    auto loaded = gpubind::load_node({std::string(GPUBIND_FIXTURES) + "/lumi-g.policy",
                                      std::string(GPUBIND_FIXTURES) + "/lumi-g.xml"});
    if (!loaded) std::abort();
    return *loaded;
  }();
  gpubind::v1::PlanRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto request = gpubind::api::request_from_proto(proto);
  if (!request) return 0;
  if (request->ntasks > 256) return 0;  // keep each input fast
  auto plan = gpubind::make_plan(node.topology, node.policy, *request);
  if (!plan) return 0;
  for (const auto& task : plan->tasks) {
    if (task.cpus.empty()) std::abort();
    if (request->allowed_cpus && !task.cpus.is_subset_of(*request->allowed_cpus)) std::abort();
  }
  return 0;
}
