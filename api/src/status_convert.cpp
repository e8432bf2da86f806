#include "gpubind/api/status_convert.h"

namespace gpubind::api {

client::DaemonStatus status_from_proto(const v1::GetStatusResponse& proto) {
  client::DaemonStatus status;
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
  return status;
}

}  // namespace gpubind::api
