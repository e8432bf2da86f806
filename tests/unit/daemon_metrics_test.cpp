// The daemon's monitoring: plans counted by source in GetStatus, the plan time histogram, reloads,
// fallback reports absorbed from the spool (and not from a spool users could write), and each
// plan's structured journal record.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "gpubind/daemon/binder_service.h"
#include "gpubind/daemon/daemon_state.h"
#include "gpubind/daemon/fallback_spool.h"
#include "gpubind/daemon/journal.h"
#include "gpubind/v1/binder.pb.h"

namespace gpubind::daemon {
namespace {

namespace fs = std::filesystem;

StatePtr lumi_state() {
  const std::string fixtures = GPUBIND_FIXTURES;
  auto state = load_state({fixtures + "/lumi-g.policy", fixtures + "/lumi-g.xml"}, nullptr);
  EXPECT_TRUE(state) << state.error().message;
  return *state;
}

v1::PlanRequest request_of(uint32_t ntasks, uint64_t job = 0) {
  v1::PlanRequest request;
  request.set_ntasks(ntasks);
  request.set_job_id(job);
  request.set_step_id(job ? 4 : 0);
  return request;
}

// Answers `request` as the compact path does: from the cache on the receiving thread if it can,
// else on a "worker". Whether it got a plan.
bool ask(BinderService& service, const v1::PlanRequest& request) {
  auto keyed = service.receive(request.SerializeAsString());
  if (!keyed) return false;
  if (service.answer_from_cache(*keyed)) return true;
  return service.answer(*keyed).ok();
}

v1::GetStatusResponse status_of(BinderService& service) {
  v1::GetStatusResponse status;
  EXPECT_TRUE(service.GetStatus(nullptr, nullptr, &status).ok());
  return status;
}

std::map<std::string, uint64_t> fallbacks_of(const v1::GetStatusResponse& status) {
  std::map<std::string, uint64_t> counts;
  for (const auto& f : status.fallbacks())
    counts[f.reason()] = f.count();
  return counts;
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/gpubind-metrics-XXXXXX";
    ASSERT_NE(mkdtemp(name), nullptr);
    dir_ = name;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST(DaemonMetrics, PlansAreCountedBySource) {
  BinderService service(lumi_state(), false);
  EXPECT_TRUE(ask(service, request_of(8)));   // worker
  EXPECT_TRUE(ask(service, request_of(8)));   // cache
  EXPECT_TRUE(ask(service, request_of(8)));   // cache
  EXPECT_FALSE(ask(service, request_of(0)));  // refused: no tasks
  v1::PlanRequest mismatch = request_of(2);
  mismatch.set_gpus_given(true);
  mismatch.add_gpus()->set_node_index(99);  // lumi-g has 8 GPUs
  mismatch.mutable_gpus(0)->set_token("99");
  EXPECT_FALSE(ask(service, mismatch));
  EXPECT_FALSE(service.receive(std::string("\xff\xff\xff", 3)).ok());  // not a request: refused
  service.count_refused(Metrics::Refusal::kBusy);                      // the router's overload
  v1::PlanRequest reserved_only = request_of(1);
  reserved_only.set_allowed_cpus("0");  // lumi-g reserves the first core of every CCD
  EXPECT_FALSE(ask(service, reserved_only));
  v1::PlanRequest forged = request_of(1);
  forged.set_gpus_given(true);
  forged.add_gpus()->set_pci("0000:c1:00.0\n<0>gpubindd: forged");
  forged.mutable_gpus(0)->set_token("0");
  EXPECT_FALSE(ask(service, forged));

  const v1::GetStatusResponse status = status_of(service);
  EXPECT_EQ(status.plans().worker(), 1u);
  EXPECT_EQ(status.plans().cache(), 2u);
  EXPECT_EQ(status.plans().refused(), 5u);
  EXPECT_EQ(status.plans().node_mismatch(), 1u);
  // By cause, every cause listed: a refusal any user can cause is never a node fault.
  std::map<std::string, uint64_t> causes;
  for (const auto& r : status.refusals())
    causes[r.cause()] = r.count();
  EXPECT_EQ(causes, (std::map<std::string, uint64_t>{{"malformed", 3},
                                                     {"version", 0},
                                                     {"too_large", 0},
                                                     {"busy", 1},
                                                     {"unplannable", 1},
                                                     {"node_mismatch", 1}}));
  EXPECT_EQ(status.requests(), 3u);  // GetStatus's older counters are unchanged
  EXPECT_GT(status.start_time_s(), 1.6e9);
}

TEST(DaemonMetrics, HistogramIsCumulativeWithEveryAnsweredCall) {
  BinderService service(lumi_state(), false);
  for (uint32_t ntasks = 1; ntasks <= 5; ++ntasks)
    ASSERT_TRUE(ask(service, request_of(ntasks)));
  ASSERT_TRUE(ask(service, request_of(5)));
  const v1::GetStatusResponse status = status_of(service);
  EXPECT_EQ(status.latency_count(), 6u);
  EXPECT_GT(status.latency_sum_s(), 0.0);
  ASSERT_EQ(status.latency_buckets_size(), static_cast<int>(Metrics::kBucketBounds.size()));
  EXPECT_DOUBLE_EQ(status.latency_buckets(0).le_s(), 10e-6);
  EXPECT_DOUBLE_EQ(status.latency_buckets(status.latency_buckets_size() - 1).le_s(), 1.0);
  for (int i = 1; i < status.latency_buckets_size(); ++i) {
    EXPECT_GT(status.latency_buckets(i).le_s(), status.latency_buckets(i - 1).le_s());
    EXPECT_GE(status.latency_buckets(i).count(), status.latency_buckets(i - 1).count());
  }
  EXPECT_LE(status.latency_buckets(status.latency_buckets_size() - 1).count(), 6u);
}

TEST(DaemonMetrics, ObserveFallsInTheFirstBucketAtOrAboveIt) {
  Metrics metrics;
  metrics.observe(std::chrono::microseconds(10));  // le 10e-6: bounds are inclusive
  metrics.observe(std::chrono::microseconds(11));
  metrics.observe(std::chrono::seconds(3));  // past every bound: +Inf only
  v1::GetStatusResponse status;
  metrics.to_proto(status);
  EXPECT_EQ(status.latency_buckets(0).count(), 1u);
  EXPECT_EQ(status.latency_buckets(1).count(), 2u);
  EXPECT_EQ(status.latency_buckets(status.latency_buckets_size() - 1).count(), 2u);
  EXPECT_EQ(status.latency_count(), 3u);
  EXPECT_NEAR(status.latency_sum_s(), 3.000021, 1e-9);
}

TEST(DaemonMetrics, ReloadsAreCountedByResult) {
  BinderService service(lumi_state(), false);
  service.replace_state(lumi_state());
  service.set_reload_error("policy.conf:3: smt: not a number");
  service.set_reload_error("policy.conf:3: smt: not a number");
  const v1::GetStatusResponse status = status_of(service);
  EXPECT_EQ(status.reloads(), 1u);
  EXPECT_EQ(status.reloads_refused(), 2u);
}

using FallbackSpoolTest = TempDir;

void write_report(const std::string& path, const std::string& line) {
  std::ofstream(path) << line << "\n";
}

TEST_F(FallbackSpoolTest, ReportsAreCountedByReasonOnceAndRemoved) {
  const std::string spool = dir_ + "/fallback-reports";
  BinderService service(lumi_state(), false);
  service.set_fallback_spool(spool);  // creates it
  struct stat st {};
  ASSERT_EQ(stat(spool.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0022, 0u);
  // Every reason listed, at 0, before any report.
  EXPECT_EQ(fallbacks_of(status_of(service)).size(), protocol::kFallbackReasons.size());

  write_report(spool + "/1.0.100.a", "unavailable: gpubindd at /x: daemon unavailable: gone");
  write_report(spool + "/1.0.100.b", "timeout: gpubindd at /x: daemon did not answer in time");
  write_report(spool + "/1.0.100.c", "unavailable: again");
  write_report(spool + "/1.0.100.d", "made-up reason: counted as other");
  fs::create_symlink("/etc/hostname", spool + "/1.0.100.e");  // not a report
  auto counts = fallbacks_of(status_of(service));
  EXPECT_EQ(counts["unavailable"], 2u);
  EXPECT_EQ(counts["timeout"], 1u);
  EXPECT_EQ(counts["other"], 1u);
  EXPECT_EQ(counts.size(), protocol::kFallbackReasons.size());
  EXPECT_FALSE(fs::exists(spool + "/1.0.100.a"));
  counts = fallbacks_of(status_of(service));  // asked again: the same counts
  EXPECT_EQ(counts["unavailable"], 2u);
  EXPECT_EQ(counts["timeout"], 1u);
}

TEST_F(FallbackSpoolTest, AFolderOthersMayWriteIsNotRead) {
  const std::string spool = dir_ + "/fallback-reports";
  ASSERT_EQ(mkdir(spool.c_str(), 0755), 0);
  ASSERT_EQ(chmod(spool.c_str(), 0777), 0);
  write_report(spool + "/1.0.1.a", "unavailable: a user's");
  FallbackSpool reports(spool);
  EXPECT_EQ(reports.absorb()[0], 0u);
  EXPECT_TRUE(fs::exists(spool + "/1.0.1.a"));
}

TEST_F(FallbackSpoolTest, ASymlinkedFolderIsNotFollowed) {
  const std::string elsewhere = dir_ + "/elsewhere";
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0755), 0);
  write_report(elsewhere + "/1.0.1.a", "unavailable: not in the spool");
  fs::create_symlink(elsewhere, dir_ + "/fallback-reports");
  FallbackSpool reports(dir_ + "/fallback-reports");
  EXPECT_EQ(reports.absorb()[0], 0u);
  EXPECT_TRUE(fs::exists(elsewhere + "/1.0.1.a"));
}

TEST_F(FallbackSpoolTest, AtMostSoManyReportsPerCall) {
  const std::string spool = dir_ + "/fallback-reports";
  ASSERT_EQ(mkdir(spool.c_str(), 0755), 0);
  const size_t files = FallbackSpool::kMaxPerCall + 5;
  for (size_t i = 0; i < files; ++i)
    write_report(spool + "/" + std::to_string(i), "timeout: x");
  FallbackSpool reports(spool);
  EXPECT_EQ(reports.absorb()[1], FallbackSpool::kMaxPerCall);
  EXPECT_EQ(reports.absorb()[1], files);
}

// ---- The journal -------------------------------------------------------------------------------

TEST(Journal, FieldsInTheNativeProtocol) {
  EXPECT_EQ(journal_fields({{"A", "1"}, {"B", "two words"}}), "A=1\nB=two words\n");
  EXPECT_EQ(journal_fields({{"M", "a\nb"}}), std::string("M\n\x03\0\0\0\0\0\0\0a\nb\n", 14));
}

TEST(Journal, WarningsAreCountedInTheSerializedAnswer) {
  v1::PlanResponse answer;
  EXPECT_EQ(count_warnings(answer.SerializeAsString()), 0u);
  for (int i = 0; i < 300; ++i) {
    v1::TaskPlan& task = *answer.add_tasks();
    task.set_rank(i);
    task.set_cpus("0-7");
    task.add_env()->set_name("WARNINGS");  // inside a task: not the answer's
  }
  answer.add_warnings("one");
  answer.add_warnings(std::string(300, 'x'));
  answer.set_policy_generation(7);
  answer.set_hostname("node");
  answer.set_cached(true);
  EXPECT_EQ(count_warnings(answer.SerializeAsString()), 2u);
  const std::string bytes = answer.SerializeAsString();
  EXPECT_LE(count_warnings(bytes.substr(0, bytes.size() / 2)), 2u);  // cut short: no overrun
}

using JournalTest = TempDir;

// The datagrams received at `fd` within a short wait, each as its fields.
std::vector<std::map<std::string, std::string>> received(int fd) {
  std::vector<std::map<std::string, std::string>> records;
  pollfd pfd{fd, POLLIN, 0};
  while (poll(&pfd, 1, 500) == 1) {
    char buffer[65536];
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    std::map<std::string, std::string> fields;
    std::string text(buffer, static_cast<size_t>(n));
    size_t at = 0;
    while (at < text.size()) {
      const size_t end = text.find('\n', at);
      const std::string line = text.substr(at, end - at);
      const size_t eq = line.find('=');
      fields[line.substr(0, eq)] = line.substr(eq + 1);
      at = end + 1;
    }
    records.push_back(fields);
  }
  return records;
}

TEST_F(JournalTest, EachPlanOfAJobSendsOneRecord) {
  const std::string path = dir_ + "/journal.sock";
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  setenv("GPUBIND_JOURNAL_SOCKET", path.c_str(), 1);
  BinderService service(lumi_state(), false);
  unsetenv("GPUBIND_JOURNAL_SOCKET");

  ASSERT_TRUE(ask(service, request_of(8, 123)));
  ASSERT_TRUE(ask(service, request_of(8, 124)));   // the same shape: from the cache
  ASSERT_TRUE(ask(service, request_of(4)));        // no job: not recorded
  EXPECT_FALSE(ask(service, request_of(0, 125)));  // refused: logged as before, not recorded
  const auto records = received(fd);
  close(fd);
  ASSERT_EQ(records.size(), 2u);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::map<std::string, std::string> expected = {
      {"MESSAGE", "plan for job 123 step 4: 8 tasks (worker, 0 warnings)"},
      {"PRIORITY", "6"},
      {"SYSLOG_IDENTIFIER", "gpubindd"},
      {"GPUBIND_JOB", "123"},
      {"GPUBIND_STEP", "4"},
      {"GPUBIND_NODE", host},
      {"GPUBIND_SOURCE", "worker"},
      {"GPUBIND_TASKS", "8"},
      {"GPUBIND_WARNINGS", "0"}};
  EXPECT_EQ(records[0], expected);
  EXPECT_EQ(records[1].at("GPUBIND_JOB"), "124");
  EXPECT_EQ(records[1].at("GPUBIND_SOURCE"), "cache");
}

TEST_F(JournalTest, NoJournalNoSocket) {
  unsetenv("GPUBIND_JOURNAL_SOCKET");
  unsetenv("JOURNAL_STREAM");
  EXPECT_FALSE(Journal::socket_from_env());
  EXPECT_FALSE(Journal(std::nullopt).enabled());
  // A journal socket that does not exist: plans are made all the same.
  Journal absent(dir_ + "/no-such.sock");
  absent.plan({1, 2, 3, "worker", 0});
}

}  // namespace
}  // namespace gpubind::daemon

