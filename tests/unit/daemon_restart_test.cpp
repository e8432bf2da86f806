// A launch that meets a restarting daemon: the compact exchange against a stand-in for gpubindd on
// a real Unix socket that drops connections unanswered, never answers, refuses, or comes back
// late. Bounds are "within the deadline plus a second", never tight timings: the tests hold at any
// machine load.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <pwd.h>

#include "../support/fixtures.h"
#include "gpubind/api/convert.h"
#include "gpubind/client/fallback_report.h"
#include "gpubind/client/plan_source.h"
#include "gpubind/planner.h"
#include "gpubind/protocol/client.h"
#include "gpubind/protocol/compact.h"

namespace gpubind::protocol {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What the stand-in does with one connection.
enum class Reply {
  kDropUnread,    // close before reading the request (the client sees EPIPE or ECONNRESET)
  kDropAnswered,  // read the request, close without an answer (killed mid-request: EOF)
  kHold,          // read the request, never answer (hung)
  kPlan,          // answer a plan (an empty payload)
  kRefuse,        // refuse the request on its merits (status 1)
  kMismatch,      // the step does not fit its topology (status 3)
};

// gpubindd's stand-in on a real Unix socket: its n-th connection (from 0) gets `reply(n)`.
class FakeDaemon {
 public:
  // `plan`: the payload of a kPlan answer.
  FakeDaemon(const std::string& path, std::function<Reply(int)> reply, std::string plan = "")
      : reply_(std::move(reply)), plan_(std::move(plan)) {
    listener_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listener_, 16), 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeDaemon() {
    stop_ = true;
    thread_.join();
    close(listener_);
    for (int fd : held_)
      close(fd);
  }
  int connections() const { return connections_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd ready{listener_, POLLIN, 0};
      if (poll(&ready, 1, 20) <= 0) continue;
      const int conn = accept(listener_, nullptr, nullptr);
      if (conn < 0) continue;
      answer(conn, reply_(connections_++));
    }
  }

  void answer(int conn, Reply reply) {
    if (reply == Reply::kDropUnread || !read_request(conn)) {
      close(conn);
      return;
    }
    switch (reply) {
      case Reply::kHold:
        held_.push_back(conn);
        return;
      case Reply::kPlan:
        send_answer(conn, compact::kStatusPlan, plan_);
        break;
      case Reply::kRefuse:
        send_answer(conn, compact::kStatusRefused, "a GPU listed twice");
        break;
      case Reply::kMismatch:
        send_answer(conn, compact::kStatusNodeMismatch, "GPU 9 does not exist");
        break;
      default:
        break;
    }
    close(conn);
  }

  static bool read_request(int conn) {
    char header[compact::kRequestHeaderBytes];
    if (!read_exactly(conn, header, sizeof header)) return false;
    std::string body(compact::get_length(header + sizeof compact::kMagic + 1), '\0');
    return read_exactly(conn, body.data(), body.size());
  }

  static bool read_exactly(int conn, char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = read(conn, data, size);
      if (n <= 0) return false;
      data += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }

