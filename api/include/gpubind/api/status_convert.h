// GetStatusResponse as the client's DaemonStatus: BinderClient::status's mapping, apart from the
// gRPC call so that the schema tests can walk it by the message's descriptors.
#pragma once

#include "gpubind/api/binder_client.h"
#include "gpubind/v1/binder.pb.h"

namespace gpubind::api {

api::DaemonStatus status_from_proto(const v1::GetStatusResponse& proto);

}  // namespace gpubind::api
