// The real gpubindd on a real Unix socket: readiness, socket activation, plans identical to the
// offline planner, the cache, reloads (good and bad), refused requests, watchdog, shutdown.
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "../support/daemon_process.h"
#include "../support/invariants.h"
#include "gpubind/api/binder_client.h"
#include "gpubind/api/convert.h"
#include "gpubind/client/plan_source.h"
#include "gpubind/client/step_env.h"
#include "gpubind/node.h"
#include "gpubind/protocol/client.h"
#include "gpubind/protocol/compact.h"
#include "gpubind/protocol/io.h"

namespace gpubind {
namespace {

using namespace std::chrono_literals;
using testing::DaemonProcess;
using testing::NotifySocket;

const std::string kFixtures = GPUBIND_FIXTURES;
const std::string kDaemon = GPUBIND_DAEMON;
const std::string kStepdLib = GPUBIND_STEPD_LIB;
const std::string kStepdDriver = GPUBIND_STEPD_DRIVER;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir();
    socket_ = dir_ + "/gpubind.sock";
    policy_ = dir_ + "/policy.conf";
    write_file(policy_, "reserve_first_core_per_l3: true\nsmt: 1\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Starts the daemon on the LUMI-G fixture and waits for READY=1.
  void start(std::vector<std::string> extra_args = {}, std::vector<std::string> env = {},
             int listen_fd = -1) {
    notify_ = std::make_unique<NotifySocket>(dir_ + "/notify.sock");
    std::vector<std::string> args = {"--socket",    socket_,      "--config",
                                     policy_,       "--topology", kFixtures + "/lumi-g.xml",
                                     "--log-level", "debug"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    env.push_back("NOTIFY_SOCKET=" + notify_->path());
    daemon_.start(kDaemon, args, env, dir_ + "/daemon.log", listen_fd);
    ASSERT_TRUE(notify_->wait_for("READY=1", 10s)) << daemon_.log();
  }

  // `n` gRPC clients, each asking one 8-task plan (jobs first_job...) at once; `done` hears
  // whether each got it.
  std::vector<std::thread> grpc_callers(int n, uint64_t first_job, std::chrono::seconds timeout,
                                        const std::function<void(bool)>& done) {
    std::vector<std::thread> callers;
    for (int i = 0; i < n; ++i) {
      callers.emplace_back([this, i, first_job, timeout, done] {
        api::BinderClient own(socket_);
        PlanRequest request;
        request.ntasks = 8;
        done(static_cast<bool>(own.plan(request, {first_job + i, 0}, timeout)));
      });
    }
    return callers;
  }

  api::BinderClient& client() {
    if (!client_) client_ = std::make_unique<api::BinderClient>(socket_);
    return *client_;
  }

  Node offline_node() {
    auto node = load_node({policy_, kFixtures + "/lumi-g.xml"});
    EXPECT_TRUE(node) << node.error().message;
    return node ? std::move(*node) : Node{};
  }

  std::string dir_, socket_, policy_;
  std::unique_ptr<NotifySocket> notify_;
  DaemonProcess daemon_;
  std::unique_ptr<api::BinderClient> client_;
};

TEST_F(DaemonTest, NotifiesReadyAndServesOnAWorldWritableSocket) {
  start();
  const auto& messages = notify_->messages();
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(messages.back().find("STATUS=Serving policy " + policy_), std::string::npos);
  struct stat st {};
  ASSERT_EQ(stat(socket_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0666u) << "tasks of every user must connect";
  auto status = client().status(2s);
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ(status->policy_source, policy_);
  EXPECT_EQ(status->policy_generation, 1u);
  EXPECT_EQ(status->topology_source, kFixtures + "/lumi-g.xml");
  EXPECT_FALSE(status->socket_activated);
  EXPECT_EQ(status->pid, daemon_.pid());
  EXPECT_GT(status->rss_bytes, 0u);
}

TEST_F(DaemonTest, PlansAreIdenticalToTheOfflinePlanner) {
  start();
  const Node node = offline_node();
  std::vector<PlanRequest> requests;
  for (int n : {1, 8, 16, 24, 56, 60}) {
    PlanRequest r;
    r.ntasks = n;
    requests.push_back(r);
  }
  PlanRequest by_cpu;
  by_cpu.ntasks = 8;
  by_cpu.order = Order::kCpu;
  by_cpu.omp_places = true;
  requests.push_back(by_cpu);
  PlanRequest subset;
  subset.ntasks = 3;
  subset.gpus = std::vector<StepGpu>{{5, "0"}, {2, "1"}};
  subset.allowed_cpus = *CpuSet::parse_list("0-31");
  subset.cpus_per_task = 3;
  subset.nic_env = false;
  requests.push_back(subset);
  for (const PlanRequest& request : requests) {
    auto local = make_plan(node.topology, node.policy, request);
    ASSERT_TRUE(local);
    auto remote = client().plan(request, {42, 0}, 2s);
    ASSERT_TRUE(remote) << remote.error().message;
    EXPECT_EQ(testing::fingerprint(remote->plan), testing::fingerprint(*local))
        << request.ntasks << " tasks";
    EXPECT_EQ(remote->policy_generation, 1u);
  }
}

TEST_F(DaemonTest, IdenticalStepShapesGetTheSameCachedPlan) {
  start();
  PlanRequest request;
  request.ntasks = 8;
  auto first = client().plan(request, {1, 0}, 2s);
  auto second = client().plan(request, {2, 7}, 2s);  // other job, same shape
  ASSERT_TRUE(first && second);
  EXPECT_FALSE(first->cached);
  EXPECT_TRUE(second->cached);
  EXPECT_EQ(testing::fingerprint(first->plan), testing::fingerprint(second->plan));
  request.ntasks = 4;
  auto other = client().plan(request, {1, 0}, 2s);
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->cached);
  auto status = client().status(2s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->requests, 3u);
  EXPECT_EQ(status->cache_hits, 1u);
}

TEST_F(DaemonTest, SocketActivationServesTheInheritedSocket) {
  const int fd = testing::make_listening_socket(socket_);
  ASSERT_GE(fd, 0);
  // --socket points elsewhere: the inherited socket must win.
  start({"--socket", dir_ + "/unused.sock"}, {}, fd);
  close(fd);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/unused.sock"));
  auto status = client().status(2s);
  ASSERT_TRUE(status) << status.error().message << "\n" << daemon_.log();
  EXPECT_TRUE(status->socket_activated);
  PlanRequest request;
  request.ntasks = 8;
  auto plan = client().plan(request, {}, 2s);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->plan.tasks[0].cpus.to_list(), "49-55");
  EXPECT_EQ(daemon_.stop(SIGTERM), 0);
  EXPECT_TRUE(std::filesystem::exists(socket_)) << "the socket belongs to systemd";
}

TEST_F(DaemonTest, ABrokenPolicyOnReloadIsRefusedAndTheOldOneKeepsServing) {
  start();
  PlanRequest request;
  request.ntasks = 8;
  auto before = client().plan(request, {}, 2s);
  ASSERT_TRUE(before);
  write_file(policy_, "reserve_first_core_per_l3: true\nsmt: 1\nreserved_cpus: \"0-\"\n");
  kill(daemon_.pid(), SIGHUP);
  ASSERT_TRUE(notify_->wait_for("last reload refused", 10s)) << daemon_.log();
  auto status = client().status(2s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->policy_generation, 1u);
  EXPECT_NE(status->last_reload_error.find(policy_ + ":3: reserved_cpus"), std::string::npos)
      << status->last_reload_error;
  EXPECT_NE(daemon_.log().find(policy_ + ":3: reserved_cpus"), std::string::npos) << daemon_.log();
  auto during = client().plan(request, {}, 2s);
  ASSERT_TRUE(during);
  EXPECT_EQ(testing::fingerprint(during->plan), testing::fingerprint(before->plan));

  // A good policy then takes effect: generation 2, both threads per core. Its site variable is
  // one the plugin applies only if plugstack.conf allows it: the log says so.
  write_file(policy_,
             "reserve_first_core_per_l3: true\nsmt: 2\n"
             "omp_env { name: \"SITE_THREADS\" value: \"{omp_threads}\" }\n");
  kill(daemon_.pid(), SIGHUP);
  ASSERT_TRUE(notify_->wait_for("STATUS=Serving policy", 10s));
  status = client().status(2s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->policy_generation, 2u);
  EXPECT_TRUE(status->last_reload_error.empty());
  auto after = client().plan(request, {}, 2s);
  ASSERT_TRUE(after);
  EXPECT_FALSE(after->cached) << "a new generation never answers from the old cache";
  EXPECT_NE(daemon_.log().find("the policy sets SITE_THREADS, which is not a binding variable"),
            std::string::npos)
      << daemon_.log();
  EXPECT_EQ(after->policy_generation, 2u);
  EXPECT_EQ(after->plan.tasks[0].cpus.to_list(), "49-55,113-119");
}

TEST_F(DaemonTest, InvalidAndOversizedRequestsAreRefusedWhileServingGoesOn) {
  start();
  auto expect_refused = [&](const PlanRequest& request, const std::string& text) {
    auto reply = client().plan(request, {}, 2s);
    ASSERT_FALSE(reply) << text;
    EXPECT_NE(reply.error().message.find("request refused"), std::string::npos)
        << reply.error().message;
    EXPECT_NE(reply.error().message.find(text), std::string::npos) << reply.error().message;
  };
  PlanRequest zero;
  zero.ntasks = 0;
  expect_refused(zero, "ntasks must be from 1 to 4096");
  PlanRequest huge;
  huge.ntasks = 100000;
  expect_refused(huge, "ntasks must be from 1 to 4096");
  PlanRequest many_gpus;
  many_gpus.ntasks = 1;
  many_gpus.gpus = std::vector<StepGpu>(1025, StepGpu{0, "0"});
  expect_refused(many_gpus, "1025 GPUs exceed the limit of 1024");
  PlanRequest long_token;
  long_token.ntasks = 1;
  long_token.gpus = std::vector<StepGpu>{{0, std::string(200, 'x')}};
  expect_refused(long_token, "GPU token longer than 128 bytes");
  PlanRequest big;
  big.ntasks = 1;
  big.gpus = std::vector<StepGpu>(2000, StepGpu{0, std::string(127, 'y')});
  expect_refused(big, "exceeds the limit of 262144");
  PlanRequest unknown_gpu;
  unknown_gpu.ntasks = 1;
  unknown_gpu.gpus = std::vector<StepGpu>{{9, "9"}};
  auto mismatch = client().plan(unknown_gpu, {}, 2s);
  ASSERT_FALSE(mismatch);
  EXPECT_TRUE(mismatch.error().node_mismatch) << "not the request's fault: the node view's";
  EXPECT_NE(
      mismatch.error().message.find("does not fit the daemon's topology: GPU 9 does not exist"),
      std::string::npos)
      << mismatch.error().message;
  PlanRequest reserved_only;
  reserved_only.ntasks = 1;
  reserved_only.allowed_cpus = CpuSet::of({0, 8});
  expect_refused(reserved_only, "no usable CPUs");

  // Beyond gRPC's own message limit (1 MiB): refused by gRPC, daemon unharmed.
  PlanRequest enormous;
  enormous.ntasks = 1;
  enormous.gpus = std::vector<StepGpu>(1000, StepGpu{0, std::string(1200, 'z')});
  auto refused = client().plan(enormous, {}, 2s);
  ASSERT_FALSE(refused);

  PlanRequest good;
  good.ntasks = 8;
  auto plan = client().plan(good, {}, 2s);
  ASSERT_TRUE(plan) << plan.error().message;
  auto status = client().status(2s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->errors, 7u);
  EXPECT_EQ(status->requests, 1u);
}

TEST_F(DaemonTest, SigtermDrainsAndExitsZero) {
  start();
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0};
  std::thread load([&] {
    api::BinderClient loader(socket_);
    PlanRequest request;
    request.ntasks = 56;
    while (!stop) {
      if (loader.plan(request, {}, 2s)) ++answered;
    }
  });
  while (answered < 20)
    std::this_thread::sleep_for(1ms);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(daemon_.stop(SIGTERM), 0) << daemon_.log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 6s);
  stop = true;
  load.join();
  EXPECT_TRUE(notify_->wait_for("STOPPING=1", 1s));
  EXPECT_FALSE(std::filesystem::exists(socket_)) << "its own socket is removed";
  EXPECT_NE(daemon_.log().find("stopped"), std::string::npos);
}

