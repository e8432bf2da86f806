// Every Plan request is parsed once and keyed once, whichever protocol brings it and whichever
// thread answers it (the router from the cache, or a planning worker): the daemon's router,
// workers and gRPC server on a real socket, counted by BinderService::intake().
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "gpubind/daemon/binder_service.h"
#include "gpubind/daemon/daemon_state.h"
#include "gpubind/daemon/listener.h"
#include "gpubind/daemon/log.h"
#include "gpubind/daemon/plan_workers.h"
#include "gpubind/daemon/router.h"
#include "gpubind/protocol/client.h"
#include "gpubind/protocol/compact.h"

namespace gpubind::daemon {
namespace {

class RequestIntakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::set_level(log::Level::kError);
    char dir[] = "/tmp/gpubind-intake-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/gpubind.sock";
    auto state = load_state({std::string(GPUBIND_FIXTURES) + "/lumi-g.policy",
                             std::string(GPUBIND_FIXTURES) + "/lumi-g.xml"},
                            nullptr);
    ASSERT_TRUE(state) << state.error().message;
    service_ = std::make_unique<BinderService>(*state, false);
    workers_ = std::make_unique<PlanWorkers>(PlanWorkers::Limits{});
    service_->plan_on(workers_.get());
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    auto fd = open_listener({socket_, 0666, std::nullopt});
    ASSERT_TRUE(fd) << fd.error().message;
    listen_fd_ = *fd;
    router_ = std::make_unique<Router>(*service_, *workers_, router_limits());
    ASSERT_TRUE(router_->start(listen_fd_, server_.get()));
  }

  virtual Router::Limits router_limits() const { return {}; }

  void TearDown() override {
    if (workers_) workers_->stop();
    if (router_) router_->stop();
    if (server_) server_->Shutdown();
    if (listen_fd_ >= 0) close(listen_fd_);
    std::filesystem::remove_all(dir_);
  }

  // The answer to `request` over the compact protocol, as the plugin asks.
  v1::PlanResponse ask_compact(const std::string& request_bytes) {
    auto answer = protocol::exchange(socket_, request_bytes, 5000, {std::nullopt, false});
    EXPECT_TRUE(answer) << answer.error().message;
    v1::PlanResponse response;
    EXPECT_TRUE(answer && response.ParseFromString(*answer));
    return response;
  }

  v1::PlanResponse ask_grpc(const v1::PlanRequest& request) {
    if (!stub_) {
      stub_ = v1::Binder::NewStub(
          grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials()));
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::PlanResponse response;
    const grpc::Status status = stub_->Plan(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // What the service parsed and keyed since `before`.
  BinderService::Intake since(const BinderService::Intake& before) const {
    const BinderService::Intake now = service_->intake();
    return {now.parsed - before.parsed, now.keyed - before.keyed};
  }

  std::string dir_, socket_;
  int listen_fd_ = -1;
  std::unique_ptr<BinderService> service_;
  std::unique_ptr<PlanWorkers> workers_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<v1::Binder::Stub> stub_;
};

v1::PlanRequest step(uint32_t ntasks, uint64_t job_id) {
  v1::PlanRequest request;
  request.set_ntasks(ntasks);
  request.set_job_id(job_id);
  return request;
}

TEST_F(RequestIntakeTest, ACompactRequestIsParsedAndKeyedOncePlannedOrCached) {
  auto before = service_->intake();
  const v1::PlanResponse planned = ask_compact(step(8, 1).SerializeAsString());
  EXPECT_FALSE(planned.cached());
  EXPECT_EQ(planned.tasks_size(), 8);
  EXPECT_EQ(since(before).parsed, 1u);
  EXPECT_EQ(since(before).keyed, 1u);

  before = service_->intake();
  const v1::PlanResponse cached = ask_compact(step(8, 2).SerializeAsString());
  EXPECT_TRUE(cached.cached());
  EXPECT_EQ(since(before).parsed, 1u);
  EXPECT_EQ(since(before).keyed, 1u);
}

TEST_F(RequestIntakeTest, ALargeCompactRequestIsParsedOnceByItsWorker) {
  // Past the size the router parses itself: an unknown field of 8 KiB (field 1000, bytes),
  // which the parser keeps and the planner ignores.
  std::string bytes = step(16, 1).SerializeAsString();
  bytes += "\xc2\x3e";  // field 1000, length-delimited
  bytes += "\x80\x40";  // 8192
  bytes += std::string(8192, 'x');
  auto before = service_->intake();
  EXPECT_EQ(ask_compact(bytes).tasks_size(), 16);
  EXPECT_EQ(since(before).parsed, 1u);
  EXPECT_EQ(since(before).keyed, 1u);
  before = service_->intake();
  EXPECT_TRUE(ask_compact(bytes).cached());
  EXPECT_EQ(since(before).parsed, 1u);
  EXPECT_EQ(since(before).keyed, 1u);
}

TEST_F(RequestIntakeTest, AGrpcPlanIsParsedAndKeyedOncePlannedOrCached) {
  auto before = service_->intake();
  const v1::PlanResponse planned = ask_grpc(step(24, 1));
  EXPECT_FALSE(planned.cached());
  EXPECT_EQ(planned.tasks_size(), 24);
  EXPECT_EQ(since(before).parsed, 1u);
  EXPECT_EQ(since(before).keyed, 1u);

  before = service_->intake();
  EXPECT_TRUE(ask_grpc(step(24, 2)).cached());
  EXPECT_EQ(since(before).parsed, 1u);
  EXPECT_EQ(since(before).keyed, 1u);
}

TEST_F(RequestIntakeTest, ARequestBypassingTheCacheIsParsedOnceAndNeverKeyed) {
  v1::PlanRequest request = step(8, 1);
  request.set_bypass_cache(true);
  auto before = service_->intake();
  EXPECT_FALSE(ask_compact(request.SerializeAsString()).cached());
  EXPECT_FALSE(ask_grpc(request).cached());
  EXPECT_EQ(since(before).parsed, 2u);
  EXPECT_EQ(since(before).keyed, 0u);
}

// The compact exchange's deadline (Router::Limits::exchange) runs from accept, whatever the
// deadline for the first bytes: a client that sent its header at once has the whole exchange.
class CompactDeadlineTest : public RequestIntakeTest {
 protected:
  Router::Limits router_limits() const override {
    Router::Limits limits;
    limits.classify = std::chrono::milliseconds(200);
    limits.exchange = std::chrono::milliseconds(10000);
    return limits;
  }
};

TEST_F(CompactDeadlineTest, AnExchangeHasItsWholeDeadlineNotTheFirstBytesOne) {
  const std::string body = step(8, 1).SerializeAsString();
  std::string frame(compact::kMagic, sizeof compact::kMagic);
  frame += static_cast<char>(compact::kVersion);
  for (int shift = 0; shift < 32; shift += 8)
    frame += static_cast<char>((body.size() >> shift) & 0xff);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", socket_.c_str());
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(write(fd, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  // Well past the first bytes' deadline, well inside the exchange's.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(send(fd, body.data(), body.size(), MSG_NOSIGNAL), static_cast<ssize_t>(body.size()));
  char status = 1;
  EXPECT_EQ(read(fd, &status, 1), 1) << "the connection was cut before its exchange deadline";
  EXPECT_EQ(status, static_cast<char>(compact::kStatusPlan));
  close(fd);
}

}  // namespace
}  // namespace gpubind::daemon
