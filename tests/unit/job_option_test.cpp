// The job record the plugin's job prolog keeps on each node: what is recorded from what Slurm
// hands the prolog, the record's text, and who may have written a record that is read.
#include "gpubind/client/job_option.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gpubind/client/options.h"
#include "gpubind/client/srun_options.h"

namespace gpubind::client {
namespace {

TEST(JobOption, RecordedFromTheComponentMarkAndTheOption) {
  EXPECT_EQ(job_option_to_record("yes", "verbose"), (JobOption{true, "verbose"}));
  // A job submitted without a mark: the option Slurm hands it is its own.
  EXPECT_EQ(job_option_to_record(std::nullopt, "(null)"), (JobOption{true, "(null)"}));
  // An earlier component's option, handed on by Slurm: recorded as not this component's.
  EXPECT_EQ(job_option_to_record("no", "verbose"), (JobOption{false, ""}));
  // srun's own option is its step's: a prolog its step starts records nothing.
  EXPECT_FALSE(job_option_to_record("step", "verbose"));
  // salloc A : B --gpu-bind-auto: A has no option, and its record says it was not given there
  // (the salloc shell replays B's to every step).
  EXPECT_EQ(job_option_to_record("no", std::nullopt), (JobOption{false, ""}));
  EXPECT_FALSE(job_option_to_record("yes", std::nullopt));
}

TEST(JobOption, TextRoundTrips) {
  for (const JobOption& option :
       {JobOption{true, ""}, JobOption{true, "verbose,order=cpu"}, JobOption{false, ""}}) {
    auto decoded = decode_job_option(encode_job_option(option));
    ASSERT_TRUE(decoded) << encode_job_option(option);
    EXPECT_EQ(*decoded, option);
  }
  EXPECT_FALSE(decode_job_option(""));
  EXPECT_FALSE(decode_job_option("verbose\n"));
  EXPECT_FALSE(decode_job_option("gpubind-job-option 1\nmaybe\n"));
  EXPECT_FALSE(decode_job_option("gpubind-job-option 1\ngiven\nverbose"));  // cut short
}

class JobRecordFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpubind-job-records-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    base_ = pattern;
    dir_ = base_ + "/jobs";
  }
  void TearDown() override { std::filesystem::remove_all(base_); }
  std::string base_, dir_;
};

TEST_F(JobRecordFolder, WrittenReadAndRemoved) {
  auto none = read_job_record(dir_, 42, geteuid());
  ASSERT_TRUE(none) << none.error().message;  // no folder yet: no record
  EXPECT_FALSE(*none);
  ASSERT_TRUE(write_job_record(dir_, 42, {true, "verbose"}));
  struct stat info {};
  ASSERT_EQ(stat(dir_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0755u);
  auto read = read_job_record(dir_, 42, geteuid());
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(**read, (JobOption{true, "verbose"}));
  ASSERT_TRUE(write_job_record(dir_, 42, {false, ""}));  // replaced whole
  EXPECT_EQ(**read_job_record(dir_, 42, geteuid()), (JobOption{false, ""}));
  ASSERT_TRUE(remove_job_record(dir_, 42));
  EXPECT_FALSE(*read_job_record(dir_, 42, geteuid()));
  EXPECT_TRUE(remove_job_record(dir_, 42));  // gone already: fine
  // Nothing but records is left behind.
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(JobRecordFolder, ARecordOthersMayWriteIsNotUsed) {
  ASSERT_TRUE(write_job_record(dir_, 7, {true, ""}));
  chmod(dir_.c_str(), 0777);
  auto read = read_job_record(dir_, 7, geteuid());
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().message.find("may be written by another user"), std::string::npos)
      << read.error().message;
  EXPECT_FALSE(write_job_record(dir_, 8, {true, ""}));
  chmod(dir_.c_str(), 0755);
  chmod(job_record_path(dir_, 7).c_str(), 0666);
  read = read_job_record(dir_, 7, geteuid());
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().message.find("not a job record gpubind's prolog wrote"), std::string::npos)
      << read.error().message;
}

TEST_F(JobRecordFolder, ARecordOfAnotherOwnerIsNotUsed) {
  ASSERT_TRUE(write_job_record(dir_, 9, {true, ""}));
  auto read = read_job_record(dir_, 9, geteuid() + 1);
  ASSERT_FALSE(read);
}

TEST_F(JobRecordFolder, ALinkIsNotFollowed) {
  ASSERT_TRUE(write_job_record(dir_, 10, {true, "verbose"}));
  ASSERT_EQ(symlink(job_record_path(dir_, 10).c_str(), job_record_path(dir_, 11).c_str()), 0);
  EXPECT_FALSE(read_job_record(dir_, 11, geteuid()));
}

TEST_F(JobRecordFolder, UnreadableTextSaysWhichFile) {
  std::filesystem::create_directory(dir_);
  chmod(dir_.c_str(), 0755);
  std::ofstream(job_record_path(dir_, 12)) << "garbage\n";
  chmod(job_record_path(dir_, 12).c_str(), 0644);
  auto read = read_job_record(dir_, 12, geteuid());
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().message.find(job_record_path(dir_, 12)), std::string::npos);
}

TEST(JobOption, SiteSaysWhereRecordsLive) {
  EXPECT_EQ(parse_site_args({})->job_records, kDefaultJobRecordDir);
  EXPECT_EQ(parse_site_args({"job_records=/var/run/x"})->job_records, "/var/run/x");
  for (const char* bad : {"job_records=", "job_records=relative", "job_records=/"}) {
    auto site = parse_site_args({bad});
    ASSERT_FALSE(site) << bad;
    EXPECT_NE(site.error().message.find("job_records"), std::string::npos);
  }
}

TEST(JobOption, SrunsOwnOptionIsReadAbbreviatedAsGetoptTakesIt) {
  for (const char* given :
       {"--gpu-bind-auto", "--gpu-bind-auto=verbose", "--gpu-bind-a=off", "--gpu-bind-=off"}) {
    const auto components = launcher_components({"-n2", given, "./a.out"}, 1);
    ASSERT_EQ(components.size(), 1u);
    EXPECT_TRUE(components[0].flags) << given;
  }
  EXPECT_EQ(*launcher_components({"--gpu-bind-a=off", "x"}, 1)[0].flags, "off");
  for (const char* other : {"--gpu-bind=closest", "--gpu-bind", "--gpu", "--gpu-bind-autox"})
    EXPECT_FALSE(launcher_components({other, "./a.out"}, 1)[0].flags) << other;
}

TEST(JobOption, SrunsOwnFlagsArePassedAndCleared) {
  const auto names = passed_vars(nullptr);
  EXPECT_NE(std::find(names.begin(), names.end(), kSrunFlagsEnv), names.end());
}

}  // namespace
}  // namespace gpubind::client