TEST_F(DaemonTest, WatchdogIsPingedWhenSystemdAsks) {
  start({}, {"WATCHDOG_USEC=200000"});
  EXPECT_TRUE(notify_->wait_for("WATCHDOG=1", 2s));
  EXPECT_TRUE(notify_->wait_for("WATCHDOG=1", 2s)) << "pinged repeatedly";
}

// One user may hold 64 connections: past that, their oldest silent one is closed for each new
// one, and another user is served all along. (Root only: the test becomes user nobody.)
TEST_F(DaemonTest, OneUserHoldsAtMost64Connections) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to connect as another user";
  start();
  chmod(dir_.c_str(), 0755);
  constexpr int kOpened = 80;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(200);
    std::vector<int> fds;
    for (int i = 0; i < kOpened; ++i) {
      auto fd = protocol::connect_unix(socket_, protocol::Clock::now() + 1s);
      if (!fd) _exit(201);
      fds.push_back(*fd);
    }
    std::this_thread::sleep_for(300ms);  // well inside the 1 s a silent connection may live
    int open = 0;
    for (int fd : fds) {
      char byte;
      const ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
      open += n < 0 && errno == EAGAIN;
    }
    _exit(open);
  }
  // Meanwhile another user (root here) is served.
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(client().status(2s));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 64) << "connections of user nobody still open";
}

