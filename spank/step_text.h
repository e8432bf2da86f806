// What the plugin asks libgpubind_stepd.so and what it answers, as "key=value" lines: simple to
// produce, parse, log and test on both sides of the dlopen boundary.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "gpubind/result.h"

namespace gpubind::spank {

struct StepRequest {
  unsigned long job_id = 0, step_id = 0;
  int ntasks = 1;
  std::string allowed_cpus;   // cpu list; empty = no restriction
  std::string allowed_cores;  // core indices (Slurm's S_STEP_ALLOC_CORES); empty = none given
  bool gpus_given = false;
  std::vector<std::pair<int, std::string>> gpus;  // node GPU index, the step's token
  std::vector<std::string> unplaced_gpus;         // tokens with no node GPU (MIG instances)
  int cpus_per_task = 0, gpus_per_task = 0, tasks_per_gpu = 0;
  std::string order;  // "", "gpu" or "cpu"
  int smt = -1;       // -1 = the policy's
  bool no_gpu_env = false, no_nic_env = false, omp = false;
  std::string ze_hierarchy;  // "" or "flat" (Level Zero's default), "composite"
  // Site settings for the library.
  std::string socket;
  int timeout_ms = 1000;
  bool fallback = true;  // plan in-process when the daemon cannot
  std::string policy;    // policy file for the fallback
};

struct TaskEnv {
  std::string name, value;
  bool only_if_unset = false;
};

struct TaskBinding {
  int rank = 0;  // local rank
  std::string cpus;
  int numa = -1, l3 = -1;
  std::string gpus;  // "0 (0000:c1:00.0)", for people
  int ngpus = 0;
  std::string tokens;  // the task's GPU visibility tokens, "3" or "2,3"
  std::string vendor;  // vendor of the task's GPUs, "" without GPUs
  std::string nic;
  std::vector<TaskEnv> env;
};

struct StepPlan {
  std::string source;  // "daemon" or "fallback"
  std::vector<std::string> warnings;
  std::vector<TaskBinding> tasks;
};

std::string encode(const StepRequest& request);
Result<StepRequest> decode_request(const std::string& text);
std::string encode(const StepPlan& plan);
Result<StepPlan> decode_plan(const std::string& text);

}  // namespace gpubind::spank
