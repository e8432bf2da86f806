#include "gpubind/api/status_convert.h"

namespace gpubind::api {

api::DaemonStatus status_from_proto(const v1::GetStatusResponse& proto) {
  api::DaemonStatus status;
  status.version = proto.version();
  status.uptime_s = proto.uptime_s();
  status.policy_source = proto.policy_source();
  status.policy_generation = proto.policy_generation();
  status.topology_source = proto.topology_source();
  status.topology_generation = proto.topology_generation();
  status.requests = proto.requests();
  status.errors = proto.errors();
  status.cache_hits = proto.cache_hits();
  status.p50_us = proto.p50_us();
  status.p99_us = proto.p99_us();
  status.rss_bytes = proto.rss_bytes();
  status.last_reload_error = proto.last_reload_error();
  status.socket_activated = proto.socket_activated();
  status.cpu_s = proto.cpu_s();
  status.pid = static_cast<int>(proto.pid());
  status.plans_cache = proto.plans().cache();
  status.plans_worker = proto.plans().worker();
  status.plans_refused = proto.plans().refused();
  status.plans_node_mismatch = proto.plans().node_mismatch();
  for (const v1::LatencyBucket& bucket : proto.latency_buckets())
    status.latency_buckets.emplace_back(bucket.le_s(), bucket.count());
  status.latency_count = proto.latency_count();
  status.latency_sum_s = proto.latency_sum_s();
  status.reloads = proto.reloads();
  status.reloads_refused = proto.reloads_refused();
  for (const v1::RefusalCount& refusal : proto.refusals())
    status.refusals.emplace_back(refusal.cause(), refusal.count());
  for (const v1::FallbackCount& fallback : proto.fallbacks())
    status.fallbacks.emplace_back(fallback.reason(), fallback.count());
  status.start_time_s = proto.start_time_s();
  return status;
}

}  // namespace gpubind::api