// The watchdog's probe is a plan through the socket: when the socket stops answering (here its
// file is gone, as for a wedged router), systemd stops hearing from the daemon.
TEST_F(DaemonTest, WatchdogPingsOnlyWhileTheSocketAnswers) {
  start({}, {"WATCHDOG_USEC=200000"});
  ASSERT_TRUE(notify_->wait_for("WATCHDOG=1", 2s));
  const std::string moved = socket_ + ".moved";
  ASSERT_EQ(rename(socket_.c_str(), moved.c_str()), 0);
  for (int drained = 0; drained < 20 && notify_->wait_for("WATCHDOG=1", 150ms); ++drained) {
  }
  EXPECT_FALSE(notify_->wait_for("WATCHDOG=1", 1s)) << "pinged with no socket to answer";
  EXPECT_NE(daemon_.log().find("watchdog probe through " + socket_ + " failed"), std::string::npos)
      << daemon_.log();
  ASSERT_EQ(rename(moved.c_str(), socket_.c_str()), 0);
  EXPECT_TRUE(notify_->wait_for("WATCHDOG=1", 2s)) << "pings again once it answers";
}

TEST_F(DaemonTest, AnotherDaemonOnTheSameSocketIsRefused) {
  start();
  DaemonProcess second;
  second.start(kDaemon,
               {"--foreground", "--socket", socket_, "--topology", kFixtures + "/lumi-g.xml"}, {},
               dir_ + "/second.log");
  EXPECT_EQ(second.wait_exit(10s), 1);
  EXPECT_NE(second.log().find("is served by another process"), std::string::npos) << second.log();
  EXPECT_TRUE(client().status(2s)) << "the first one still serves";
}

TEST_F(DaemonTest, AStaleSocketFileIsReplaced) {
  const int fd = testing::make_listening_socket(socket_);
  close(fd);  // the file stays, nobody listens
  start();
  EXPECT_TRUE(client().status(2s));
}

TEST_F(DaemonTest, StartupErrorsNameTheFaultAndExitNonZero) {
  DaemonProcess missing;
  missing.start(kDaemon, {"--foreground", "--socket", socket_, "--topology", dir_ + "/none.xml"},
                {}, dir_ + "/missing.log");
  EXPECT_EQ(missing.wait_exit(10s), 1);
  EXPECT_NE(missing.log().find("topology file '" + dir_ + "/none.xml': No such file or directory"),
            std::string::npos)
      << missing.log();

  write_file(policy_, "smt: 1\nbogus: 2\n");
  DaemonProcess broken;
  broken.start(kDaemon,
               {"--foreground", "--socket", socket_, "--config", policy_, "--topology",
                kFixtures + "/lumi-g.xml"},
               {}, dir_ + "/broken.log");
  EXPECT_EQ(broken.wait_exit(10s), 1);
  EXPECT_NE(broken.log().find(policy_ + ":2:"), std::string::npos) << broken.log();

  DaemonProcess bad_flag;
  bad_flag.start(kDaemon, {"--sockett", socket_}, {}, dir_ + "/flag.log");
  EXPECT_EQ(bad_flag.wait_exit(10s), 2);
  EXPECT_NE(bad_flag.log().find("unknown option --sockett"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(socket_));
}

// A socket folder another user controls (theirs, or one its group or anyone may write, not
// sticky) is refused before bind: a link swapped in between bind() and chmod() would make the
// daemon change the mode of any file.
TEST_F(DaemonTest, ASocketFolderAnotherUserControlsIsRefused) {
  const std::string writable = dir_ + "/writable";
  std::filesystem::create_directory(writable);
  chmod(writable.c_str(), 0777);
  DaemonProcess open;
  open.start(
      kDaemon,
      {"--foreground", "--socket", writable + "/s.sock", "--topology", kFixtures + "/lumi-g.xml"},
      {}, dir_ + "/writable.log");
  EXPECT_EQ(open.wait_exit(10s), 1);
  EXPECT_NE(
      open.log().find("socket directory '" + writable + "' is writable by its group or by others"),
      std::string::npos)
      << open.log();
  EXPECT_FALSE(std::filesystem::exists(writable + "/s.sock"));

  if (geteuid() != 0) GTEST_SKIP() << "giving a folder to another user needs root";
  const std::string theirs = dir_ + "/theirs";
  std::filesystem::create_directories(theirs + "/inner");
  ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
  DaemonProcess below;
  below.start(kDaemon,
              {"--foreground", "--socket", theirs + "/inner/s.sock", "--topology",
               kFixtures + "/lumi-g.xml"},
              {}, dir_ + "/theirs.log");
  EXPECT_EQ(below.wait_exit(10s), 1);
  EXPECT_NE(below.log().find("socket directory '" + theirs + "' belongs to uid 65534"),
            std::string::npos)
      << "a folder above the socket's counts too: " << below.log();
}

TEST_F(DaemonTest, WithoutForegroundItDetachesOnceServing) {
  DaemonProcess launcher;
  launcher.start(kDaemon, {"--socket", socket_, "--topology", kFixtures + "/lumi-g.xml"}, {},
                 dir_ + "/detach.log");
  EXPECT_EQ(launcher.wait_exit(10s), 0) << launcher.log();
  auto status = client().status(2s);
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_NE(status->pid, 0);
  EXPECT_NE(status->pid, launcher.pid());
  kill(status->pid, SIGTERM);
  for (int i = 0; i < 500 && std::filesystem::exists(socket_); ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(std::filesystem::exists(socket_));
}

// A repeated step shape over the compact protocol is answered from the cache (by the router
// itself) with the very plan the first request got, marked cached.
TEST_F(DaemonTest, RepeatedCompactRequestsAreAnsweredFromTheCache) {
  start();
  protocol::StepRequest step;
  step.ntasks = 8;
  step.job_id = 1;
  auto first_bytes = protocol::encode_request(step);
  step.job_id = 2;  // another job, the same shape
  auto second_bytes = protocol::encode_request(step);
  ASSERT_TRUE(first_bytes && second_bytes);
  auto first = protocol::exchange(socket_, *first_bytes, 1000);
  auto second = protocol::exchange(socket_, *second_bytes, 1000);
  ASSERT_TRUE(first && second);
  v1::PlanResponse a, b;
  ASSERT_TRUE(a.ParseFromString(*first) && b.ParseFromString(*second));
  EXPECT_FALSE(a.cached());
  EXPECT_TRUE(b.cached());
  b.set_cached(false);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  auto status = client().status(2s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->requests, 2u);
  EXPECT_EQ(status->cache_hits, 1u);
}

// gRPC's Plan calls are planned on the daemon's workers, all gRPC callers in one turn: at most two
// run at once, whatever a tool or a hostile client sends, while a job step's compact request
// (its own turn) is served beside them. Every answer is held 300 ms (--delay-answers), so six
// gRPC calls take three rounds.
TEST_F(DaemonTest, GrpcPlansTakeTurnsWithJobSteps) {
  start({"--delay-answers", "300"});
  const auto began = std::chrono::steady_clock::now();
  std::atomic<int> answered{0};
  std::vector<std::thread> callers =
      grpc_callers(6, 100, 10s, [&](bool ok) { answered += ok ? 1 : 0; });
  protocol::StepRequest step;
  step.ntasks = 8;
  auto bytes = protocol::encode_request(step);
  ASSERT_TRUE(bytes);
  auto compact = protocol::exchange(socket_, *bytes, 5000);
  EXPECT_TRUE(compact) << compact.error().message;
  for (std::thread& caller : callers)
    caller.join();
  EXPECT_EQ(answered, 6);
  EXPECT_GE(std::chrono::steady_clock::now() - began, 900ms)
      << "six held gRPC plans ran more than two at a time";
}

// gRPC plans still waiting for a worker when the daemon stops are answered (UNAVAILABLE), not
// left to hang their callers or the daemon's exit.
TEST_F(DaemonTest, StoppingAnswersGrpcPlansStillWaiting) {
  start({"--delay-answers", "1000"});
  std::atomic<int> returned{0};
  std::vector<std::thread> callers = grpc_callers(6, 200, 30s, [&](bool) { ++returned; });
  std::this_thread::sleep_for(300ms);  // the first two hold workers, the others wait
  const auto stopping = std::chrono::steady_clock::now();
  EXPECT_EQ(daemon_.stop(SIGTERM), 0) << daemon_.log();
  for (std::thread& caller : callers)
    caller.join();
  EXPECT_EQ(returned, 6);
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, 15s) << "no caller waited for its timeout";
}

// The plugin's path for MIG instances and a PVC task's Level Zero hierarchy: both reach the
// daemon and come back in the plan.
TEST_F(DaemonTest, MigTokensAndZeHierarchyTravelTheCompactProtocol) {
  start();
  protocol::StepRequest step;
  step.ntasks = 2;
  step.gpus_given = true;
  step.unplaced_gpus = {"MIG-aaaa", "MIG-bbbb"};
  step.ze_hierarchy = "composite";
  auto plan = protocol::ask_daemon(socket_, step, 1000);
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->tasks.size(), 2u);
  EXPECT_EQ(plan->tasks[1].tokens, "MIG-bbbb");
  ASSERT_FALSE(plan->warnings.empty());
  EXPECT_NE(plan->warnings.back().find("MIG instances"), std::string::npos);
}

