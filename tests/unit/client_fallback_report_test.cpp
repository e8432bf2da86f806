// A launch that planned in-process because gpubindd could not answer leaves a report in the
// spool beside the socket; never in a spool others could write to, never through a symlink, and
// never at the cost of the launch. (plan_step leaving it is tests/cli/metrics_test.sh's, through
// gpubind-run: the fallback library cannot be loaded beside this test's own protobuf.)
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpubind/client/fallback_report.h"
#include "gpubind/protocol/fallback_reports.h"

namespace gpubind::client {
namespace {

namespace fs = std::filesystem;

class FallbackReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/gpubind-report-XXXXXX";
    ASSERT_NE(mkdtemp(name), nullptr);
    dir_ = name;
    socket_ = dir_ + "/gpubind.sock";  // no daemon serves it
    spool_ = dir_ + "/fallback-reports";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> reports(const std::string& folder) const {
    std::vector<std::string> lines;
    if (!fs::is_directory(folder)) return lines;
    for (const auto& entry : fs::directory_iterator(folder)) {
      std::ifstream in(entry.path());
      std::string line;
      std::getline(in, line);
      lines.push_back(entry.path().filename().string() + " " + line);
    }
    return lines;
  }

  std::string dir_, socket_, spool_;
};

TEST_F(FallbackReportTest, TheSpoolIsBesideTheSocket) {
  EXPECT_EQ(protocol::fallback_spool_of("/run/gpubind/gpubind.sock"),
            "/run/gpubind/fallback-reports");
  EXPECT_EQ(protocol::fallback_spool_of("/x.sock"), "/fallback-reports");
}

TEST_F(FallbackReportTest, OneReportNamedAfterTheStep) {
  ASSERT_EQ(mkdir(spool_.c_str(), 0755), 0);
  EXPECT_TRUE(leave_fallback_report(spool_, std::nullopt, 77, 3, "unavailable",
                                    "gpubindd at " + socket_ + ": daemon unavailable: gone"));
  const auto left = reports(spool_);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind("77.3." + std::to_string(getpid()) + ".", 0), 0u) << left[0];
  EXPECT_NE(left[0].find(" unavailable: gpubindd at " + socket_), std::string::npos) << left[0];
  EXPECT_TRUE(leave_fallback_report(spool_, std::nullopt, 77, 3, "unavailable", "again"));
  EXPECT_EQ(reports(spool_).size(), 2u);
}

TEST_F(FallbackReportTest, NoSpoolNoReport) {
  EXPECT_FALSE(leave_fallback_report(spool_, std::nullopt, 1, 2, "other", "x"));
  EXPECT_FALSE(fs::exists(spool_)) << "the launch side never creates the spool";
}

TEST_F(FallbackReportTest, NotInASpoolOthersMayWrite) {
  ASSERT_EQ(mkdir(spool_.c_str(), 0755), 0);
  for (mode_t mode : {0777, 0775, 0757}) {
    ASSERT_EQ(chmod(spool_.c_str(), mode), 0);
    EXPECT_FALSE(leave_fallback_report(spool_, std::nullopt, 1, 2, "other", "x")) << mode;
  }
  EXPECT_TRUE(reports(spool_).empty());
}

TEST_F(FallbackReportTest, NotThroughASymlinkedSpool) {
  const std::string elsewhere = dir_ + "/elsewhere";
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0755), 0);
  fs::create_symlink(elsewhere, spool_);
  EXPECT_FALSE(leave_fallback_report(spool_, std::nullopt, 1, 2, "other", "x"));
  EXPECT_TRUE(reports(elsewhere).empty());
}

TEST_F(FallbackReportTest, NotOverAnExistingFileOrLink) {
  ASSERT_EQ(mkdir(spool_.c_str(), 0755), 0);
  // O_EXCL|O_NOFOLLOW: a name taken (by a planted link, say) is never written through.
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(leave_fallback_report(spool_, std::nullopt, 5, 6, "other", "x"));
  EXPECT_EQ(reports(spool_).size(), 3u);
}

TEST_F(FallbackReportTest, OnlyInASpoolOfRootOrTheDaemonsUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the folder away";
  ASSERT_EQ(mkdir(spool_.c_str(), 0755), 0);
  ASSERT_EQ(chown(spool_.c_str(), 65534, 65534), 0);
  EXPECT_FALSE(leave_fallback_report(spool_, std::nullopt, 1, 2, "other", "x"));
  EXPECT_FALSE(leave_fallback_report(spool_, uid_t{4242}, 1, 2, "other", "x"));
  EXPECT_TRUE(leave_fallback_report(spool_, uid_t{65534}, 1, 2, "other", "x"));
}

TEST_F(FallbackReportTest, OneLineOfBoundedLength) {
  ASSERT_EQ(mkdir(spool_.c_str(), 0755), 0);
  ASSERT_TRUE(leave_fallback_report(spool_, std::nullopt, 1, 2, "timeout",
                                    "first\nsecond\n" + std::string(2000, 'x')));
  const auto entry = *fs::directory_iterator(spool_);
  EXPECT_LE(fs::file_size(entry.path()), protocol::kMaxFallbackReportBytes);
  EXPECT_EQ(fs::status(entry.path()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  std::ifstream in(entry.path());
  std::string line, rest;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("timeout: first\\nsecond\\nxxx", 0), 0u) << line;
  EXPECT_FALSE(std::getline(in, rest));
}

TEST(FallbackReason, FromTheDaemonsError) {
  Error e = make_error("gpubindd at /s: daemon unavailable: not connected");
  EXPECT_EQ(fallback_reason(e), "unavailable");
  EXPECT_EQ(fallback_reason(make_error("gpubindd at /s: daemon did not answer in time")),
            "timeout");
  EXPECT_EQ(fallback_reason(make_error("gpubindd at /s: request refused: x")), "refused");
  e.untrusted = true;
  EXPECT_EQ(fallback_reason(e), "untrusted");
  Error mismatch = make_error("x");
  mismatch.node_mismatch = true;
  EXPECT_EQ(fallback_reason(mismatch), "node_mismatch");
  EXPECT_EQ(fallback_reason(make_error("something new")), "other");
}

}  // namespace
}  // namespace gpubind::client
