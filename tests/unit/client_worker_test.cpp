// gpubind-run's pure parts: which local rank a launcher says a process is, which GPUs a worker
// divides, the CPUs every worker divides alike, a binding the user asked the launcher for, and
// the site's plugstack line.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "../support/env_map.h"
#include "gpubind/client/answer_check.h"
#include "gpubind/client/plugstack.h"
#include "gpubind/client/worker.h"
#include "gpubind/client/worker_gpus.h"
#include "gpubind/launcher.h"

namespace gpubind::client {
namespace {

using Env = test_support::EnvMap;

EnvLookup lookup(const Env& env) {
  return test_support::env_lookup(env);
}

LocalRank place_or_fail(const Env& env, std::optional<int> rank = std::nullopt,
                        std::optional<int> size = std::nullopt) {
  auto place = local_rank_from_env(lookup(env), rank, size);
  EXPECT_TRUE(place) << place.error().message;
  return place ? *place : LocalRank{};
}

std::string error_of(const Env& env, std::optional<int> rank = std::nullopt,
                     std::optional<int> size = std::nullopt) {
  auto place = local_rank_from_env(lookup(env), rank, size);
  EXPECT_FALSE(place) << "rank " << place->rank;
  return place ? "" : place.error().message;
}

TEST(Launcher, EachLauncherIsReadByItsOwnNames) {
  struct Case {
    Env env;
    const char* launcher;
    int rank, size, world;
  };
  const std::vector<Case> cases = {
      {{{"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "8"}, {"RANK", "11"}}, "torchrun", 3, 8, 11},
      {{{"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
        {"OMPI_COMM_WORLD_RANK", "5"}},
       "Open MPI",
       1,
       4,
       5},
      {{{"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "4"}, {"PMI_RANK", "6"}},
       "MPICH Hydra",
       2,
       4,
       6},
      {{{"PALS_LOCAL_RANKID", "11"}, {"PALS_LOCAL_SIZE", "12"}, {"PALS_RANKID", "23"}},
       "HPE PALS",
       11,
       12,
       23},
      {{{"FLUX_TASK_LOCAL_ID", "1"},
        {"FLUX_JOB_SIZE", "8"},
        {"FLUX_JOB_NNODES", "2"},
        {"FLUX_TASK_RANK", "5"}},
       "Flux",
       1,
       4,
       5},
      {{{"SLURM_LOCALID", "2"},
        {"SLURM_NODEID", "1"},
        {"SLURM_STEP_TASKS_PER_NODE", "4,3"},
        {"SLURM_PROCID", "6"}},
       "Slurm",
       2,
       3,
       6},
  };
  for (const Case& c : cases) {
    const LocalRank place = place_or_fail(c.env);
    EXPECT_EQ(place.launcher, c.launcher);
    EXPECT_EQ(place.rank, c.rank) << c.launcher;
    EXPECT_EQ(place.size, c.size) << c.launcher;
    EXPECT_EQ(place.world_rank, c.world) << c.launcher;
  }
}

TEST(Launcher, DeepSpeedsLauncherCountsWorkersInLocalSize) {
  const LocalRank place = place_or_fail({{"LOCAL_RANK", "1"}, {"LOCAL_SIZE", "4"}, {"RANK", "9"}});
  EXPECT_EQ(place.launcher, "DeepSpeed");
  EXPECT_EQ(place.size, 4);
}

TEST(Launcher, AWorkerLauncherInsideASlurmTaskWins) {
  // torchrun in an srun task: the task's SLURM_LOCALID is still set; torchrun's workers count.
  const LocalRank place = place_or_fail({{"SLURM_LOCALID", "0"},
                                         {"SLURM_NODEID", "0"},
                                         {"SLURM_STEP_TASKS_PER_NODE", "1"},
                                         {"LOCAL_RANK", "5"},
                                         {"LOCAL_WORLD_SIZE", "8"}});
  EXPECT_EQ(place.launcher, "torchrun");
  EXPECT_EQ(place.rank, 5);
  EXPECT_EQ(place.size, 8);
}

TEST(Launcher, ARankWithoutItsCountNeverFallsToTheSlurmTasksRank) {
  // A launcher exporting LOCAL_RANK alone, inside an srun task, given --local-size: the rank is
  // LOCAL_RANK's, not the task's SLURM_LOCALID (0 in every worker).
  const Env env = {{"SLURM_LOCALID", "0"},
                   {"SLURM_NODEID", "0"},
                   {"SLURM_STEP_TASKS_PER_NODE", "1"},
                   {"LOCAL_RANK", "5"}};
  const LocalRank place = place_or_fail(env, std::nullopt, 8);
  EXPECT_EQ(place.rank, 5);
  EXPECT_EQ(place.size, 8);
  EXPECT_NE(error_of(env).find("LOCAL_WORLD_SIZE is not set"), std::string::npos);
}

TEST(Launcher, OptionsOverrideTheEnvironment) {
  const LocalRank both = place_or_fail({}, 2, 3);
  EXPECT_EQ(both.rank, 2);
  EXPECT_EQ(both.size, 3);
  EXPECT_EQ(both.source, "--local-rank, --local-size");
  const LocalRank size_only =
      place_or_fail({{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}}, std::nullopt, 4);
  EXPECT_EQ(size_only.rank, 1);
  EXPECT_EQ(size_only.size, 4);
  EXPECT_EQ(size_only.source, "torchrun (LOCAL_RANK, --local-size)");
}

TEST(Launcher, FaultsAreNamed) {
  EXPECT_NE(error_of({}).find("no launcher says which local rank"), std::string::npos);
  EXPECT_NE(error_of({{"LOCAL_RANK", "0"}}).find("LOCAL_WORLD_SIZE is not set"), std::string::npos);
  EXPECT_NE(error_of({{"LOCAL_RANK", "x"}, {"LOCAL_WORLD_SIZE", "2"}}).find("LOCAL_RANK='x'"),
            std::string::npos);
  EXPECT_NE(error_of({{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}})
                .find("local rank 2 (LOCAL_RANK) is not below the local size 2 (LOCAL_WORLD_SIZE)"),
            std::string::npos);
  EXPECT_NE(error_of({{"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "0"}}).find("LOCAL_WORLD_SIZE='0'"),
            std::string::npos);
  EXPECT_NE(
      error_of({{"FLUX_TASK_LOCAL_ID", "0"}, {"FLUX_JOB_SIZE", "5"}, {"FLUX_JOB_NNODES", "2"}})
          .find("give --local-size"),
      std::string::npos);
  EXPECT_NE(error_of({}, 0, 0).find("--local-size 0"), std::string::npos);
}

TEST(Launcher, SlurmsNtasksPerNodeCountsWhereThePerNodeListIsMissing) {
  const LocalRank place = place_or_fail({{"SLURM_LOCALID", "3"}, {"SLURM_NTASKS_PER_NODE", "4"}});
  EXPECT_EQ(place.size, 4);
  EXPECT_NE(error_of({{"SLURM_LOCALID", "0"}}).find("SLURM_NODEID is not set"), std::string::npos);
}

TEST(Launcher, SlurmTaskCountsExpandPerNode) {
  EXPECT_EQ(tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(tasks_on_node("2(x3),1", 4), std::nullopt);
  EXPECT_EQ(tasks_on_node("8", 0), 8);
  EXPECT_EQ(tasks_on_node("2(x", 0), std::nullopt);
  EXPECT_EQ(tasks_on_node("a", 0), std::nullopt);
}

struct Gpus {
  StepRequest request;
  WorkerGpus found;
};

Gpus gpus_of(const Env& env) {
  Gpus out;
  out.found = worker_gpus(lookup(env), out.request);
  return out;
}

using IndexTokens = std::vector<std::pair<int, std::string>>;
using PciTokens = std::vector<std::pair<std::string, std::string>>;

TEST(WorkerGpus, NoVisibilityVariableMeansEveryGpuOutsideASlurmStepWithout) {
  EXPECT_FALSE(gpus_of({}).request.gpus_given) << "a workstation: every GPU of the node";
  // A Slurm job whose step was given no GPU (--gres=none): none.
  const Gpus none = gpus_of({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_GPUS", "0,1"}});
  EXPECT_TRUE(none.request.gpus_given);
  EXPECT_TRUE(none.request.gpus.empty());
  // A site without gres/gpu: Slurm says nothing, the node's GPUs are there to share.
  EXPECT_FALSE(gpus_of({{"SLURM_JOB_ID", "7"}}).request.gpus_given);
}

TEST(WorkerGpus, ATaskGpubindBoundIsKnownByTheBusIdsItRecorded) {
  // The outer task got step GPUs 4-7, named "4".."7" (no device cgroup); SLURM_STEP_GPUS is the
  // whole step's: position by position would be wrong.
  const Gpus g = gpus_of({{"SLURM_JOB_ID", "7"},
                          {"SLURM_STEP_GPUS", "0,1,2,3,4,5,6,7"},
                          {"CUDA_VISIBLE_DEVICES", "6,7"},
                          {"GPUBIND_BOUND", "1"},
                          {"GPUBIND_GPUS", "4,5,6,7"},
                          {"GPUBIND_GPU_PCI",
                           "0000:41:00.0,0000:42:00.0,0000:43:00.0,"
                           "0000:44:00.0"}});
  EXPECT_TRUE(g.request.gpus.empty());
  EXPECT_EQ(g.request.gpus_by_pci, (PciTokens{{"0000:43:00.0", "6"}, {"0000:44:00.0", "7"}}));
  EXPECT_NE(g.found.how.find("GPUBIND_GPU_PCI"), std::string::npos) << g.found.how;
}

TEST(WorkerGpus, OnAmdNodesTheRocmListIsReadNotHipsRenumberedOne) {
  // The second task of a step on AMD GPUs 2 and 3: HIP's CUDA_VISIBLE_DEVICES counts within
  // ROCR_VISIBLE_DEVICES ("0,1"), which names them as gpubind recorded.
  const Gpus g = gpus_of({{"SLURM_JOB_ID", "7"},
                          {"SLURM_STEP_GPUS", "0,1,2,3"},
                          {"CUDA_VISIBLE_DEVICES", "0,1"},
                          {"ROCR_VISIBLE_DEVICES", "2,3"},
                          {"GPUBIND_BOUND", "1"},
                          {"GPUBIND_GPUS", "2,3"},
                          {"GPUBIND_GPU_PCI", "0000:42:00.0,0000:43:00.0"}});
  EXPECT_EQ(g.request.gpus_by_pci, (PciTokens{{"0000:42:00.0", "2"}, {"0000:43:00.0", "3"}}));
  EXPECT_TRUE(g.found.warning.empty()) << g.found.warning;
}

TEST(WorkerGpus, ASlurmStepPairsItsGpusWithTheVisibleTokens) {
  const Gpus g = gpus_of(
      {{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_GPUS", "4,5,6,7"}, {"CUDA_VISIBLE_DEVICES", "0,1,2,3"}});
  EXPECT_EQ(g.request.gpus, (IndexTokens{{4, "0"}, {5, "1"}, {6, "2"}, {7, "3"}}));
  EXPECT_TRUE(g.found.warning.empty());
}

TEST(WorkerGpus, ABatchScriptPairsTheJobsGpusWithTheRenumberedTokens) {
  // sbatch --gpus=4 holding GPUs 4-7 under ConstrainDevices: the batch step sees "0,1,2,3".
  const Gpus g = gpus_of(
      {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_GPUS", "4,5,6,7"}, {"CUDA_VISIBLE_DEVICES", "0,1,2,3"}});
  EXPECT_EQ(g.request.gpus, (IndexTokens{{4, "0"}, {5, "1"}, {6, "2"}, {7, "3"}}));
  // Inside a job, numbers that pair with nothing are never taken as node GPU numbers.
  const Gpus unknown = gpus_of({{"SLURM_JOB_ID", "7"}, {"CUDA_VISIBLE_DEVICES", "0,1"}});
  EXPECT_TRUE(unknown.request.gpus.empty());
  EXPECT_EQ(unknown.request.unplaced_gpus.size(), 2u);
}

TEST(WorkerGpus, AListSlurmNarrowedPerTaskIsHandedOutByToken) {
  const Gpus g = gpus_of(
      {{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_GPUS", "4,5,6,7"}, {"CUDA_VISIBLE_DEVICES", "2,3"}});
  EXPECT_TRUE(g.request.gpus.empty());
  EXPECT_EQ(g.request.unplaced_gpus, (std::vector<std::string>{"2", "3"}));
  EXPECT_NE(g.found.warning.find("cannot tell which of the node's GPUs"), std::string::npos);
}

TEST(WorkerGpus, WithoutSlurmNumbersAreTheNodesAndUuidsAreTokens) {
  EXPECT_EQ(gpus_of({{"ROCR_VISIBLE_DEVICES", "4,6"}}).request.gpus,
            (IndexTokens{{4, "4"}, {6, "6"}}));
  // PBS's cgroup hook names GPUs by UUID: the planner places them by the node's UUIDs, and says
  // so itself where it cannot; nothing to warn of here.
  const Gpus uuid = gpus_of({{"PBS_JOBID", "12.pbs"}, {"CUDA_VISIBLE_DEVICES", "GPU-aa,GPU-bb"}});
  EXPECT_EQ(uuid.request.unplaced_gpus, (std::vector<std::string>{"GPU-aa", "GPU-bb"}));
  EXPECT_TRUE(uuid.found.warning.empty()) << uuid.found.warning;
  const Gpus mig = gpus_of({{"CUDA_VISIBLE_DEVICES", "MIG-a,MIG-b"}});
  EXPECT_EQ(mig.request.unplaced_gpus.size(), 2u);
  EXPECT_TRUE(mig.found.warning.empty()) << "MIG instances are always handed out by token";
  const Gpus empty = gpus_of({{"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_TRUE(empty.request.gpus_given);
  EXPECT_TRUE(empty.request.gpus.empty() && empty.request.unplaced_gpus.empty());
}

// A task on a node with an NVIDIA and an AMD GPU: each vendor's variable holds its own numbers
// ("0" both), a vendor the task has none of an empty list.
TEST(WorkerGpus, OnAMixedNodeEveryRecordedGpuOfEachVendorIsKept) {
  const Gpus both = gpus_of({{"SLURM_JOB_ID", "7"},
                             {"SLURM_STEP_GPUS", "0,1"},
                             {"CUDA_VISIBLE_DEVICES", "0"},
                             {"ROCR_VISIBLE_DEVICES", "0"},
                             {"HIP_VISIBLE_DEVICES", "0"},
                             {"GPUBIND_BOUND", "1"},
                             {"GPUBIND_GPUS", "0,0"},
                             {"GPUBIND_GPU_PCI", "0000:01:00.0,0000:0a:00.0"}});
  EXPECT_EQ(both.request.gpus_by_pci, (PciTokens{{"0000:01:00.0", "0"}, {"0000:0a:00.0", "0"}}));
  const Gpus amd = gpus_of({{"SLURM_JOB_ID", "7"},
                            {"SLURM_STEP_GPUS", "0,1"},
                            {"CUDA_VISIBLE_DEVICES", ""},
                            {"ROCR_VISIBLE_DEVICES", "0"},
                            {"GPUBIND_BOUND", "1"},
                            {"GPUBIND_GPUS", "0"},
                            {"GPUBIND_GPU_PCI", "0000:0a:00.0"}});
  EXPECT_EQ(amd.request.gpus_by_pci, (PciTokens{{"0000:0a:00.0", "0"}}));
  // Without gpubind's record, an emptied vendor's list gives way to one that names GPUs.
  const Gpus unrecorded = gpus_of({{"CUDA_VISIBLE_DEVICES", ""}, {"ROCR_VISIBLE_DEVICES", "1"}});
  EXPECT_EQ(unrecorded.request.gpus, (IndexTokens{{1, "1"}}));
}

TEST(WorkerGpus, ARecordThatNoLongerMatchesIsNotUsed) {
  // The user changed the visibility list after gpubind set it.
  const Gpus g = gpus_of({{"CUDA_VISIBLE_DEVICES", "1"},
                          {"GPUBIND_BOUND", "1"},
                          {"GPUBIND_GPUS", "4,5"},
                          {"GPUBIND_GPU_PCI", "0000:41:00.0,0000:42:00.0"}});
  EXPECT_TRUE(g.request.gpus_by_pci.empty());
  EXPECT_EQ(g.request.gpus, (IndexTokens{{1, "1"}}));
}

// Flux under resource containment writes positions among this node's GPUs in the job's R
// (flux-core's gpu-affinity plugin with constrained resources); without it, R's ids, the node's.
TEST(WorkerGpus, AContainedFluxJobsPositionsAreMappedThroughItsR) {
  const Env env{{"FLUX_JOB_ID", "f2Bx9r7"},
                {"FLUX_EXEC_CONSTRAINED_RESOURCES", "1"},
                {"CUDA_VISIBLE_DEVICES", "0,1"}};
  EXPECT_TRUE(flux_constrained(lookup(env)));
  FluxJob flux{true, std::vector<int>{4, 6}, ""};
  StepRequest request;
  WorkerGpus found = worker_gpus(lookup(env), request, flux);
  EXPECT_EQ(request.gpus, (IndexTokens{{4, "0"}, {6, "1"}}));
  EXPECT_NE(found.how.find("the node's GPUs 4,6 (the job's R"), std::string::npos) << found.how;
  EXPECT_TRUE(found.warning.empty());
  // R unreadable, or naming fewer GPUs than the positions: by token, said.
  StepRequest unread;
  found = worker_gpus(lookup(env), unread, FluxJob{true, std::nullopt, "`flux job info` failed"});
  EXPECT_TRUE(unread.gpus.empty());
  EXPECT_EQ(unread.unplaced_gpus.size(), 2u);
  EXPECT_NE(found.warning.find("positions within the Flux job's GPUs on this node"),
            std::string::npos);
  EXPECT_NE(found.warning.find("`flux job info` failed"), std::string::npos) << found.warning;
  StepRequest short_r;
  found = worker_gpus(lookup(env), short_r, FluxJob{true, std::vector<int>{4}, ""});
  EXPECT_NE(found.warning.find("the job's R gives 1 GPU(s) here"), std::string::npos);
  // Without containment the numbers are R's ids: the node's.
  const Env plain{{"FLUX_JOB_ID", "f2Bx9r7"}, {"CUDA_VISIBLE_DEVICES", "4,6"}};
  EXPECT_FALSE(flux_constrained(lookup(plain)));
  EXPECT_FALSE(
      flux_constrained(lookup({{"FLUX_JOB_ID", "f2"}, {"FLUX_EXEC_CONSTRAINED_RESOURCES", "0"}})));
  EXPECT_EQ(gpus_of(plain).request.gpus, (IndexTokens{{4, "4"}, {6, "6"}}));
}

TEST(FluxR, TheRanksGpusAreReadFromRLite) {
  const std::string r = R"({"version": 1, "execution": {"R_lite": [)"
                        R"({"rank": "0-1", "children": {"core": "0-15", "gpu": "0-1"}},)"
                        R"({"rank": "[2,5]", "children": {"core": "0-7", "gpu": "4,6"}},)"
                        R"({"rank": "3", "children": {"core": "0-63"}}],)"
                        R"("starttime": 1.7e9, "expiration": 0, "nodelist": ["n[0-3,5]"]}})";
  EXPECT_EQ(*flux_rank_gpus(r, 1), (std::vector<int>{0, 1}));
  EXPECT_EQ(*flux_rank_gpus(r, 5), (std::vector<int>{4, 6}));
  EXPECT_TRUE(flux_rank_gpus(r, 3)->empty()) << "a rank without GPUs";
  const auto absent = flux_rank_gpus(r, 4);
  ASSERT_FALSE(absent);
  EXPECT_NE(absent.error().message.find("no resources for broker rank 4"), std::string::npos);
}

TEST(FluxR, WhatIsNotAVersionOneRIsNamed) {
  const auto message = [](std::string_view text) {
    auto gpus = flux_rank_gpus(text, 0);
    EXPECT_FALSE(gpus) << text;
    return gpus ? std::string() : gpus.error().message;
  };
  EXPECT_NE(message("").find("not JSON at byte 0"), std::string::npos);
  EXPECT_NE(message(R"({"version": 1, "execution": {"R_lite": [}})").find("not JSON"),
            std::string::npos);
  EXPECT_NE(message(R"({"version": 2})").find("not version 1"), std::string::npos);
  EXPECT_NE(message(R"({"version": 1, "execution": {}})").find("no execution.R_lite"),
            std::string::npos);
  EXPECT_NE(message(R"({"version": 1} x)").find("text after"), std::string::npos);
  EXPECT_NE(message(R"({"version": 1, "execution": {"R_lite": [{"rank": "0", "children": )"
                    R"({"gpu": "x"}}]}})")
                .find("R_lite gpu 'x'"),
            std::string::npos);
  EXPECT_NE(message(std::string(100, '[')).find("nested too deeply"), std::string::npos);
}

// runc 1.2 and later reset a container task's CPUs to its cgroup's: gpubind-run restores the
// plugin's where they were widened, never where the task narrowed them itself.
TEST(AlreadyBound, RecordedCpusAreRestoredOnlyWhereTheyWereWidened) {
  const Env env{{"GPUBIND_BOUND", "1"}, {"GPUBIND_CPUS", "8-15"}};
  EXPECT_EQ(recorded_cpus_lost(lookup(env), *CpuSet::parse_list("0-63")),
            *CpuSet::parse_list("8-15"));
  EXPECT_FALSE(recorded_cpus_lost(lookup(env), *CpuSet::parse_list("8-15"))) << "as bound";
  EXPECT_FALSE(recorded_cpus_lost(lookup(env), *CpuSet::parse_list("8-9"))) << "narrowed: kept";
  EXPECT_FALSE(recorded_cpus_lost(lookup(env), *CpuSet::parse_list("16-31"))) << "elsewhere";
  EXPECT_FALSE(recorded_cpus_lost(lookup({{"GPUBIND_CPUS", "8-15"}}), *CpuSet::parse_list("0-63")));
  EXPECT_FALSE(recorded_cpus_lost(lookup({{"GPUBIND_BOUND", "1"}, {"GPUBIND_CPUS", "x"}}),
                                  *CpuSet::parse_list("0-63")));
}

TEST(LauncherCpus, AWorkerItsLauncherBoundDividesTheLaunchersCpus) {
  const CpuSet all = *CpuSet::parse_list("0-15");
  const CpuSet none;
  const LauncherCpus bound = launcher_cpus_of(*CpuSet::parse_list("4"), all, none);
  EXPECT_EQ(bound.cpus, all) << "Open MPI's --bind-to core: the launcher's CPUs are divided";
  EXPECT_EQ(launcher_cpus_of(all, all, none).cpus, all);
  const CpuSet other = *CpuSet::parse_list("16-31");
  EXPECT_EQ(launcher_cpus_of(other, all, none).cpus, other) << "not inside the parent's: its own";
  EXPECT_EQ(launcher_cpus_of(other, CpuSet{}, none).cpus, other) << "parent unreadable: its own";
}

TEST(LauncherCpus, AParentOutsideTheJobsCpusetIsCutToIt) {
  // slurmstepd or a PBS mom with the whole node; the job's cgroup holds CPUs 0-7.
  const CpuSet node = *CpuSet::parse_list("0-63"), job = *CpuSet::parse_list("0-7");
  EXPECT_EQ(launcher_cpus_of(*CpuSet::parse_list("2"), node, job).cpus, job);
  EXPECT_EQ(launcher_cpus_of(job, node, job).cpus, job) << "own == the job's: nothing widened";
}

TEST(AlreadyBound, OnlyASlurmTaskThePluginBoundAsThisRank) {
  LocalRank slurm;
  slurm.launcher = "Slurm";
  slurm.rank = 1;
  EXPECT_TRUE(already_bound_by_plugin(lookup({{"GPUBIND_BOUND", "1"}, {"GPUBIND_LOCAL_RANK", "1"}}),
                                      slurm));
  EXPECT_FALSE(already_bound_by_plugin(lookup({{"GPUBIND_LOCAL_RANK", "1"}}), slurm));
  LocalRank torchrun = slurm;
  torchrun.launcher = "torchrun";
  EXPECT_FALSE(already_bound_by_plugin(
      lookup({{"GPUBIND_BOUND", "1"}, {"GPUBIND_LOCAL_RANK", "1"}}), torchrun))
      << "workers inside a bound task divide it";
}

LocalRank launched_by(const std::string& launcher) {
  LocalRank place;
  place.launcher = launcher;
  return place;
}

// /proc/PID/cmdline of torchrun's agent as Python runs the console script, the worker's own
// command last (numactl execs it: the worker's parent is the agent).
std::vector<std::string> agent_words(std::vector<std::string> options) {
  std::vector<std::string> words = {"/usr/bin/python3", "/usr/bin/torchrun", "--nproc-per-node",
                                    "2"};
  words.insert(words.end(), options.begin(), options.end());
  for (const char* word : {"--no-python", "/opt/gpubind/bin/gpubind-run", "./train", "--lr=1"})
    words.emplace_back(word);
  return words;
}

std::optional<std::string> torchrun_binding(std::vector<std::string> options,
                                            const std::string& launcher = "torchrun") {
  auto binding = launcher_binding_of(launched_by(launcher), agent_words(std::move(options)),
                                     "/opt/gpubind/bin/gpubind-run");
  if (!binding) return std::nullopt;
  EXPECT_EQ(binding->launcher, "torchrun");
  return binding->option;
}

TEST(LauncherBinding, TorchrunsNumaBindingIsReadInEveryFormArgparseTakes) {
  EXPECT_EQ(torchrun_binding({"--numa-binding=node"}), "--numa-binding=node");
  EXPECT_EQ(torchrun_binding({"--numa_binding", "exclusive"}), "--numa-binding=exclusive");
  EXPECT_EQ(torchrun_binding({"--numa", "socket"}), "--numa-binding=socket") << "abbreviated";
  EXPECT_EQ(torchrun_binding({"--nu=core-complex"}), "--numa-binding=core-complex");
  EXPECT_EQ(torchrun_binding({"--rdzv-backend=c10d", "--numa-binding", "node", "--standalone"}),
            "--numa-binding=node");
}

TEST(LauncherBinding, NothingElseCountsAsTorchrunsBinding) {
  EXPECT_FALSE(torchrun_binding({}));
  EXPECT_FALSE(torchrun_binding({"--n=node"})) << "ambiguous among torchrun's options";
  EXPECT_FALSE(torchrun_binding({"--numa-bindings=node"}));
  EXPECT_FALSE(torchrun_binding({"--numa-binding=node"}, "Open MPI")) << "another launcher";
  EXPECT_FALSE(torchrun_binding({"--numa-binding=node"}, "")) << "--local-rank given";
  // The worker's own options (after its command) are not torchrun's.
  EXPECT_FALSE(launcher_binding_of(
      launched_by("torchrun"),
      {"python3", "/usr/bin/torchrun", "--no-python", "gpubind-run", "app", "--numa-binding=node"},
      "gpubind-run"));
  // Torchrun's last word, with no mode after it, binds nothing.
  EXPECT_FALSE(launcher_binding_of(launched_by("torchrun"),
                                   {"python3", "/usr/bin/torchrun", "--numa-binding"}, "x"));
}

TEST(LauncherBinding, AWorkerCommandNotAmongTheWordsLeavesEveryWordTorchruns) {
  // torchrun --no-python sh -c 'exec gpubind-run ...': the shell execs gpubind-run, whose argv[0]
  // is not a word of the agent's command line.
  EXPECT_TRUE(launcher_binding_of(
      launched_by("torchrun"),
      {"python3", "/usr/bin/torchrun", "--numa-binding=node", "--no-python", "sh", "-c", "exec x"},
      "gpubind-run"));
}

TEST(LauncherBinding, CommandLineWordsAreReadAsProcWritesThem) {
  char path[] = "/tmp/gpubind-cmdline-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string cmdline("/usr/bin/python3\0/usr/bin/torchrun\0--numa-binding=node\0\0x\0", 58);
  ASSERT_EQ(write(fd, cmdline.data(), cmdline.size()), static_cast<ssize_t>(cmdline.size()));
  close(fd);
  EXPECT_EQ(command_line_words(path),
            (std::vector<std::string>{"/usr/bin/python3", "/usr/bin/torchrun",
                                      "--numa-binding=node", "", "x"}));
  unlink(path);
  EXPECT_TRUE(command_line_words("/nonexistent/cmdline").empty());
}

TEST(Plugstack, TheGpubindLineAndIncludesAreRead) {
  const PlugstackLines lines = read_plugstack_text(
      "# comment\n"
      "optional /usr/lib/x86_64-linux-gnu/slurm/other.so a=b\n"
      "#required /usr/lib/slurm/spank_gpubind.so socket=/old\n"
      "include /etc/slurm/plugstack.conf.d/*.conf\n"
      "required  /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_gpubind.so  socket=/run/x.sock "
      "on_error=fail # trailing comment\n"
      "required spank_gpubind.so socket=/second\n");
  ASSERT_TRUE(lines.gpubind_args);
  EXPECT_EQ(*lines.gpubind_args, (std::vector<std::string>{"socket=/run/x.sock", "on_error=fail"}));
  EXPECT_EQ(lines.plugin, "/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_gpubind.so");
  EXPECT_EQ(lines.includes, (std::vector<std::string>{"/etc/slurm/plugstack.conf.d/*.conf"}));
  EXPECT_FALSE(read_plugstack_text("optional other_spank_gpubind.so x=y\n").gpubind_args);
}

TEST(Plugstack, AMissingNamedFileIsAnErrorAndAMissingDefaultIsNot) {
  auto named = gpubind_plugstack_line(std::string("/nonexistent/plugstack.conf"), std::nullopt);
  ASSERT_FALSE(named);
  EXPECT_NE(named.error().message.find("/nonexistent/plugstack.conf"), std::string::npos);
  auto absent = gpubind_plugstack_line(std::nullopt, std::string("/nonexistent/slurm.conf"));
  ASSERT_TRUE(absent) << absent.error().message;
  EXPECT_FALSE(absent->gpubind_args);
}

TEST(Plugstack, SlurmdReadsPlugStackConfigElseTheFileBesideSlurmConf) {
  EXPECT_EQ(plugstack_path_of("/var/spool/slurmd/conf-cache/slurm.conf", "ClusterName=x\n"),
            "/var/spool/slurmd/conf-cache/plugstack.conf");
  EXPECT_EQ(
      plugstack_path_of("/etc/slurm/slurm.conf",
                        "# PlugStackConfig=/old\nplugstackconfig=/opt/slurm/plugstack.conf\n"),
      "/opt/slurm/plugstack.conf");
  // As Slurm's parser reads a line: spaces around '=', several pairs, a quoted value.
  EXPECT_EQ(plugstack_path_of("/etc/slurm/slurm.conf", "PlugStackConfig = /a/plugstack.conf\n"),
            "/a/plugstack.conf");
  EXPECT_EQ(plugstack_path_of("/etc/slurm/slurm.conf",
                              "SlurmUser=slurm PlugStackConfig=/b/plugstack.conf # spank\n"),
            "/b/plugstack.conf");
  EXPECT_EQ(plugstack_path_of("/etc/slurm/slurm.conf", "PlugStackConfig=\"/c d/plugstack.conf\"\n"),
            "/c d/plugstack.conf");
}

// SPANK's reading of includes: relative to the plugstack's folder, globs; one matching nothing
// (a configless node, where a path-separated include was not shipped) is named.
TEST(Plugstack, WhyTheGpubindLineIsNotLoadedNamesTheUnmatchedIncludes) {
  char folder[] = "/tmp/gpubind-plugstack-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const std::string dir = folder;
  const auto write = [&](const std::string& name, const std::string& text) {
    FILE* f = std::fopen((dir + "/" + name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  write("plugstack.conf", "include plugstack.conf.d/*.conf\n");
  EXPECT_NE(why_gpubind_not_loaded(dir + "/plugstack.conf")
                .find("include " + dir + "/plugstack.conf.d/*.conf names no file here"),
            std::string::npos);
  ASSERT_EQ(mkdir((dir + "/plugstack.conf.d").c_str(), 0755), 0);
  write("plugstack.conf.d/gpubind.conf", "optional spank_gpubind.so socket=/run/x.sock\n");
  EXPECT_EQ(why_gpubind_not_loaded(dir + "/plugstack.conf"), "");
  EXPECT_NE(why_gpubind_not_loaded(dir + "/absent.conf").find("cannot read"), std::string::npos);
  EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(AnswerCheck, GpusNamedByBusIdMustBeTheRequestsOwn) {
  StepRequest request;
  request.ntasks = 1;
  request.gpus_given = true;
  request.gpus_by_pci = {{"0000:43:00.0", "6"}};
  StepPlan plan;
  TaskBinding task;
  task.cpus = "0";
  task.gpus = {{"6", "0000:43:00.0", "", 2}};
  task.tokens = "6";
  task.env = {{"CUDA_VISIBLE_DEVICES", "6", false}};
  plan.tasks = {task};
  EXPECT_TRUE(check_answer(request, plan, {}));
  plan.tasks[0].gpus[0].pci = "0000:44:00.0";  // another GPU of the node
  auto refused = check_answer(request, plan, {});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("is not one of the step's"), std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace gpubind::client