// The frame around binder.proto's bytes: `version` and the request.
std::string compact_frame(uint8_t version, const std::string& payload) {
  std::string frame(compact::kMagic, sizeof compact::kMagic);
  frame += static_cast<char>(version);
  char length[4];
  compact::put_length(length, static_cast<uint32_t>(payload.size()));
  return frame + std::string(length, 4) + payload;
}

// Sends raw bytes and returns the whole answer (status, length, payload).
std::string raw_exchange(const std::string& socket, const std::string& bytes) {
  const int fd = testing::connect_unix(socket);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  std::string answer;
  char chunk[4096];
  for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) > 0;)
    answer.append(chunk, static_cast<size_t>(n));
  close(fd);
  return answer;
}

// What the daemon reads of the plugin's request.
v1::PlanRequest api_request(const protocol::StepRequest& step) {
  v1::PlanRequest proto;
  EXPECT_TRUE(proto.ParseFromString(*protocol::encode_request(step)));
  return proto;
}

protocol::StepRequest eight_task_step() {
  protocol::StepRequest step;
  step.job_id = 7;
  step.ntasks = 8;
  step.gpus_given = true;
  for (int g = 0; g < 8; ++g)
    step.gpus.push_back({g, std::to_string(g)});
  return step;
}

// Where a step's plan comes from (the plugin's and gpubind-run's one rule): the daemon; its
// fallback only when the daemon cannot plan (absent, stale node view) and the site allows it;
// never for a request refused on its merits. An administrator hears of a stale daemon. (The
// fallback library cannot load into this process, which has libprotobuf: a fallback tried says
// so in the error. It plans for real in e2e.slurm and cli.gpubind_run.)
TEST_F(DaemonTest, StepPlansFallBackOnlyWhenTheDaemonCannotPlan) {
  start();
  client::SiteArgs site;
  site.socket = socket_;
  const client::InProcess fallback{dir_ + "/no-such-libgpubind_stepd.so", ""};
  const std::string tried = "in-process planning failed too: cannot load";
  std::vector<std::string> reported;
  auto report = [&](const std::string& message) { reported.push_back(message); };

  auto daemon = client::plan_step(eight_task_step(), site, fallback, report);
  ASSERT_TRUE(daemon) << daemon.error().message;
  EXPECT_EQ(daemon->plan.source, "daemon");
  EXPECT_FALSE(daemon->fallback) << "no fallback, no report";

  protocol::StepRequest gpu_nine;
  gpu_nine.ntasks = 1;
  gpu_nine.gpus_given = true;
  gpu_nine.gpus = {{9, "9"}};
  auto stale = client::plan_step(gpu_nine, site, fallback, report);
  ASSERT_FALSE(stale);
  EXPECT_NE(stale.error().message.find("does not fit the daemon's topology: GPU 9 does not exist"),
            std::string::npos)
      << stale.error().message;
  EXPECT_NE(stale.error().message.find(tried), std::string::npos) << "the fallback was tried";
  ASSERT_EQ(reported.size(), 1u) << "slurmd's log hears of the stale daemon";

  protocol::StepRequest twice = gpu_nine;
  twice.gpus = {{1, "1"}, {1, "1"}};
  auto refused = client::plan_step(twice, site, fallback, report);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().invalid_input);
  EXPECT_EQ(refused.error().message.find("in-process"), std::string::npos) << "not retried";

  site.on_error = client::OnError::kSkip;
  auto skipped = client::plan_step(gpu_nine, site, fallback, report);
  ASSERT_FALSE(skipped);
  EXPECT_EQ(skipped.error().message.find("in-process"), std::string::npos) << "skip: no fallback";

  site.on_error = client::OnError::kFallback;
  site.socket = dir_ + "/absent.sock";
  auto absent = client::plan_step(eight_task_step(), site, fallback, report);
  ASSERT_FALSE(absent);
  EXPECT_NE(absent.error().message.find(tried), std::string::npos) << absent.error().message;
  EXPECT_EQ(reported.size(), 2u)
      << "the stale daemon twice; an absent daemon is no news for the log";
}