  static void send_answer(int conn, uint8_t status, const std::string& payload) {
    std::string frame(1, static_cast<char>(status));
    char length[4];
    compact::put_length(length, static_cast<uint32_t>(payload.size()));
    frame.append(length, 4);
    frame += payload;
    EXPECT_EQ(write(conn, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  }

  std::function<Reply(int)> reply_;
  std::string plan_;
  int listener_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::vector<int> held_;
};

// The first replies in order, then `then` for every later connection.
std::function<Reply(int)> replies(std::vector<Reply> first, Reply then) {
  return [first = std::move(first), then](int n) {
    return n < static_cast<int>(first.size()) ? first[static_cast<size_t>(n)] : then;
  };
}

class DaemonRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpubind-restart-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/gpubind.sock";
    trust_.daemon_uid = geteuid();  // the stand-in runs as this test
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Result<std::string> ask(int timeout_ms, DaemonGone when_gone) {
    const auto start = Clock::now();
    auto answer = exchange(socket_, "request", timeout_ms, trust_, when_gone);
    took_ = Clock::now() - start;
    return answer;
  }

  // Returned within the deadline, plus a second for a busy machine.
  void expect_within(int timeout_ms) {
    EXPECT_LT(took_, std::chrono::milliseconds(timeout_ms) + 1s)
        << std::chrono::duration_cast<std::chrono::milliseconds>(took_).count() << " ms";
  }

  std::string dir_;
  std::string socket_;
  TrustedServer trust_;
  Clock::duration took_{};
};

TEST_F(DaemonRestartTest, AConnectionDroppedUnansweredIsAskedAgainWithinTheDeadline) {
  FakeDaemon daemon(
      socket_,
      replies({Reply::kDropUnread, Reply::kDropAnswered, Reply::kDropAnswered}, Reply::kPlan));
  auto answer = ask(5000, DaemonGone::kRetryInTime);
  ASSERT_TRUE(answer) << answer.error().message;
  EXPECT_EQ(daemon.connections(), 4);
  expect_within(5000);
}

TEST_F(DaemonRestartTest, WithoutRetriesADroppedConnectionFailsAtOnce) {
  FakeDaemon daemon(socket_, replies({Reply::kDropAnswered}, Reply::kPlan));
  auto answer = ask(5000, DaemonGone::kFail);
  ASSERT_FALSE(answer);
  EXPECT_NE(answer.error().message.find("reading the answer: connection closed"), std::string::npos)
      << answer.error().message;
  EXPECT_EQ(daemon.connections(), 1);
}

TEST_F(DaemonRestartTest, ARefusalOrAMismatchIsNeverAskedAgain) {
  {
    FakeDaemon daemon(socket_, replies({}, Reply::kRefuse));
    auto refused = ask(5000, DaemonGone::kRetryInTime);
    ASSERT_FALSE(refused);
    EXPECT_TRUE(refused.error().invalid_input);
    EXPECT_NE(refused.error().message.find("request refused: a GPU listed twice"),
              std::string::npos)
        << refused.error().message;
    EXPECT_EQ(daemon.connections(), 1);
  }
  std::filesystem::remove(socket_);
  FakeDaemon daemon(socket_, replies({}, Reply::kMismatch));
  auto mismatch = ask(5000, DaemonGone::kRetryInTime);
  ASSERT_FALSE(mismatch);
  EXPECT_TRUE(mismatch.error().node_mismatch);
  EXPECT_EQ(daemon.connections(), 1);
}

TEST_F(DaemonRestartTest, ADaemonThatNeverAnswersCostsTheDeadlineAndNoMore) {
  FakeDaemon daemon(socket_, replies({}, Reply::kHold));
  auto answer = ask(300, DaemonGone::kRetryInTime);
  ASSERT_FALSE(answer);
  EXPECT_NE(answer.error().message.find("daemon did not answer in time"), std::string::npos)
      << answer.error().message;
  expect_within(300);
  EXPECT_EQ(daemon.connections(), 1) << "a slow daemon is not asked twice";
}

TEST_F(DaemonRestartTest, ADaemonThatDropsEveryConnectionCostsTheDeadlineAndNoMore) {
  FakeDaemon daemon(socket_, replies({}, Reply::kDropAnswered));
  auto answer = ask(300, DaemonGone::kRetryInTime);
  ASSERT_FALSE(answer);
  EXPECT_NE(answer.error().message.find("connection closed ("), std::string::npos)
      << answer.error().message;
  EXPECT_NE(answer.error().message.find(" tries in "), std::string::npos) << answer.error().message;
  expect_within(300);
  EXPECT_GE(daemon.connections(), 2);
}

// The deadline cuts the last try short (here: a daemon that drops one connection and then holds
// the next, as a loaded machine can make any retry): why the daemon was gone is what is said.
TEST_F(DaemonRestartTest, ARetryTheDeadlineCutsShortReportsWhyTheDaemonWasGone) {
  FakeDaemon daemon(socket_, replies({Reply::kDropAnswered}, Reply::kHold));
  auto answer = ask(300, DaemonGone::kRetryInTime);
  ASSERT_FALSE(answer);
  EXPECT_NE(answer.error().message.find("connection closed ("), std::string::npos)
      << answer.error().message;
  expect_within(300);
  EXPECT_EQ(daemon.connections(), 2);
}

// A socket file nobody listens on, as a daemon that bound its own socket leaves when it dies.
void leave_stale_socket(const std::string& path) {
  const int stale = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(stale, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  close(stale);
}

TEST_F(DaemonRestartTest, ARefusingSocketIsTriedUntilTheDeadlineAnAbsentOneNot) {
  // No socket file: a node without a daemon, where waiting would only delay every launch.
  auto absent = ask(300, DaemonGone::kRetryInTime);
  ASSERT_FALSE(absent);
  EXPECT_NE(absent.error().message.find("No such file or directory"), std::string::npos)
      << absent.error().message;
  EXPECT_EQ(absent.error().message.find(" tries in "), std::string::npos) << absent.error().message;

  leave_stale_socket(socket_);
  auto refused = ask(300, DaemonGone::kRetryInTime);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("Connection refused ("), std::string::npos)
      << refused.error().message;
  expect_within(300);
  // A lower bound holds at any load: it gives up only once under 2 ms are left.
  EXPECT_GE(took_, 290ms);

  auto at_once = ask(300, DaemonGone::kFail);
  ASSERT_FALSE(at_once);
  EXPECT_EQ(at_once.error().message.find(" tries in "), std::string::npos)
      << at_once.error().message;
}

TEST_F(DaemonRestartTest, ADaemonBackWithinTheDeadlineAnswers) {
  leave_stale_socket(socket_);
  std::unique_ptr<FakeDaemon> daemon;
  std::thread restart([&] {
    std::this_thread::sleep_for(200ms);
    unlink(socket_.c_str());  // as the next daemon does before it binds
    daemon = std::make_unique<FakeDaemon>(socket_, replies({}, Reply::kPlan));
  });
  auto answer = ask(10000, DaemonGone::kRetryInTime);
  restart.join();
  ASSERT_TRUE(answer) << answer.error().message;
  EXPECT_EQ(daemon->connections(), 1);
}

// The site's on_error chooses: fallback falls back at once; skip and fail wait for a restart.
TEST_F(DaemonRestartTest, OnlyASiteWithoutFallbackWaitsForARestart) {
  using client::OnError;
  EXPECT_EQ(client::when_daemon_gone(OnError::kFallback), DaemonGone::kFail);
  EXPECT_EQ(client::when_daemon_gone(OnError::kSkip), DaemonGone::kRetryInTime);
  EXPECT_EQ(client::when_daemon_gone(OnError::kFail), DaemonGone::kRetryInTime);

  client::SiteArgs site;
  site.socket = socket_;
  site.timeout_ms = 300;
  const client::InProcess no_fallback{dir_ + "/no-such-libgpubind_stepd.so", ""};
  leave_stale_socket(socket_);
  StepRequest step;
  step.ntasks = 1;
  for (OnError on_error : {OnError::kFail, OnError::kFallback}) {
    site.on_error = on_error;
    const auto start = Clock::now();
    auto plan = client::plan_step(step, site, no_fallback, [](const std::string&) {});
    took_ = Clock::now() - start;
    ASSERT_FALSE(plan);
    const bool retried = plan.error().message.find(" tries in ") != std::string::npos;
    EXPECT_EQ(retried, on_error == OnError::kFail) << plan.error().message;
    expect_within(site.timeout_ms);
  }
}

// Version skew in a rolling upgrade: a daemon older than the plugin skips the request's fixed
// tasks (a field it does not know) and plans the step as if Slurm had fixed nothing. The plugin
// tells from the answer (no facts_kept) and never applies such a plan: it plans in-process under
// the site's on_error, a "version" fallback.
TEST_F(DaemonRestartTest, AnOlderDaemonThatDropsWhatSlurmFixedIsNotBelieved) {
  const Topology& lumi = testing::fixture("lumi-g");
  PlanRequest older;  // what the older daemon plans: the request less its fixed tasks
  older.ntasks = 2;
  auto unfixed = make_plan(lumi, SitePolicy(), older);
  ASSERT_TRUE(unfixed);
  StepRequest step;
  step.ntasks = 2;
  step.gpus_given = true;
  for (int g = 0; g < 8; ++g)
    step.gpus.push_back({g, std::to_string(g)});
  step.fixed = {{{7}, ""}, {{6}, ""}};  // Slurm's map_gpu:7,6
  client::SiteArgs site;
  site.socket = socket_;
  site.timeout_ms = 2000;
  if (const passwd* me = getpwuid(geteuid())) site.daemon_user = me->pw_name;
  site.on_error = client::OnError::kFail;
  const client::InProcess no_fallback{dir_ + "/no-such-libgpubind_stepd.so", ""};
  {
    FakeDaemon daemon(socket_, replies({}, Reply::kPlan), api::serialize_plan(*unfixed, &lumi, {}));
    auto plan = client::plan_step(step, site, no_fallback, [](const std::string&) {});
    ASSERT_FALSE(plan) << "a plan that ignored Slurm's GPUs was applied";
    EXPECT_NE(plan.error().message.find("older than this plugin"), std::string::npos)
        << plan.error().message;
    EXPECT_EQ(client::fallback_reason(plan.error()), "version");
  }
  // A daemon that kept them is believed.
  PlanRequest current = older;
  current.fixed = {{{7}, std::nullopt}, {{6}, std::nullopt}};
  auto fixed = make_plan(lumi, SitePolicy(), current);
  ASSERT_TRUE(fixed && fixed->facts_kept);
  std::filesystem::remove(socket_);  // the first stand-in's
  FakeDaemon daemon(socket_, replies({}, Reply::kPlan), api::serialize_plan(*fixed, &lumi, {}));
  auto plan = client::plan_step(step, site, no_fallback, [](const std::string&) {});
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->plan.tasks[0].gpus[0].node_index, 7);
}

}  // namespace
}  // namespace gpubind::protocol
