#include "gpubind/api/binder_client.h"
#include "gpubind/protocol/limits.h"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <cstdlib>

#include "gpubind/api/convert.h"
#include "gpubind/api/status_convert.h"
#include "gpubind/protocol/client.h"
#include "gpubind/protocol/io.h"
#include "gpubind/v1/binder.grpc.pb.h"

namespace gpubind::api {
namespace {

std::shared_ptr<grpc::Channel> make_channel(const std::string& socket_path) {
  grpc::ChannelArguments args;
  // A fresh connection per client object; do not share subchannels between objects.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
}

Error rpc_error(const std::string& socket_path, const grpc::Status& status) {
  std::string what;
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      what = "daemon unavailable";
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      what = "daemon did not answer in time";
      break;
    case grpc::StatusCode::INVALID_ARGUMENT:
      what = "request refused";
      break;
    case grpc::StatusCode::FAILED_PRECONDITION:
      what = "the request does not fit the daemon's topology";
      break;
    default:
      what = "call failed (gRPC code " + std::to_string(status.error_code()) + ")";
  }
  Error error =
      make_error("gpubindd at " + socket_path + ": " + what + ": " + status.error_message());
  error.invalid_input = status.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
  error.node_mismatch = status.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
  return error;
}

}  // namespace

std::string default_socket() {
  const char* env = std::getenv("GPUBIND_SOCKET");
  return env && *env ? env : protocol::kDefaultSocket;
}

struct BinderClient::Impl {
  std::string socket_path;
  std::unique_ptr<v1::Binder::Stub> stub;

  void prepare(grpc::ClientContext& context, std::chrono::milliseconds timeout) const {
    context.set_deadline(std::chrono::system_clock::now() + timeout);
  }
};

BinderClient::BinderClient(const std::string& socket_path) : impl_(std::make_unique<Impl>()) {
  impl_->socket_path = socket_path;
  impl_->stub = v1::Binder::NewStub(make_channel(socket_path));
}

BinderClient::~BinderClient() = default;

Result<PlanReply> BinderClient::plan(const PlanRequest& request, const StepIds& ids,
                                     std::chrono::milliseconds timeout) {
  v1::PlanRequest proto = api::request_to_proto(request);
  proto.set_job_id(ids.job_id);
  proto.set_step_id(ids.step_id);
  v1::PlanResponse response;
  grpc::ClientContext context;
  impl_->prepare(context, timeout);
  const grpc::Status status = impl_->stub->Plan(&context, proto, &response);
  if (!status.ok()) return rpc_error(impl_->socket_path, status);
  PlanReply reply;
  reply.plan = api::plan_from_proto(response);
  reply.policy_generation = response.policy_generation();
  reply.topology_generation = response.topology_generation();
  reply.cached = response.cached();
  reply.response_bytes = response.ByteSizeLong();
  return reply;
}

Result<TopologyReply> BinderClient::topology(std::chrono::milliseconds timeout) {
  v1::GetTopologyResponse response;
  grpc::ClientContext context;
  impl_->prepare(context, timeout);
  const grpc::Status status = impl_->stub->GetTopology(&context, {}, &response);
  if (!status.ok()) return rpc_error(impl_->socket_path, status);
  auto reserved = CpuSet::parse_list(response.reserved_cpus());
  if (!reserved) {
    return make_error("gpubindd at " + impl_->socket_path +
                      " sent a bad reserved cpu list: " + reserved.error().message);
  }
  return TopologyReply{api::topology_from_proto(response), *reserved,
                       response.topology_generation()};
}

Result<DaemonStatus> BinderClient::status(std::chrono::milliseconds timeout) {
  v1::GetStatusResponse response;
  grpc::ClientContext context;
  impl_->prepare(context, timeout);
  const grpc::Status status = impl_->stub->GetStatus(&context, {}, &response);
  if (!status.ok()) return rpc_error(impl_->socket_path, status);
  return api::status_from_proto(response);
}

}  // namespace gpubind::api