TEST_F(DaemonTest, TheCompactProtocolGivesTheSamePlansOnTheSameSocket) {
  start();
  protocol::StepRequest step = eight_task_step();
  auto plan = protocol::ask_daemon(socket_, step, 1000);
  ASSERT_TRUE(plan) << plan.error().message;
  // The same request over gRPC: the same tasks.
  auto grpc = client().plan(*api::request_from_proto(api_request(step)), {}, 2s);
  ASSERT_TRUE(grpc) << grpc.error().message;
  ASSERT_EQ(plan->tasks.size(), grpc->plan.tasks.size());
  for (size_t i = 0; i < plan->tasks.size(); ++i) {
    EXPECT_EQ(plan->tasks[i].cpus, grpc->plan.tasks[i].cpus.to_list());
    EXPECT_EQ(plan->tasks[i].env.size(), grpc->plan.tasks[i].env.size());
  }
  EXPECT_EQ(plan->tasks[0].cpus, "49-55");
  EXPECT_EQ(client::describe_gpus(plan->tasks[0].gpus), "0 (0000:c1:00.0, L3 6)")
      << "the daemon names each GPU's domain";

  // Refusals carry the reason and are marked as the request's fault.
  protocol::StepRequest twice = step;
  twice.gpus.push_back(twice.gpus.front());
  auto refused = protocol::ask_daemon(socket_, twice, 1000);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().invalid_input);
  EXPECT_FALSE(refused.error().node_mismatch);
  EXPECT_NE(refused.error().message.find("is listed twice"), std::string::npos);
  // A GPU the daemon's topology lacks is not the request's fault: the daemon's node view may be
  // stale (the plugin then plans from the live node). Over gRPC too.
  step.gpus.push_back({9, "9"});
  auto mismatch = protocol::ask_daemon(socket_, step, 1000);
  ASSERT_FALSE(mismatch);
  EXPECT_TRUE(mismatch.error().node_mismatch);
  EXPECT_FALSE(mismatch.error().invalid_input);
  EXPECT_NE(
      mismatch.error().message.find("does not fit the daemon's topology: GPU 9 does not exist"),
      std::string::npos)
      << mismatch.error().message;
  auto grpc_mismatch = client().plan(*api::request_from_proto(api_request(step)), {}, 2s);
  ASSERT_FALSE(grpc_mismatch);
  EXPECT_TRUE(grpc_mismatch.error().node_mismatch) << grpc_mismatch.error().message;
  EXPECT_FALSE(grpc_mismatch.error().invalid_input);
  auto garbage = protocol::exchange(socket_, std::string("\x0a\xff\xff", 3), 1000);
  ASSERT_FALSE(garbage);
  EXPECT_TRUE(garbage.error().invalid_input);
  EXPECT_NE(garbage.error().message.find("not a gpubind.v1.PlanRequest"), std::string::npos);

  // Both protocols count in the same statistics.
  auto status = client().status(2s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->requests, 2u);
  EXPECT_EQ(status->errors, 3u) << "the undecodable request never reached the planner";
}

// A socket where every user may write is said at once: the plugin will not trust it.
TEST_F(DaemonTest, ASocketInAFolderEveryoneMayWriteIsSaidAtStart) {
  const std::string open_dir = dir_ + "/open";
  std::filesystem::create_directory(open_dir);
  chmod(open_dir.c_str(), 01777);
  socket_ = open_dir + "/gpubind.sock";
  start();
  EXPECT_NE(daemon_.log().find("is writable by every user"), std::string::npos) << daemon_.log();
  auto untrusted = protocol::exchange(socket_, "", 1000);
  ASSERT_FALSE(untrusted);
  EXPECT_TRUE(untrusted.error().untrusted);
}

// A hostile 64 KiB field is refused as the request's fault, and the refusal quotes it in part.
TEST_F(DaemonTest, ARefusalDoesNotEchoAHostileRequest) {
  start();
  v1::PlanRequest hostile;
  hostile.set_ntasks(1);
  hostile.set_allowed_cpus(std::string(65000, '7') + "x");
  auto refused = protocol::exchange(socket_, hostile.SerializeAsString(), 1000);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().invalid_input);
  EXPECT_LT(refused.error().message.size(), 400u);
  EXPECT_TRUE(client().status(2s)) << "the daemon serves on";
}

// A newer plugin's request: a field this daemon does not know is skipped, the plan is the same.
TEST_F(DaemonTest, RequestFieldsTheDaemonDoesNotKnowAreSkipped) {
  start();
  auto bytes = protocol::encode_request(eight_task_step());
  ASSERT_TRUE(bytes);
  // Field 1000, length-delimited: a later release's addition.
  const std::string later = *bytes + std::string("\xc2\x3e\x05later", 8);
  auto plain = protocol::exchange(socket_, *bytes, 1000);
  auto newer = protocol::exchange(socket_, later, 1000);
  ASSERT_TRUE(newer) << newer.error().message;
  ASSERT_TRUE(plain);
  auto a = protocol::decode_plan(*plain);
  auto b = protocol::decode_plan(*newer);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->tasks.size(), b->tasks.size());
  for (size_t i = 0; i < a->tasks.size(); ++i)
    EXPECT_EQ(a->tasks[i].cpus, b->tasks[i].cpus);
}

