// The step's CPUs from its cgroup (step_cpus.h), on captured /proc and cgroup trees.
#include "gpubind/client/step_cpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpubind::client {
namespace {

namespace fs = std::filesystem;

class StepCpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/gpubind-stepcpus-XXXXXX";
    ASSERT_NE(mkdtemp(name), nullptr);
    root_ = name;
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  std::string root_;
};

// cgroup v2, Slurm's step cgroup; slurmstepd's own affinity (the specialised cores) plays no part.
TEST_F(StepCpusTest, CgroupV2StepCpuset) {
  write("/proc/self/mountinfo",
        "24 1 0:22 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n");
  write("/proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_7/step_0/slurm\n");
  write("/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/slurm/cpuset.cpus.effective",
        "2-5,9\n");
  auto cpus = cgroup_cpus(root_);
  ASSERT_TRUE(cpus);
  EXPECT_EQ(cpus->to_list(), "2-5,9");
}

// No cpuset controller down to this cgroup (task/affinity alone): the nearest one up says.
TEST_F(StepCpusTest, CgroupV2WithoutTheControllerBelowTakesTheNearestAbove) {
  write("/proc/self/mountinfo",
        "24 1 0:22 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n");
  write("/proc/self/cgroup", "0::/system.slice/slurmd.service\n");
  write("/sys/fs/cgroup/cpuset.cpus.effective", "0-127\n");
  fs::create_directories(root_ + "/sys/fs/cgroup/system.slice/slurmd.service");
  auto cpus = cgroup_cpus(root_);
  ASSERT_TRUE(cpus);
  EXPECT_EQ(cpus->to_list(), "0-127");
}

// cgroup v1 (a hybrid system mounts v2 too: v1's cpuset is the one that confines), and a
// container's namespace root.
TEST_F(StepCpusTest, CgroupV1CpusetInAContainer) {
  write("/proc/self/mountinfo",
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "34 31 0:31 /docker/abc /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
        "35 31 0:32 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
  write("/proc/self/cgroup", "4:cpuset:/docker/abc/slurm/uid_0/job_3/step_1\n8:pids:/\n0::/\n");
  write("/sys/fs/cgroup/cpuset/slurm/uid_0/job_3/step_1/cpuset.effective_cpus", "1,3\n");
  auto cpus = cgroup_cpus(root_);
  ASSERT_TRUE(cpus);
  EXPECT_EQ(cpus->to_list(), "1,3");
}

TEST_F(StepCpusTest, NothingReadableIsNothing) {
  EXPECT_FALSE(cgroup_cpus(root_));
  write("/proc/self/mountinfo", "24 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  write("/proc/self/cgroup", "0::/a\n");
  EXPECT_FALSE(cgroup_cpus(root_)) << "no cpuset file anywhere";
}

// This process: whatever cgroup it runs in, its cpuset holds the CPUs it may run on.
TEST(StepCpus, ThisProcessRunsInsideItsCgroupsCpus) {
  const auto cpus = cgroup_cpus();
  if (!cpus) GTEST_SKIP() << "no cpuset cgroup readable here";
  EXPECT_FALSE(cpus->empty());
}

}  // namespace
}  // namespace gpubind::client