namespace gpubind::daemon {
namespace {

// What a plan costs is judged by its answer's size, not its task count: a step of up to 64 tasks
// is small, and megabytes of answer are large whatever the task count (the queue attack of 1024
// tasks, eight GPUs a task and 128-byte tokens among them).
TEST(PlanCost, TheLaneFollowsTheExpectedAnswerSize) {
  using Lane = PlanWorkers::Lane;
  BinderService service(lumi_state(), false);
  auto keyed = [&](uint32_t ntasks, uint32_t gpus_per_task, size_t token_bytes) {
    v1::PlanRequest request = request_of(ntasks);
    request.set_gpus_given(true);
    request.set_gpus_per_task(gpus_per_task);
    for (uint32_t i = 0; i < 8; ++i) {
      v1::StepGpu& gpu = *request.add_gpus();
      gpu.set_node_index(i);
      gpu.set_token(std::to_string(i) + std::string(token_bytes - 1, 'x'));
    }
    auto received = service.receive(request.SerializeAsString());
    EXPECT_TRUE(received) << received.error().message;
    return std::move(received).value();
  };
  EXPECT_EQ(keyed(8, 0, 1).lane(), Lane::kSmall);
  EXPECT_EQ(keyed(64, 8, 128).lane(), Lane::kSmall);
  EXPECT_EQ(keyed(256, 0, 1).lane(), Lane::kNormal);
  EXPECT_EQ(keyed(1024, 0, 1).lane(), Lane::kNormal);
  EXPECT_EQ(keyed(1024, 8, 128).lane(), Lane::kLarge);
  EXPECT_EQ(keyed(4096, 0, 1).lane(), Lane::kLarge);
  // Within a factor of two of the answer the planner really gives.
  for (auto [ntasks, per_task, token] :
       {std::tuple{8u, 0u, 1u}, {256u, 8u, 1u}, {1024u, 8u, 128u}, {1024u, 0u, 128u}}) {
    const KeyedRequest request = keyed(ntasks, per_task, token);
    auto answer = service.answer(request);
    ASSERT_TRUE(answer) << answer.error().message;
    const double ratio =
        static_cast<double>(request.expected_answer_bytes()) / static_cast<double>(answer->size());
    EXPECT_GT(ratio, 0.5) << ntasks << " tasks";
    EXPECT_LT(ratio, 2.0) << ntasks << " tasks";
  }
}

}  // namespace
}  // namespace gpubind::daemon