// Another frame version is answered with the version the daemon speaks, and the client takes it
// as "no daemon": the plugin falls back instead of leaving the step unbound. The first release's
// plugin ("GPUBIND1", text) reads any answer as a refusal: it gets none, and falls back too.
TEST_F(DaemonTest, AnotherFrameVersionIsToldAndFallsBack) {
  start();
  const std::string answer = raw_exchange(socket_, compact_frame(3, ""));
  ASSERT_GE(answer.size(), compact::kAnswerHeaderBytes);
  EXPECT_EQ(static_cast<uint8_t>(answer[0]), compact::kStatusUnsupportedVersion);
  EXPECT_NE(answer.find("speaks version 2"), std::string::npos) << answer.substr(5);
  EXPECT_EQ(raw_exchange(socket_, compact_frame('1', "ntasks=1\n")), "")
      << "a first-release plugin is answered nothing";
  EXPECT_TRUE(client().status(2s)) << "the daemon serves on";
}

// The fallback library answers the bytes the daemon answers, for the same request and policy.
TEST_F(DaemonTest, TheFallbackLibraryAnswersWhatTheDaemonAnswers) {
  start();
  // The fallback finds the topology through the policy, as on a node whose policy names one.
  const std::string policy = dir_ + "/fallback.conf";
  write_file(policy, "reserve_first_core_per_l3: true\nsmt: 1\ntopology_file: \"" + kFixtures +
                         "/lumi-g.xml\"\n");
  // In a process of its own, as in slurmstepd: this one has protobuf and the schema already.
  const auto fallback = [&](const std::string& bytes, std::string& out) {
    const std::string in = dir_ + "/request.bin", answer = dir_ + "/answer.bin";
    write_file(in, bytes);
    const int status = std::system(
        (kStepdDriver + " " + kStepdLib + " " + policy + " < " + in + " > " + answer).c_str());
    std::ifstream file(answer, std::ios::binary);
    out.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  auto bytes = protocol::encode_request(eight_task_step());
  ASSERT_TRUE(bytes);
  std::string local;
  ASSERT_EQ(fallback(*bytes, local), 0) << local;
  auto from_fallback = protocol::decode_plan(local);
  auto from_daemon = protocol::ask_daemon(socket_, eight_task_step(), 1000);
  ASSERT_TRUE(from_fallback && from_daemon);
  ASSERT_EQ(from_fallback->tasks.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(from_fallback->tasks[i].cpus, from_daemon->tasks[i].cpus);
    EXPECT_EQ(client::describe_gpus(from_fallback->tasks[i].gpus),
              client::describe_gpus(from_daemon->tasks[i].gpus));
  }
  // A refusal is a text that says why; the daemon's limits hold in-process too.
  std::string why;
  EXPECT_EQ(fallback("\x0a\xff", why), 1);
  EXPECT_EQ(why, "not a gpubind.v1.PlanRequest");
  protocol::StepRequest long_token = eight_task_step();
  long_token.gpus[0].second = std::string(200, 'x');
  EXPECT_EQ(fallback(*protocol::encode_request(long_token), why), 1);
  EXPECT_EQ(why, "GPU token longer than 128 bytes");
  auto daemon_says = protocol::ask_daemon(socket_, long_token, 1000);
  ASSERT_FALSE(daemon_says);
  EXPECT_NE(daemon_says.error().message.find(why), std::string::npos);
}

TEST_F(DaemonTest, SilentConnectionsDoNotStopOthersBeingServed) {
  start();
  std::vector<int> silent;
  for (int i = 0; i < 2; ++i) {
    const int fd = testing::connect_unix(socket_);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "GPUB", 4), 4);  // half a magic, then nothing
    silent.push_back(fd);
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(client().status(3s));
  protocol::StepRequest step;
  step.ntasks = 1;
  EXPECT_TRUE(protocol::ask_daemon(socket_, step, 3000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
  for (int fd : silent)
    close(fd);
}

TEST_F(DaemonTest, ATricklingCompactClientIsCutOffAfterTwoSeconds) {
  start();
  const int fd = testing::connect_unix(socket_);
  ASSERT_GE(fd, 0);
  const char header[12] = {'G', 'P', 'U', 'B', 'I', 'N', 'D', 2, 100, 0, 0, 0};
  ASSERT_EQ(write(fd, header, sizeof header), 12);
  const auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() - t0 < 5s) {
    if (send(fd, "x", 1, MSG_NOSIGNAL) != 1) break;  // one byte at a time, never enough
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, 300) > 0) {
      char c;
      closed = recv(fd, &c, 1, 0) <= 0;
    }
  }
  const auto held = std::chrono::steady_clock::now() - t0;
  close(fd);
  EXPECT_LT(held, 3s) << "the daemon let a trickling client hold a worker";
  EXPECT_TRUE(client().status(2s));
}

// ---- What no user can do to the daemon: unread answers, gRPC, the connection cap --------------

// A request with a large answer on LUMI-G: 4096 tasks, `gpus_per_task` GPUs each with
// `token_bytes`-byte tokens.
v1::PlanRequest large_answer_request(uint32_t gpus_per_task, size_t token_bytes, bool bypass) {
  v1::PlanRequest request;
  request.set_ntasks(4096);
  request.set_gpus_given(true);
  request.set_gpus_per_task(gpus_per_task);
  request.set_bypass_cache(bypass);
  for (int g = 0; g < 8; ++g) {
    auto* gpu = request.add_gpus();
    gpu->set_node_index(g);
    gpu->set_token(std::to_string(g) + std::string(token_bytes - 1, 'x'));
  }
  return request;
}

