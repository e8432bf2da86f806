// The plugin's pure parts: user flags, plugstack arguments, reading the
// step's GPUs from its environment, and the visibility variables a task ends up with.
#include <gtest/gtest.h>

#include <map>

#include "../support/env_map.h"
#include "../support/fixtures.h"
#include "../support/requests.h"
#include "gpubind/client/options.h"
#include "gpubind/client/request.h"
#include "gpubind/client/srun_options.h"
#include "gpubind/client/step_env.h"

namespace gpubind::client {
namespace {

::testing::AssertionResult refused(const std::string& flags, const std::string& why) {
  auto parsed = parse_user_flags(flags);
  if (parsed) return ::testing::AssertionFailure() << "'" << flags << "' was accepted";
  if (parsed.error().message.find(why) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "'" << parsed.error().message << "' lacks '" << why << "'";
  }
  return ::testing::AssertionSuccess();
}

TEST(UserFlags, BareOptionAndSlurmsNullMeanOnWithDefaults) {
  for (const char* text : {"", "(null)"}) {
    auto flags = parse_user_flags(text);
    ASSERT_TRUE(flags) << text;
    EXPECT_FALSE(flags->off || flags->verbose || flags->dry_run || flags->omp);
    EXPECT_FALSE(flags->order);
    EXPECT_FALSE(flags->smt);
  }
}

TEST(UserFlags, EveryFlag) {
  auto flags = parse_user_flags("verbose,dry-run,order=cpu,smt=1,no-gpu-env,no-nic-env,omp");
  ASSERT_TRUE(flags) << flags.error().message;
  EXPECT_TRUE(flags->verbose && flags->dry_run && flags->no_gpu_env && flags->no_nic_env &&
              flags->omp);
  EXPECT_EQ(flags->order, "cpu");
  EXPECT_EQ(flags->smt, 1);
  EXPECT_TRUE(parse_user_flags("off")->off);
  EXPECT_TRUE(parse_user_flags("help")->help);
  EXPECT_TRUE(parse_user_flags("order=gpu,order=gpu")) << "repeating a flag is not a contradiction";
}

TEST(UserFlags, BadFlagsAreNamed) {
  EXPECT_TRUE(refused("bogus", "unknown flag 'bogus'"));
  EXPECT_TRUE(refused("verbose,,omp", "empty flag"));
  EXPECT_TRUE(refused("order=sideways", "flag 'order' takes gpu or cpu (got 'order=sideways')"));
  EXPECT_TRUE(refused("order", "flag 'order' takes gpu or cpu"));
  EXPECT_TRUE(refused("smt", "flag 'smt' needs a value"));
  EXPECT_TRUE(refused("smt=x", "flag 'smt': expected a whole number from 0 to 64, got 'x'"));
  EXPECT_TRUE(refused("smt=65", "from 0 to 64"));
  EXPECT_TRUE(refused("verbose=1", "flag 'verbose' takes no value"));
  EXPECT_TRUE(refused("off,verbose", "flag 'off' contradicts"));
  EXPECT_TRUE(refused("order=gpu,order=cpu", "contradict"));
  EXPECT_TRUE(refused("smt=1,smt=2", "contradict"));
  EXPECT_TRUE(refused(std::string(70000, 'v'), "the flags are 70000 bytes long; at most 1024"))
      << "an over-long value is refused by its length, not quoted";
  EXPECT_TRUE(refused(std::string(1024, 'v'), "unknown flag")) << "1024 bytes are read";
}

TEST(SiteArgs, DefaultsAndEveryArgument) {
  auto defaults = parse_site_args({});
  ASSERT_TRUE(defaults);
  EXPECT_FALSE(defaults->default_on);
  EXPECT_EQ(defaults->socket, "/run/gpubind/gpubind.sock");
  EXPECT_EQ(defaults->timeout_ms, 1000);
  EXPECT_EQ(defaults->on_error, OnError::kFallback);
  auto all = parse_site_args({"default=on", "socket=/tmp/x.sock", "timeout_ms=250", "on_error=fail",
                              "policy=/etc/gpubind/policy.conf", "stepd_lib=/opt/lib.so"});
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_TRUE(all->default_on);
  EXPECT_EQ(all->socket, "/tmp/x.sock");
  EXPECT_EQ(all->timeout_ms, 250);
  EXPECT_EQ(all->on_error, OnError::kFail);
  EXPECT_EQ(all->policy, "/etc/gpubind/policy.conf");
  EXPECT_EQ(all->stepd_lib, "/opt/lib.so");
}

TEST(SiteArgs, BadArgumentsAreNamed) {
  auto expect = [](std::vector<std::string> args, const std::string& why) {
    auto parsed = parse_site_args(args);
    ASSERT_FALSE(parsed) << why;
    EXPECT_NE(parsed.error().message.find(why), std::string::npos) << parsed.error().message;
  };
  expect({"default=maybe"}, "'default' takes on or off");
  expect({"socket=relative.sock"}, "'socket' needs an absolute path");
  expect({"timeout_ms=0"}, "'timeout_ms'");
  expect({"on_error=ignore"}, "'on_error' takes fallback, skip or fail");
  expect({"colour=blue"}, "unknown plugstack argument 'colour'");
  expect({"verbose"}, "'verbose' is not key=value");
}

EnvLookup env_of(test_support::EnvMap vars) {
  return test_support::env_lookup(std::move(vars));
}

TEST(StepEnv, GpusFromSlurmIndicesAndTokens) {
  auto step =
      step_gpus_from_env(env_of({{"SLURM_STEP_GPUS", "4,5"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}));
  ASSERT_EQ(step.gpus.size(), 2u);
  EXPECT_EQ(step.gpus[0], (std::pair<int, std::string>{4, "0"})) << "cgroup-renumbered tokens";
  EXPECT_EQ(step.gpus[1], (std::pair<int, std::string>{5, "1"}));
  EXPECT_TRUE(step.warning.empty());

  // A step without GPUs in a job with GPUs (srun --gres=none): the job's GPUs are not its own.
  auto no_gpus = step_gpus_from_env(env_of({{"SLURM_JOB_GPUS", "0,1"}}));
  EXPECT_TRUE(no_gpus.gpus.empty());
  EXPECT_TRUE(no_gpus.warning.empty());

  auto mismatch =
      step_gpus_from_env(env_of({{"SLURM_STEP_GPUS", "0,1"}, {"CUDA_VISIBLE_DEVICES", "0"}}));
  ASSERT_EQ(mismatch.gpus.size(), 2u);
  EXPECT_EQ(mismatch.gpus[1].second, "1") << "indices used as tokens";
  EXPECT_NE(mismatch.warning.find("does not match"), std::string::npos);

  auto tokens_only = step_gpus_from_env(env_of({{"ROCR_VISIBLE_DEVICES", "3,6"}}));
  ASSERT_EQ(tokens_only.gpus.size(), 2u);
  EXPECT_EQ(tokens_only.gpus[1].first, 6);

  // UUIDs without Slurm's indices: the planner finds them among the node's GPUs.
  auto uuids = step_gpus_from_env(env_of({{"CUDA_VISIBLE_DEVICES", "GPU-abc,GPU-def"}}));
  EXPECT_TRUE(uuids.gpus.empty());
  EXPECT_EQ(uuids.unplaced, (std::vector<std::string>{"GPU-abc", "GPU-def"}));
  EXPECT_TRUE(uuids.warning.empty());
  // A mix of numbers and UUIDs cannot be mapped without SLURM_STEP_GPUS.
  auto mixed = step_gpus_from_env(env_of({{"CUDA_VISIBLE_DEVICES", "0,GPU-abc"}}));
  EXPECT_TRUE(mixed.gpus.empty() && mixed.unplaced.empty());
  EXPECT_NE(mixed.warning.find("without SLURM_STEP_GPUS"), std::string::npos);
  // MIG instances keep Slurm's indices, which count instances GPU by GPU.
  auto mig = step_gpus_from_env(
      env_of({{"SLURM_STEP_GPUS", "3,4"}, {"CUDA_VISIBLE_DEVICES", "MIG-a,MIG-b"}}));
  EXPECT_EQ(mig.unplaced, (std::vector<std::string>{"MIG-a", "MIG-b"}));
  EXPECT_EQ(mig.unplaced_slurm_indices, (std::vector<int>{3, 4}));

  EXPECT_TRUE(step_gpus_from_env(env_of({})).gpus.empty()) << "a step without GPUs";
}

TEST(StepEnv, Counts) {
  auto env = env_of({{"SLURM_GPUS_PER_TASK", "a100:2"},
                     {"SLURM_CPUS_PER_TASK", "7"},
                     {"SLURM_NTASKS_PER_GPU", "x"}});
  EXPECT_EQ(count_from_env(env, "SLURM_GPUS_PER_TASK"), 2);
  EXPECT_EQ(count_from_env(env, "SLURM_CPUS_PER_TASK"), 7);
  EXPECT_EQ(count_from_env(env, "SLURM_NTASKS_PER_GPU"), 0);
  EXPECT_EQ(count_from_env(env, "UNSET"), 0);
}

std::map<std::string, std::string> updates_of(const EnvLookup& step, const TaskBinding& task) {
  std::map<std::string, std::string> updates;
  for (const auto& update : other_visibility_vars(step, task))
    updates[update.name] = update.value;
  return updates;
}

TaskBinding gpu_task(const std::string& vendor, int ngpus, const std::string& tokens) {
  TaskBinding task;
  task.vendor = vendor;
  task.gpus.resize(static_cast<size_t>(ngpus));
  task.tokens = tokens;
  return task;
}

TEST(StepEnv, OtherVisibilityVariablesSelectTheTasksGpusToo) {
  const TaskBinding amd = gpu_task("amd", 2, "2,3");
  // The task's environment once the plan set ROCR_VISIBLE_DEVICES; the rest is Slurm's.
  auto step = env_of({{"CUDA_VISIBLE_DEVICES", "0,1,2,3"},
                      {"GPU_DEVICE_ORDINAL", "0,1,2,3"},
                      {"ZE_AFFINITY_MASK", "0,1,2,3"},
                      {"ROCR_VISIBLE_DEVICES", "2,3"}});
  auto got = updates_of(step, amd);
  EXPECT_EQ(got["CUDA_VISIBLE_DEVICES"], "0,1") << "HIP applies it after ROCR";
  EXPECT_EQ(got["GPU_DEVICE_ORDINAL"], "0,1");
  EXPECT_EQ(got["ZE_AFFINITY_MASK"], "2,3") << "read on its own";
  EXPECT_EQ(got.count("ROCR_VISIBLE_DEVICES"), 0u) << "the plan sets the primary itself";
  EXPECT_EQ(got.count("HIP_VISIBLE_DEVICES"), 0u) << "only variables the step has";

  const TaskBinding nvidia = gpu_task("nvidia", 1, "3");
  got = updates_of(step, nvidia);
  EXPECT_EQ(got["GPU_DEVICE_ORDINAL"], "3");
  EXPECT_EQ(got["ROCR_VISIBLE_DEVICES"], "3");
  EXPECT_EQ(got.count("CUDA_VISIBLE_DEVICES"), 0u);

  TaskBinding none;
  EXPECT_TRUE(other_visibility_vars(step, none).empty());
}

// A site policy without ROCR_VISIBLE_DEVICES (or setting it only if unset) leaves Slurm's list for
// the whole step in place: HIP's variables must then pick the task's GPUs by their place in it.
TEST(StepEnv, WithoutThePrimaryVariableTheOthersCountInSlurmsList) {
  const TaskBinding amd = gpu_task("amd", 1, "6");
  auto step = env_of({{"ROCR_VISIBLE_DEVICES", "4,5,6,7"},
                      {"GPU_DEVICE_ORDINAL", "4,5,6,7"},
                      {"HIP_VISIBLE_DEVICES", "0,1,2,3"}});
  auto got = updates_of(step, amd);
  EXPECT_EQ(got["GPU_DEVICE_ORDINAL"], "2") << "GPU 6 is the third in ROCR_VISIBLE_DEVICES";
  EXPECT_EQ(got.count("HIP_VISIBLE_DEVICES"), 0u) << "never Slurm's: the user's own";
  EXPECT_EQ(got.count("ROCR_VISIBLE_DEVICES"), 0u) << "left as Slurm set it";

  auto no_rocr = env_of({{"GPU_DEVICE_ORDINAL", "4,5,6,7"}});
  got = updates_of(no_rocr, amd);
  EXPECT_EQ(got["GPU_DEVICE_ORDINAL"], "6") << "nothing applied before it: the node's numbering";
}

// MIG instances: Slurm's indices count MIG instances, not GPUs, and its tokens are MIG UUIDs.
// Two instances of one GPU stay two tokens; none is read as a GPU number.
TEST(StepEnv, MigTokensAreKeptAsTheyAre) {
  const auto env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "SLURM_STEP_GPUS") return "0,1";
    if (name == "CUDA_VISIBLE_DEVICES")
      return "MIG-4f1c7d2e-0b9a-5e6f-8a1b-2c3d4e5f6a7b,MIG-9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4";
    return std::nullopt;
  };
  const StepGpus gpus = step_gpus_from_env(env);
  EXPECT_TRUE(gpus.gpus.empty());
  ASSERT_EQ(gpus.unplaced.size(), 2u);
  EXPECT_EQ(gpus.unplaced[1], "MIG-9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4");
  EXPECT_TRUE(gpus.warning.empty());
}

// The task's Level Zero hierarchy decides how PVC tiles are named; FLAT is Level Zero's default.
TEST(StepEnv, ZeHierarchyFromTheTasksEnvironment) {
  auto with = [](std::optional<std::string> value) {
    return ze_hierarchy_from_env([value](const std::string& name) -> std::optional<std::string> {
      if (name == "ZE_FLAT_DEVICE_HIERARCHY") return value;
      return std::nullopt;
    });
  };
  EXPECT_EQ(with("COMPOSITE"), "composite");
  // Level Zero compares exactly (strcmp with "COMPOSITE"): lower case stays FLAT, with a warning.
  EXPECT_EQ(with("composite"), "");
  const auto warning = [](std::optional<std::string> value) {
    return ze_hierarchy_warning([value](const std::string&) { return value; });
  };
  EXPECT_NE(warning("composite").find("stays in FLAT"), std::string::npos);
  EXPECT_EQ(warning("COMPOSITE"), "");
  EXPECT_EQ(warning("FLAT"), "");
  EXPECT_EQ(warning(std::nullopt), "");
  EXPECT_EQ(with("FLAT"), "");
  EXPECT_EQ(with("COMBINED"), "");
  EXPECT_EQ(with(std::nullopt), "");
}

// A task with several GPUs names all their NICs.
TEST(StepEnv, VerboseLineListsEveryNic) {
  TaskBinding t;
  t.cpus = "0-27";
  t.gpus = {{"0", "0000:18:00.0", ""}, {"1", "0000:2a:00.0", ""}};
  t.nic_names = "mlx5_0,mlx5_1";
  EXPECT_NE(describe_binding("h", 0, t, "daemon").find("NIC mlx5_0,mlx5_1 [daemon]"),
            std::string::npos);
}

TEST(StepEnv, VerboseLine) {
  TaskBinding t;
  t.rank = 1;
  t.cpus = "57-63";
  t.l3_index = 7;
  t.numa_node = 3;
  t.gpus = {{"1", "0000:c6:00.0", ""}};
  t.nic_names = "hsn0";
  EXPECT_EQ(describe_binding("nid001", 9, t, "daemon"),
            "gpubind: nid001 rank 9 (local 1): cpus 57-63 (L3 7, NUMA 3), GPU 1 (0000:c6:00.0), "
            "NIC hsn0 [daemon]");
  TaskBinding bare;
  bare.cpus = "0";
  EXPECT_EQ(describe_binding("h", 0, bare, "fallback"),
            "gpubind: h rank 0 (local 0): cpus 0, GPU -, NIC - [fallback]");
}

// A step started inside a bound task clears what the outer binding set, unless the user has
// changed it since; GPU visibility is Slurm's to set per step and is never recorded.
TEST(StepEnv, NestedStepsClearWhatTheOuterBindingSet) {
  const std::string record = record_of_set_vars({{"OMP_NUM_THREADS", "7"},
                                                 {"UCX_NET_DEVICES", "mlx5_0:1"},
                                                 {"ROCR_VISIBLE_DEVICES", "0"},
                                                 {"HIP_VISIBLE_DEVICES", "0"},
                                                 {"GPUBIND_CPUS", "1-7"}});
  EXPECT_EQ(record.find("ROCR_VISIBLE_DEVICES"), std::string::npos);
  EXPECT_NE(record.find("HIP_VISIBLE_DEVICES"), std::string::npos) << "Slurm never sets it";
  EXPECT_EQ(record.find("GPUBIND_CPUS"), std::string::npos);
  const EnvLookup inherited = env_of({{"GPUBIND_BOUND", "1"},
                                      {"GPUBIND_CPUS", "1-7"},
                                      {"GPUBIND_SET", record},
                                      {"OMP_NUM_THREADS", "7"},
                                      {"UCX_NET_DEVICES", "mlx5_3:1"},  // the user's own since
                                      {"ROCR_VISIBLE_DEVICES", "0"}});
  EXPECT_EQ(stale_binding_vars(inherited),
            (std::vector<std::string>{"GPUBIND_BOUND", "GPUBIND_CPUS", "GPUBIND_SET",
                                      "OMP_NUM_THREADS"}));
  EXPECT_TRUE(stale_binding_vars(env_of({{"OMP_NUM_THREADS", "7"}})).empty())
      << "nothing recorded, nothing cleared";
  EXPECT_EQ(stale_binding_vars(env_of({{"GPUBIND_SET", ",:x,NOCOLON,=:1"}})),
            (std::vector<std::string>{"GPUBIND_SET"}))
      << "a damaged record clears nothing else";
}

TEST(ExplicitBinding, SrunsOwnCpuAndGpuBindOptions) {
  auto got = explicit_binding({"-n2", "--cpu-bind=cores", "--gpus=2"});
  EXPECT_EQ(got.cpu, "cores");
  EXPECT_EQ(got.gpu, "");
  got = explicit_binding({"--cpu_bind", "verbose,map_cpu:1,0", "--gpu-bind=verbose,map_gpu:1,0"});
  EXPECT_EQ(got.cpu, "map_cpu:1,0") << "old spelling, separate value, verbosity dropped";
  EXPECT_EQ(got.gpu, "map_gpu:1,0");
  EXPECT_FALSE(explicit_binding({"--cpu-bind=verbose"}).any()) << "verbosity alone binds nothing";
  EXPECT_FALSE(explicit_binding({"--cpu-bind=q"}).any());
  EXPECT_EQ(explicit_binding({"--cpu-bind=none", "--cpu-bind=rank"}).cpu, "rank") << "last wins";
  EXPECT_FALSE(explicit_binding({"-n1", "--gpu-bind-auto=verbose"}).any()) << "not gpubind's own";
}

TEST(ExplicitBinding, AMemoryBindingOtherThanNoneIsTheUsers) {
  EXPECT_EQ(explicit_binding({"--mem-bind=map_mem:0,0"}).mem, "map_mem:0,0");
  EXPECT_EQ(explicit_binding({"--mem_bind", "verbose,local"}).mem, "local");
  EXPECT_FALSE(explicit_binding({"--mem-bind=none"}).any()) << "Slurm leaves memory alone";
  EXPECT_FALSE(explicit_binding({"--mem-bind=verbose,none"}).any());
  EXPECT_FALSE(explicit_binding({"--mem-bind=v"}).any());
  EXPECT_TRUE(mem_bind_type_is_explicit("map_mem:"));
  EXPECT_TRUE(mem_bind_type_is_explicit("mask_mem:"));
  EXPECT_TRUE(mem_bind_type_is_explicit("local"));
  EXPECT_TRUE(mem_bind_type_is_explicit("rank"));
  EXPECT_FALSE(mem_bind_type_is_explicit("none"));
  EXPECT_FALSE(mem_bind_type_is_explicit(""));
}

TEST(ExplicitBinding, RoundTripsThroughTheStepVariable) {
  ExplicitBinding given{"map_cpu:1,0", "none", "map_mem:0,1"};
  EXPECT_EQ(encode_explicit(given), "cpu-bind=map_cpu:1,0;gpu-bind=none;mem-bind=map_mem:0,1");
  const ExplicitBinding back = decode_explicit(encode_explicit(given));
  EXPECT_EQ(back.cpu, given.cpu);
  EXPECT_EQ(back.gpu, given.gpu);
  EXPECT_EQ(back.mem, given.mem);
  EXPECT_EQ(decode_explicit("gpu-bind=closest").cpu, "");
  EXPECT_FALSE(decode_explicit("").any());
}

TEST(ExplicitBinding, OnlyCpuBindTypesAUserGivesCount) {
  for (const char* type : {"none", "rank", "map_cpu:", "map_ldom:", "mask_ldom:"})
    EXPECT_TRUE(cpu_bind_type_is_explicit(type)) << type;
  // Slurm's default and --cpu-bind=cores|threads|sockets reach the task as masks.
  EXPECT_FALSE(cpu_bind_type_is_explicit("mask_cpu:"));
  EXPECT_FALSE(cpu_bind_type_is_explicit(""));
}

TEST(SiteArgs, OverrideExplicit) {
  EXPECT_FALSE(parse_site_args({})->override_explicit);
  EXPECT_TRUE(parse_site_args({"override_explicit=yes"})->override_explicit);
  auto bad = parse_site_args({"override_explicit=maybe"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("override_explicit"), std::string::npos);
}

TEST(StepEnv, CpusBoundAtLaunchAreTheTasksRecord) {
  TaskBinding task = gpu_task("nvidia", 1, "0");
  task.cpus = "0-7";
  task.env = {{"CUDA_VISIBLE_DEVICES", "0", false}};
  const TaskBinding kept = with_launch_cpus(task, "3");
  EXPECT_EQ(kept.cpus, "3");
  ASSERT_EQ(kept.env.size(), 2u);
  EXPECT_EQ(kept.env[1].name, "GPUBIND_CPUS");
  EXPECT_EQ(kept.env[1].value, "3");
}

// A user's HIP_VISIBLE_DEVICES goes to the planner; one an outer task's binding set (a step
// inside a bound task, unchanged since) is gpubind's and does not.
TEST(StepRequest, TheUsersInheritedHipListIsAFactGpubindsOwnIsNot) {
  const std::string record = record_of_set_vars({{"HIP_VISIBLE_DEVICES", "0"}});
  StepShape shape;
  shape.ntasks = 2;
  shape.cpus = CpuSet::range(0, 1);
  SiteArgs site;
  auto users = slurm_step_request(
      shape, env_of({{"SLURM_STEP_GPUS", "0,1"}, {"HIP_VISIBLE_DEVICES", "1"}}), {}, site);
  EXPECT_TRUE(users.request.hip_inherited);
  EXPECT_EQ(users.request.inherited_hip, "1");
  auto outer = slurm_step_request(
      shape,
      env_of({{"SLURM_STEP_GPUS", "0,1"}, {"HIP_VISIBLE_DEVICES", "0"}, {"GPUBIND_SET", record}}),
      {}, site);
  EXPECT_FALSE(outer.request.hip_inherited);
}

TEST(SiteArgs, GpusWithoutGres) {
  EXPECT_FALSE(parse_site_args({})->gpus_without_gres_node) << "none by default";
  EXPECT_TRUE(parse_site_args({"gpus_without_gres=node"})->gpus_without_gres_node);
  EXPECT_FALSE(parse_site_args({"gpus_without_gres=none"})->gpus_without_gres_node);
  EXPECT_FALSE(parse_site_args({"gpus_without_gres=all"}));
}

TEST(StepEnv, OnlyAStepSlurmSaysNothingAboutHasUnknownGpus) {
  EXPECT_TRUE(slurm_says_nothing_about_gpus(env_of({{"SLURM_JOB_ID", "7"}})));
  EXPECT_FALSE(slurm_says_nothing_about_gpus(env_of({{"SLURM_JOB_GPUS", "0,1"}})))
      << "--gres=none in a job with GPUs: Slurm says the step has none";
  EXPECT_FALSE(slurm_says_nothing_about_gpus(env_of({{"CUDA_VISIBLE_DEVICES", "0"}})));
  EXPECT_FALSE(slurm_says_nothing_about_gpus(env_of({{"SLURM_GPUS_ON_NODE", "0"}})));
}

TEST(UserFlags, HelpSaysHowFlagsAreGivenAndWhatWins) {
  const std::string help = user_flags_help();
  for (const char* needed :
       {"--gpu-bind-auto=verbose,order=cpu", "every step of the\njob", "srun's own flags win",
        "SLURM_GPU_BIND_AUTO", "--cpu-bind", "--gpu-bind=none", "--gpus-per-task", "=off"})
    EXPECT_NE(help.find(needed), std::string::npos) << needed;
}

TEST(LauncherComponents, EachComponentHasItsOwnFlagsAndBinding) {
  // srun -n1 --gpu-bind-auto=verbose echo a : -n2 --cpu-bind=cores --gpu-bind-auto echo b : -n1
  // true
  const std::vector<std::string> args = {"-n1",
                                         "--gpu-bind-auto=verbose",
                                         "echo",
                                         "a",
                                         ":",
                                         "-n2",
                                         "--cpu-bind=cores",
                                         "--gpu-bind-auto",
                                         "echo",
                                         "b",
                                         ":",
                                         "-n1",
                                         "true"};
  const auto components = launcher_components(args, 2);
  ASSERT_EQ(components.size(), 3u);
  EXPECT_EQ(components[0].flags, "verbose");
  EXPECT_FALSE(components[0].binding.any());
  EXPECT_EQ(components[1].flags, "") << "the bare option";
  EXPECT_EQ(components[1].binding.cpu, "cores");
  EXPECT_FALSE(components[2].flags);
  // The first component's command ends its options exactly.
  const auto one = launcher_components({"-n1", "./app", "--cpu-bind=none"}, 2);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_FALSE(one[0].binding.any()) << "the command's own arguments are not srun's";
}

TEST(StepEnv, HetComponentFromSlurmsGroupVariables) {
  auto env = env_of({{"SLURM_JOB_ID_PACK_GROUP_0", "7"}, {"SLURM_JOB_ID_PACK_GROUP_1", "8"}});
  EXPECT_EQ(het_component(env, 8, 2), 1);
  EXPECT_EQ(het_component(env, 7, 2), 0);
  EXPECT_FALSE(het_component(env, 9, 2));
  EXPECT_EQ(het_component(env_of({{"SLURM_JOB_ID_HET_GROUP_1", "12"}}), 12, 2), 1) << "new names";
}

}  // namespace
}  // namespace gpubind::client
