// The audit's verdicts (gpubind/audit.h) on a LUMI-G node: GCD 0 sits next to L3 6 (CPUs
// 48-55,112-119, NUMA 3), GCD 1 next to L3 7 (56-63,120-127, NUMA 3), GCD 2 next to L3 2
// (16-23,80-87, NUMA 1). And the /proc formats and tree the audit reads them from.
#include "gpubind/audit.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "../support/fixtures.h"
#include "gpubind/discovery/running_tasks.h"

namespace gpubind::audit {
namespace {

CpuSet cpus(const std::string& list) {
  return *CpuSet::parse_list(list);
}

TaskFacts task(const std::string& step, int rank, std::map<std::string, std::string> env,
               std::vector<std::pair<int, std::string>> threads) {
  TaskFacts facts;
  facts.job_id = "42";
  facts.step = step;
  facts.rank = rank;
  facts.pid = 1000 + rank;
  facts.env = std::move(env);
  for (const auto& [tid, list] : threads)
    facts.threads.push_back({facts.pid, tid, "python3", cpus(list)});
  return facts;
}

// Bound by gpubind on GCD 0's L3, as its record says.
std::map<std::string, std::string> bound_on_gcd0() {
  return {{"GPUBIND_BOUND", "1"}, {"GPUBIND_CPUS", "49-55"}, {"GPUBIND_GPU_PCI", "0000:c1:00.0"}};
}

// A copy: the audit of a temporary list outlives it here (its `task` is not followed).
TaskAudit only_task(const std::vector<StepAudit>& steps) {
  EXPECT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps.at(0).tasks.size(), 1u);
  return steps.at(0).tasks.at(0);
}

TEST(Audit, ATaskWhoseThreadsStayOnItsPlannedCpusIsAsPlanned) {
  // OpenMP pinning each thread to one of the task's CPUs is still the plan.
  const std::vector<TaskFacts> tasks{
      task("0", 0, bound_on_gcd0(), {{1000, "49-55"}, {1001, "50"}})};
  const auto steps = audit_tasks(testing::fixture("lumi-g"), tasks);
  const TaskAudit t = only_task(steps);
  EXPECT_EQ(t.verdict, Verdict::kAsPlanned) << t.reason;
  EXPECT_EQ(t.gpus, std::vector<int>{0});
  EXPECT_EQ(describe_step(steps[0]), "job 42 step 0: 1 task: 1 as-planned");
}

TEST(Audit, AThreadMovedOutOfItsCpusIsRepinnedNamedWithWhatItCosts) {
  // A runtime's binder moved thread 1002 onto L3 0 and its own.
  const std::vector<TaskFacts> tasks{
      task("0", 0, bound_on_gcd0(), {{1000, "49-55"}, {1002, "0-7,48-55"}})};
  const TaskAudit t = only_task(audit_tasks(testing::fixture("lumi-g"), tasks));
  EXPECT_EQ(t.verdict, Verdict::kRepinned);
  EXPECT_NE(t.reason.find("planned on CPUs 49-55; thread 1002 (python3) on CPUs 0-7,48-55"),
            std::string::npos)
      << t.reason;
  EXPECT_NE(t.reason.find("8 of its 16 CPUs are off its GPU's domain"), std::string::npos)
      << t.reason;
  EXPECT_NE(t.reason.find("spread over 2 domains"), std::string::npos) << t.reason;
}

TEST(Audit, UnboundTasksAreJudgedByThePlannersRules) {
  const Topology& lumi = testing::fixture("lumi-g");
  // Slurm's GPU 0 and CPUs of L3 0: far from it.
  const auto far = audit_tasks(lumi, {task("0", 0, {{"SLURM_STEP_GPUS", "0"}}, {{1, "0-7"}})});
  EXPECT_EQ(only_task(far).verdict, Verdict::kUnboundFar) << only_task(far).reason;
  EXPECT_NE(only_task(far).reason.find("none of its CPUs is next to its GPU"), std::string::npos);
  // 16 CPUs that one L3 holds, over two.
  const auto straddling =
      audit_tasks(lumi, {task("0", 0, {{"SLURM_STEP_GPUS", "0"}}, {{1, "48-55,56-63"}})});
  EXPECT_EQ(only_task(straddling).verdict, Verdict::kUnboundStraddling)
      << only_task(straddling).reason;
  // Next to its GPU, alone: fine.
  const auto near = audit_tasks(lumi, {task("0", 0, {{"SLURM_STEP_GPUS", "0"}}, {{1, "48-55"}})});
  EXPECT_EQ(only_task(near).verdict, Verdict::kUnboundNear) << only_task(near).reason;
  // Two steps on the same cores.
  const std::vector<TaskFacts> two{task("0", 0, {{"SLURM_STEP_GPUS", "0"}}, {{1, "48-51"}}),
                                   task("1", 0, {{"SLURM_STEP_GPUS", "1"}}, {{2, "48-51"}})};
  const auto overlapping = audit_tasks(lumi, two);
  ASSERT_EQ(overlapping.size(), 2u);
  EXPECT_EQ(overlapping[0].tasks[0].verdict, Verdict::kUnboundOverlapping);
  EXPECT_NE(overlapping[0].tasks[0].reason.find("shares cores with job 42 step 1 rank 0"),
            std::string::npos)
      << overlapping[0].tasks[0].reason;
  // No GPU known: nothing to judge by.
  EXPECT_EQ(only_task(audit_tasks(lumi, {task("0", 0, {}, {{1, "0-7"}})})).verdict,
            Verdict::kUnknown);
}

TEST(Audit, UnknownGpuLocalityIsNeverCalledNear) {
  Topology vm = testing::fixture("lumi-g");
  for (Gpu& gpu : vm.gpus)
    gpu.locality.kind = LocalityKind::kUnknown;
  const TaskAudit t =
      only_task(audit_tasks(vm, {task("0", 0, {{"SLURM_STEP_GPUS", "0"}}, {{1, "48-55"}})}));
  EXPECT_EQ(t.verdict, Verdict::kUnknown) << t.reason;
  EXPECT_NE(t.reason.find("locality unknown"), std::string::npos) << t.reason;
}

TEST(Audit, GpusAreTheRecordsOnceEachAndSlurmsIndexListsWithRanges) {
  const Topology& lumi = testing::fixture("lumi-g");
  // The same bus id twice, written as NVIDIA's tools do (8-digit domain, capitals).
  auto env = bound_on_gcd0();
  env["GPUBIND_GPU_PCI"] = "0000:c1:00.0,00000000:C1:00.0";
  EXPECT_EQ(only_task(audit_tasks(lumi, {task("0", 0, env, {{1, "49-55"}})})).gpus,
            std::vector<int>{0});
  EXPECT_EQ(
      only_task(audit_tasks(lumi, {task("0", 0, {{"SLURM_STEP_GPUS", "0-2,2"}}, {{1, "48-55"}})}))
          .gpus,
      (std::vector<int>{0, 1, 2}));
}

TEST(Audit, MemoryOnNumaNodesWithoutCpusIsNeitherLocalNorRemote) {
  // A GPU's memory as a NUMA node of its own (GH200, MI300A): node 9 here, no CPU on it.
  TaskFacts facts = task("0", 0, bound_on_gcd0(), {{1000, "49-55"}});
  facts.pages_per_numa = {{3, 5000}, {9, 90000}};
  const TaskAudit t = only_task(audit_tasks(testing::fixture("lumi-g"), {facts}));
  EXPECT_NEAR(t.remote_memory, 0.0, 1e-9);
  EXPECT_FALSE(t.memory_remote);
}

TEST(Audit, ThreadNamesAreShownPrintable) {
  TaskFacts facts = task("0", 0, bound_on_gcd0(), {{1000, "0-7"}});
  facts.threads[0].name = "evil\x1b[2J\nname";
  const TaskAudit t = only_task(audit_tasks(testing::fixture("lumi-g"), {facts}));
  EXPECT_EQ(t.verdict, Verdict::kRepinned);
  EXPECT_EQ(t.reason.find('\x1b'), std::string::npos) << t.reason;
  EXPECT_EQ(t.reason.find('\n'), std::string::npos) << t.reason;
}

TEST(Audit, MemoryMostlyOnOtherNumaNodesIsSaid) {
  TaskFacts facts = task("0", 0, bound_on_gcd0(), {{1000, "49-55"}});
  facts.pages_per_numa = {{3, 1000}, {0, 9000}};  // its CPUs are NUMA 3's
  const TaskAudit t = only_task(audit_tasks(testing::fixture("lumi-g"), {facts}));
  EXPECT_NEAR(t.remote_memory, 0.9, 1e-9);
  EXPECT_TRUE(t.memory_remote);
  facts.pages_per_numa = {{0, 100}};  // too little to say
  EXPECT_LT(only_task(audit_tasks(testing::fixture("lumi-g"), {facts})).remote_memory, 0);
}

TEST(Audit, ADeviceCgroupTellsWhichGpusATaskMayOpen) {
  const GpuDevices devices{{0, {{195, 0}}}, {1, {{195, 1}}}, {2, {{226, 128}, {226, 0}}}};
  EXPECT_EQ(gpus_allowed_by({{'c', 195, 1}}, devices), std::vector<int>{1});
  EXPECT_EQ(gpus_allowed_by({{'a', -1, -1}}, devices), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(gpus_allowed_by({{'c', 226, -1}, {'b', 195, 0}}, devices), std::vector<int>{2});
  EXPECT_TRUE(gpus_allowed_by({}, devices).empty());

  const Topology& lumi = testing::fixture("lumi-g");
  // No variable names its GPUs; its device cgroup lets it open GPU 0 alone: judged by GPU 0.
  TaskFacts unbound = task("0", 0, {}, {{1, "48-55"}});
  unbound.device_rules = std::vector<DeviceRule>{{'c', 195, 0}};
  const TaskAudit near = only_task(audit_tasks(lumi, {unbound}, devices));
  EXPECT_EQ(near.verdict, Verdict::kUnboundNear) << near.reason;
  EXPECT_EQ(near.gpus, std::vector<int>{0});
  EXPECT_EQ(near.gpus_allowed, std::vector<int>{0});
  // gpubind's record names GPU 0, the cgroup lets it open GPU 1 alone: said.
  TaskFacts bound = task("0", 0, bound_on_gcd0(), {{1, "49-55"}});
  bound.device_rules = std::vector<DeviceRule>{{'c', 195, 1}};
  const TaskAudit barred = only_task(audit_tasks(lumi, {bound}, devices));
  EXPECT_NE(barred.reason.find("its device cgroup keeps it from its GPU 0"), std::string::npos)
      << barred.reason;
  // Without device numbers (or rules), nothing is claimed.
  EXPECT_FALSE(only_task(audit_tasks(lumi, {bound})).gpus_allowed);
}

// ---- /proc ----------------------------------------------------------------------------------

using namespace gpubind::discovery;

TEST(ProcFormats, EachFileAsTheKernelWritesIt) {
  // proc(5): the name in parentheses may itself hold spaces and ')'.
  const auto stat = parse_proc_stat("4242 (my (odd) name) S 4200 4242 4200 0 -1 4194560 ...");
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->comm, "my (odd) name");
  EXPECT_EQ(stat->ppid, 4200);
  EXPECT_FALSE(parse_proc_stat("garbage"));
  EXPECT_EQ(parse_stepd_title(std::string("slurmstepd: [123.0]\0\0\0", 22)),
            (std::pair<std::string, std::string>{"123", "0"}));
  EXPECT_EQ(parse_stepd_title("slurmstepd: [7.batch]")->second, "batch");
  EXPECT_EQ(parse_stepd_title("slurmstepd: [7.0+1]")->second, "0+1");
  EXPECT_FALSE(parse_stepd_title("slurmstepd"));
  EXPECT_FALSE(parse_stepd_title("python3 slurmstepd: [1.0]"));
  const ProcStatus status = parse_proc_status(
      "Name:\tpt_main_thread\nUmask:\t0022\nUid:\t1000\t1000\t1000\t1000\n"
      "Cpus_allowed:\tff\nCpus_allowed_list:\t0-7\nMems_allowed_list:\t0\n");
  EXPECT_EQ(status.name, "pt_main_thread");
  EXPECT_EQ(status.uid, 1000);
  EXPECT_EQ(status.cpus, CpuSet::range(0, 7));
  EXPECT_EQ(parse_numa_maps("7f00 default file=/lib/x.so mapped=3 N0=2 N1=1 kernelpagesize_kB=4\n"
                            "7f10 prefer:1 anon=5 dirty=5 N1=5 kernelpagesize_kB=4\n"
                            "7f20 bind:0 heap anon=2 N0=2 kernelpagesize_kB=2048\n"),
            (std::map<int, int64_t>{{0, 2 + 2 * 512}, {1, 6}}))
      << "counted in 4 KiB pages: two 2 MiB huge pages are 1024 of them";
  const std::string environ("A=1\0GPUBIND_CPUS=0-3\0SLURM_PROCID=2\0B=x=y\0", 41);
  EXPECT_EQ(parse_environ(environ, [](std::string_view n) { return n != "A"; }),
            (std::map<std::string, std::string>{
                {"GPUBIND_CPUS", "0-3"}, {"SLURM_PROCID", "2"}, {"B", "x=y"}}));
}

class ProcTree {
 public:
  ProcTree() {
    char dir[] = "/tmp/gpubind-proc-XXXXXX";
    root_ = mkdtemp(dir);
  }
  ~ProcTree() { EXPECT_EQ(std::system(("rm -rf " + root_).c_str()), 0); }
  void write(const std::string& path, const std::string& text) {
    const std::string full = root_ + path;
    EXPECT_EQ(std::system(("mkdir -p " + full.substr(0, full.rfind('/'))).c_str()), 0);
    std::ofstream(full, std::ios::binary) << text;
  }
  // A process: stat, status (its first thread's), environ, numa_maps, its threads' status.
  void process(int pid, const std::string& comm, int ppid, int uid, const std::string& environ,
               const std::vector<std::pair<int, std::string>>& threads,
               const std::string& numa_maps = "") {
    const std::string dir = "/proc/" + std::to_string(pid);
    write(dir + "/stat",
          std::to_string(pid) + " (" + comm + ") S " + std::to_string(ppid) + " 1 1");
    const auto status = [&](const std::string& cpus) {
      return "Name:\t" + comm + "\nUid:\t" + std::to_string(uid) + "\t" + std::to_string(uid) +
             "\t0\t0\nCpus_allowed_list:\t" + cpus + "\n";
    };
    write(dir + "/status", status(threads.empty() ? "0" : threads[0].second));
    write(dir + "/environ", environ);
    write(dir + "/cmdline", comm + std::string(1, '\0'));
    write(dir + "/numa_maps", numa_maps);
    for (const auto& [tid, cpus] : threads)
      write(dir + "/task/" + std::to_string(tid) + "/status", status(cpus));
  }
  // A step daemon, titled as slurmstepd titles itself ("slurmstepd: [42.0]").
  void step_daemon(int pid, const std::string& step, int ppid = 1) {
    process(pid, "slurmstepd", ppid, 0, "", {{pid, "0-7"}});
    write("/proc/" + std::to_string(pid) + "/cmdline", "slurmstepd: [" + step + "]" + '\0');
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(RunningTasks, StepDaemonsTasksAndTheirProcessesAreRead) {
  ProcTree tree;
  constexpr char kEnv0[] = "SLURM_PROCID=0\0SLURM_LOCALID=0\0GPUBIND_BOUND=1\0HOME=/x\0";
  const std::string env0(kEnv0, sizeof kEnv0 - 1);
  tree.step_daemon(100, "42.0");
  tree.process(200, "python3", 100, 1000, env0, {{200, "0-3"}, {201, "0-3"}}, "7f N0=10 N1=5\n");
  tree.process(300, "pt_data_worker", 200, 1000, "", {{300, "4-7"}}, "7f N1=7\n");
  tree.process(400, "python3", 100, 2000, std::string("SLURM_PROCID=1\0", 15), {{400, "4-7"}});
  // The extern step's sleep is no task of the job's.
  tree.step_daemon(500, "42.extern");
  tree.process(600, "sleep", 500, 1000, "", {{600, "0-7"}});
  tree.process(700, "bash", 1, 1000, "", {{700, "0-7"}});  // no step's
  // slurmstepd's own children: a forked slurmstepd, and a process without a task's rank.
  tree.process(800, "slurmstepd", 100, 0, std::string("SLURM_PROCID=0\0", 15), {{800, "0-7"}});
  tree.process(900, "sleep", 100, 1000, std::string("HOME=/x\0", 8), {{900, "0-7"}});

  const RunningTasks all = read_running_tasks(tree.root(), {});
  ASSERT_EQ(all.tasks.size(), 2u);
  const audit::TaskFacts& mine = all.tasks[0].pid == 200 ? all.tasks[0] : all.tasks[1];
  EXPECT_EQ(mine.job_id, "42");
  EXPECT_EQ(mine.step, "0");
  EXPECT_EQ(mine.rank, 0);
  EXPECT_EQ(mine.uid, 1000);
  EXPECT_EQ(mine.threads.size(), 3u) << "its two threads and its child's";
  EXPECT_EQ(mine.pages_per_numa, (std::map<int, int64_t>{{0, 10}, {1, 12}}));
  EXPECT_EQ(mine.env.count("HOME"), 0u) << "only what the audit reads";
  EXPECT_EQ(mine.env.at("GPUBIND_BOUND"), "1");

  // A user sees their own task alone; another job, none.
  const RunningTasks own = read_running_tasks(tree.root(), {1000, std::nullopt});
  ASSERT_EQ(own.tasks.size(), 1u);
  EXPECT_EQ(own.tasks[0].pid, 200);
  EXPECT_TRUE(read_running_tasks(tree.root(), {std::nullopt, std::string("43")}).tasks.empty());
}

TEST(ProcFormats, TheDeviceCgroupAsCgroupV1WritesIt) {
  EXPECT_EQ(devices_mount_of("sysfs /sys sysfs rw 0 0\n"
                             "cgroup /sys/fs/cgroup/cpuset cgroup rw,nosuid,cpuset 0 0\n"
                             "cgroup /sys/fs/cgroup/devices cgroup rw,nosuid,nodev,devices 0 0\n"),
            "/sys/fs/cgroup/devices");
  EXPECT_FALSE(devices_mount_of("cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n"));
  EXPECT_EQ(devices_cgroup_of("12:cpuset:/slurm/uid_0/job_7/step_0\n"
                              "5:devices,blkio:/slurm/uid_0/job_7/step_0/task_1\n0::/\n"),
            "/slurm/uid_0/job_7/step_0/task_1");
  EXPECT_FALSE(devices_cgroup_of("0::/system.slice/slurmstepd.scope/job_7\n"));
  const auto rules = parse_devices_list("c 195:3 rwm\na *:* rwm\nc 226:* rw\nx 1:2 r\nc 1 r\n");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].type, 'c');
  EXPECT_EQ(rules[0].major, 195);
  EXPECT_EQ(rules[0].minor, 3);
  EXPECT_EQ(rules[1].type, 'a');
  EXPECT_EQ(rules[2].minor, -1);
}

TEST(RunningTasks, ATasksDeviceRulesAndEachGpusDeviceNodesAreRead) {
  ProcTree tree;
  constexpr char kEnv[] = "SLURM_PROCID=0\0";
  tree.step_daemon(100, "42.0");
  tree.process(200, "python3", 100, 1000, std::string(kEnv, sizeof kEnv - 1), {{200, "0-3"}});
  tree.write("/proc/mounts", "cgroup /sys/fs/cgroup/devices cgroup rw,devices 0 0\n");
  tree.write("/proc/200/cgroup", "4:devices:/slurm/uid_1000/job_42/step_0/task_0\n");
  tree.write("/sys/fs/cgroup/devices/slurm/uid_1000/job_42/step_0/task_0/devices.list",
             "c 195:1 rwm\nc 136:* rwm\n");
  const RunningTasks read = read_running_tasks(tree.root(), {});
  ASSERT_EQ(read.tasks.size(), 1u);
  ASSERT_TRUE(read.tasks[0].device_rules);
  EXPECT_EQ(read.tasks[0].device_rules->size(), 2u);

  // NVIDIA's minor from its procfs file, an AMD GPU's DRM nodes from sysfs.
  const Topology& lumi = testing::fixture("lumi-g");
  const std::string nvidia_bus = lumi.gpus[0].pci_bus_id, amd_bus = lumi.gpus[1].pci_bus_id;
  tree.write("/proc/driver/nvidia/gpus/" + nvidia_bus + "/information",
             "Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-1234\nDevice Minor: \t 1\n");
  tree.write("/sys/bus/pci/devices/" + amd_bus + "/drm/renderD129/dev", "226:129\n");
  tree.write("/sys/bus/pci/devices/" + amd_bus + "/drm/card1/dev", "226:1\n");
  const GpuDevices devices = read_gpu_devices(tree.root(), lumi);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices.at(0), (std::vector<DeviceNumber>{{195, 1}}));
  EXPECT_EQ(devices.at(1), (std::vector<DeviceNumber>{{226, 1}, {226, 129}}));
  const TaskAudit t = only_task(audit_tasks(lumi, read.tasks, devices));
  EXPECT_EQ(t.gpus_allowed, std::vector<int>{0});
}

TEST(RunningTasks, ATaskThatEndedWhileReadAndAReusedPidAreNoTaskToJudge) {
  ProcTree tree;
  constexpr char kEnv[] = "SLURM_PROCID=0\0GPUBIND_BOUND=1\0";
  const std::string env(kEnv, sizeof kEnv - 1);
  // Its environment was read, then it ended: no thread left to read.
  tree.step_daemon(100, "42.0");
  tree.process(200, "python3", 100, 1000, env, {});
  // A step daemon whose parent pid is now its own task's (a pid reused while /proc was read).
  tree.step_daemon(300, "43.0", 400);
  tree.process(400, "python3", 300, 1000, env, {{400, "0-3"}});
  const RunningTasks read = read_running_tasks(tree.root(), {});
  ASSERT_EQ(read.tasks.size(), 1u);
  EXPECT_EQ(read.tasks[0].pid, 400);
  EXPECT_EQ(read.tasks[0].threads.size(), 2u) << "its own thread and, once, the loop's";
}

}  // namespace
}  // namespace gpubind::audit