// A connection that sent `frame`; the answer's status and length once its 5-byte header came
// (nothing more is read: the rest of the answer waits in the daemon), or nullopt.
struct Unread {
  int fd = -1;
  std::optional<std::pair<uint8_t, uint32_t>> header;
};
Unread send_unread(const std::string& socket, const std::string& frame) {
  Unread unread{testing::connect_unix(socket), std::nullopt};
  EXPECT_GE(unread.fd, 0);
  EXPECT_EQ(write(unread.fd, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  char header[compact::kAnswerHeaderBytes];
  pollfd ready{unread.fd, POLLIN, 0};
  if (poll(&ready, 1, 10000) == 1 && recv(unread.fd, header, sizeof header, MSG_WAITALL) == 5)
    unread.header = {{static_cast<uint8_t>(header[0]), compact::get_length(header + 1)}};
  return unread;
}

std::string read_rest(int fd, uint32_t length) {
  std::string text(length, '\0');
  EXPECT_EQ(recv(fd, text.data(), length, MSG_WAITALL), static_cast<ssize_t>(length));
  return text;
}

// 24 connections of one user on one cached 4 MB answer, none read, cost that user 4 MB once (the
// cache's bytes, shared), so every one gets its answer; two distinct 16 MB answers left unread
// would hold more than a user's 32 MiB, so the second is refused with the reason.
TEST_F(DaemonTest, UnreadAnswersAreSharedAndBoundedPerUser) {
  start();
  const std::string cached_4mb =
      compact_frame(2, large_answer_request(2, 80, false).SerializeAsString());
  std::vector<Unread> shared;
  for (int i = 0; i < 24; ++i) {
    shared.push_back(send_unread(socket_, cached_4mb));
    ASSERT_TRUE(shared.back().header) << "connection " << i << "\n" << daemon_.log();
    EXPECT_EQ(shared.back().header->first, compact::kStatusPlan) << "connection " << i;
    EXPECT_GT(shared.back().header->second, 3'000'000u);
  }
  for (const Unread& unread : shared)
    close(unread.fd);

  const std::string big = large_answer_request(8, 128, true).SerializeAsString();
  Unread first = send_unread(socket_, compact_frame(2, big));
  ASSERT_TRUE(first.header) << daemon_.log();
  ASSERT_EQ(first.header->first, compact::kStatusPlan);
  EXPECT_GT(first.header->second, 12'000'000u);
  Unread second = send_unread(socket_, compact_frame(2, big));
  ASSERT_TRUE(second.header) << daemon_.log();
  EXPECT_EQ(second.header->first, compact::kStatusRefused);
  const std::string why = read_rest(second.fd, second.header->second);
  EXPECT_NE(why.find("cannot be queued"), std::string::npos) << why;
  EXPECT_NE(why.find("already waiting to be read"), std::string::npos) << why;
  close(second.fd);
  close(first.fd);
  EXPECT_TRUE(protocol::ask_daemon(socket_, eight_task_step(), 3000)) << "serving goes on";
}

// What a client of uid `uid` (primary group `gid`, supplementary `groups`) gets for HTTP/2's
// preface: true when the server answered with its own SETTINGS (gRPC serves it), false when the
// connection was closed before a byte. The child speaks raw bytes: no gRPC after fork.
bool grpc_serves(const std::string& socket, uid_t uid, gid_t gid, std::vector<gid_t> groups) {
  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(groups.size(), groups.data()) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
      _exit(10);
    const int fd = testing::connect_unix(socket);
    static constexpr char kHello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
    if (fd < 0 || write(fd, kHello, sizeof kHello - 1) != sizeof kHello - 1) _exit(11);
    char frame[9];
    const ssize_t n = recv(fd, frame, sizeof frame, MSG_WAITALL);
    if (n == 9 && frame[3] == 4) _exit(0);  // a SETTINGS frame
    _exit(n <= 0 ? 1 : 12);                 // closed (reset: what the client sent went unread)
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) <= 1) << "child status " << status;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// gRPC (HTTP/2) is served to root, the daemon's own user and --grpc-group members, whether the
// group is their primary or a supplementary one; anyone else's connection is closed before a
// byte, while the compact protocol serves everyone.
TEST_F(DaemonTest, GrpcIsServedToRootTheDaemonsUserAndItsGroupOnly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to connect as other users";
  const struct group* users = getgrnam("users");
  if (!users) GTEST_SKIP() << "no group 'users' to name in --grpc-group";
  const gid_t admins = users->gr_gid;
  start({"--grpc-group", "users"});
  chmod(dir_.c_str(), 0755);
  EXPECT_TRUE(grpc_serves(socket_, 0, 0, {}));
  EXPECT_FALSE(grpc_serves(socket_, 65534, 65534, {}));
  EXPECT_TRUE(grpc_serves(socket_, 65534, 65534, {admins}));
  EXPECT_TRUE(grpc_serves(socket_, 65534, admins, {}));
  EXPECT_FALSE(grpc_serves(socket_, 65533, 65533, {65532}));
  EXPECT_TRUE(client().status(2s)) << "root's gRPC";

  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    _exit(protocol::ask_daemon(socket_, eight_task_step(), 3000) ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "nobody's compact request";
  EXPECT_NE(daemon_.log().find("closed a connection of uid 65534 that did not speak the compact"),
            std::string::npos)
      << daemon_.log();
}

// Three users each hold 64 connections that sent half a compact frame, reopening each as the
// daemon closes it: more than the daemon's cap (146 here: its descriptor limit is lowered to
// 420). A fourth user's single request is answered all along: at the cap, the user holding the
// most gives up its oldest connection.
TEST_F(DaemonTest, AtTheConnectionCapAUserWithOneConnectionGetsIn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to connect as other users";
  rlimit files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  const rlimit ours = files;
  files.rlim_cur = 420;  // the daemon's cap: (420 - 128) / 2 = 146 connections
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &files), 0);
  start();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &ours), 0);
  chmod(dir_.c_str(), 0755);
  const auto until = std::chrono::steady_clock::now() + 4s;
  std::vector<pid_t> holders;
  for (uid_t uid : {65531u, 65532u, 65533u}) {
    const pid_t child = fork();
    if (child == 0) {
      if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(10);
      const char half[12] = {'G', 'P', 'U', 'B', 'I', 'N', 'D', 2, 100, 0, 0, 0};
      std::vector<pollfd> held;
      while (std::chrono::steady_clock::now() < until) {
        while (held.size() < 64) {
          const int fd = testing::connect_unix(socket_);
          if (fd < 0 || send(fd, half, sizeof half, MSG_NOSIGNAL) != sizeof half) {
            if (fd >= 0) close(fd);
            break;
          }
          held.push_back({fd, POLLRDHUP, 0});
        }
        poll(held.data(), held.size(), 20);
        for (pollfd& p : held) {
          if (p.revents == 0) continue;
          close(p.fd);
          p.fd = -1;
        }
        std::erase_if(held, [](const pollfd& p) { return p.fd < 0; });
      }
      _exit(0);
    }
    holders.push_back(child);
  }
  std::this_thread::sleep_for(1s);  // the cap is full
  int answered = 0, asked = 0;
  for (; std::chrono::steady_clock::now() < until - 500ms; ++asked) {
    answered += static_cast<bool>(protocol::ask_daemon(socket_, eight_task_step(), 2000));
    std::this_thread::sleep_for(100ms);
  }
  for (pid_t child : holders)
    waitpid(child, nullptr, 0);
  EXPECT_GT(asked, 5);
  EXPECT_EQ(answered, asked) << daemon_.log();
  EXPECT_NE(daemon_.log().find("connections are open"), std::string::npos)
      << "the cap was reached\n"
      << daemon_.log();
}

// Who serves the socket, and where it lies, decide whether the plugin talks to it at all: a
// process of another user, or a socket in a folder every user may write, is not gpubindd.
class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: serves as another user";
    dir_ = testing::make_temp_dir();
    chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A server on `path` that listens as `uid` (SO_PEERCRED reports who listened) and answers one
  // request with an empty plan; returns its pid.
  pid_t serve_as(const std::string& path, uid_t uid) {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      if (setuid(uid) != 0 || listen(fd, 4) != 0) _exit(1);
      const int conn = accept(fd, nullptr, nullptr);
      char request[64];
      if (conn >= 0 && read(conn, request, sizeof request) > 0) {
        const char empty_plan[5] = {0, 0, 0, 0, 0};
        if (write(conn, empty_plan, sizeof empty_plan) != sizeof empty_plan) _exit(1);
      }
      _exit(0);
    }
    close(fd);
    std::this_thread::sleep_for(100ms);  // the child listens
    return pid;
  }

  std::string dir_;
};

constexpr uid_t kNobody = 65534;

TEST_F(TrustTest, AServerRunningAsAnotherUserIsNotTrusted) {
  const std::string path = dir_ + "/gpubind.sock";
  const pid_t server = serve_as(path, kNobody);
  auto answer = protocol::exchange(path, "", 1000, protocol::TrustedServer{});
  ASSERT_FALSE(answer);
  EXPECT_TRUE(answer.error().untrusted);
  EXPECT_FALSE(answer.error().invalid_input) << "not the request's fault: the plugin falls back";
  EXPECT_NE(answer.error().message.find("not trusted: served by uid 65534"), std::string::npos)
      << answer.error().message;
  kill(server, SIGKILL);
  waitpid(server, nullptr, 0);

  // The daemon's own account is trusted when the site names it.
  std::filesystem::remove(path);
  const pid_t own = serve_as(path, kNobody);
  protocol::TrustedServer daemon_account;
  daemon_account.daemon_uid = kNobody;
  auto served = protocol::exchange(path, "", 1000, daemon_account);
  EXPECT_TRUE(served) << served.error().message;
  waitpid(own, nullptr, 0);
}

TEST_F(TrustTest, ASocketSomeoneElseCouldHavePutThereIsNotTrusted) {
  // A socket of another user.
  const std::string path = dir_ + "/gpubind.sock";
  const int fd = testing::make_listening_socket(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(chown(path.c_str(), kNobody, kNobody), 0);
  auto theirs = protocol::exchange(path, "", 300);
  ASSERT_FALSE(theirs);
  EXPECT_TRUE(theirs.error().untrusted);
  EXPECT_NE(theirs.error().message.find("the socket belongs to uid 65534"), std::string::npos);
  close(fd);

  // A folder every user may write (as /tmp): the socket in it could be anyone's.
  const std::string open_dir = dir_ + "/open";
  std::filesystem::create_directory(open_dir);
  chmod(open_dir.c_str(), 01777);
  const int open_fd = testing::make_listening_socket(open_dir + "/gpubind.sock");
  auto open = protocol::exchange(open_dir + "/gpubind.sock", "", 300);
  ASSERT_FALSE(open);
  EXPECT_TRUE(open.error().untrusted);
  EXPECT_NE(open.error().message.find("is writable by every user"), std::string::npos);
  close(open_fd);
}

TEST(DaemonClient, AnUnreachableDaemonFailsFastWithTheSocketNamed) {
  api::BinderClient nobody("/tmp/gpubind-test-no-such.sock");
  PlanRequest request;
  const auto t0 = std::chrono::steady_clock::now();
  auto reply = nobody.plan(request, {}, 300ms);
  ASSERT_FALSE(reply);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_NE(reply.error().message.find("/tmp/gpubind-test-no-such.sock"), std::string::npos);
  auto compact_reply = protocol::exchange("/tmp/gpubind-test-no-such.sock", "", 300);
  ASSERT_FALSE(compact_reply);
  EXPECT_FALSE(compact_reply.error().invalid_input);
  EXPECT_NE(compact_reply.error().message.find("daemon unavailable"), std::string::npos);
}

TEST(DaemonClient, AStoppedDaemonTimesOutAtTheDeadline) {
  const std::string dir = testing::make_temp_dir();
  const std::string path = dir + "/stuck.sock";
  const int fd = testing::make_listening_socket(path);  // accepts into the backlog, never answers
  ASSERT_GE(fd, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto reply = protocol::exchange(path, "", 200);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(reply);
  EXPECT_NE(reply.error().message.find("did not answer in time"), std::string::npos);
  EXPECT_GE(elapsed, 190ms);
  EXPECT_LT(elapsed, 1s);
  close(fd);
  std::filesystem::remove_all(dir);
}

// A full listen queue (a burst of launches, someone flooding the socket) is a moment's wait, not
// a failed launch: the client tries again until its deadline.
TEST(DaemonClient, AFullListenQueueIsWaitedOutUntilTheDeadline) {
  const std::string dir = testing::make_temp_dir();
  const std::string path = dir + "/full.sock";
  const int fd = testing::make_listening_socket(path);
  ASSERT_GE(fd, 0);
  std::vector<int> fillers;
  while (fillers.size() < 1000) {
    const int filler = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (connect(filler, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ASSERT_EQ(errno, EAGAIN);
      close(filler);
      break;
    }
    fillers.push_back(filler);
  }
  for (int filler : fillers)
    close(filler);  // still queued: only accept() takes them out
  // After 150 ms the server drains the queue and answers the one request it finds.
  std::thread server([fd] {
    std::this_thread::sleep_for(150ms);
    while (true) {
      const int conn = accept(fd, nullptr, nullptr);
      if (conn < 0) return;
      char header[compact::kRequestHeaderBytes];
      if (recv(conn, header, sizeof header, MSG_WAITALL) == static_cast<ssize_t>(sizeof header)) {
        const char empty_plan[compact::kAnswerHeaderBytes] = {compact::kStatusPlan, 0, 0, 0, 0};
        EXPECT_EQ(send(conn, empty_plan, sizeof empty_plan, MSG_NOSIGNAL),
                  static_cast<ssize_t>(sizeof empty_plan));
        close(conn);
        return;
      }
      close(conn);
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto reply = protocol::exchange(path, "", 1000);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  server.join();
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_GE(elapsed, 140ms);
  // With nobody draining it, the wait ends at the deadline.
  for (int i = 0; i < 1000; ++i) {
    const int filler = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    const int rc = connect(filler, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    close(filler);
    if (rc != 0) break;
  }
  const auto t1 = std::chrono::steady_clock::now();
  auto late = protocol::exchange(path, "", 200);
  ASSERT_FALSE(late);
  EXPECT_GE(std::chrono::steady_clock::now() - t1, 190ms);
  close(fd);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpubind
