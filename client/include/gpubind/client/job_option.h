// A job's --gpu-bind-auto, recorded on each of its nodes by the job prolog for the steps that do
// not carry it: Slurm passes a job's SPANK options only to steps srun starts from the job's own
// environment, so a step attached from outside (srun --jobid --overlap) has none, and every step
// of a heterogeneous batch job gets the option of component 0 (sbatch hands component K the
// options of components 0..K). The record holds what was given on this job (component) itself.
#pragma once

#include <sys/types.h>
#include <optional>
#include <string>

#include "gpubind/result.h"

namespace gpubind::client {

inline constexpr const char* kDefaultJobRecordDir = "/run/gpubind-jobs";

// sbatch and salloc mark each component's job: "yes" where --gpu-bind-auto was given on it, "no"
// where not; srun marks "yes" where it runs inside a job that has the option and was not given
// its own, else "step": an option srun carries is its step's, not the job's, and a prolog that
// such a step starts (without PrologFlags=Alloc) records nothing. Slurm's prolog sees the mark
// as SPANK_ + this name.
inline constexpr const char* kComponentOptionEnv = "GPUBIND_OPTION_ON_COMPONENT";

struct JobOption {
  bool given = false;  // false: the job's option came from an earlier component, not this one
  std::string flags;   // as given ("" for the bare option)
  bool operator==(const JobOption&) const = default;
};

// What a job prolog records from what Slurm hands it: the component mark (nullopt where the job
// was submitted without one) and the option's value (nullopt where the job has none). A
// component marked "no" is recorded as not given, option or none. nullopt: nothing to record.
std::optional<JobOption> job_option_to_record(const std::optional<std::string>& component_mark,
                                              const std::optional<std::string>& option);

std::string encode_job_option(const JobOption& option);
Result<JobOption> decode_job_option(const std::string& text);

// Records live in `dir` (root's, written only by the prolog), one file per job id. A record is
// read only where the folder and the file belong to `trusted_uid` (the user slurmd runs as) and
// nobody else may write them.
std::string job_record_path(const std::string& dir, unsigned long job_id);
Status write_job_record(const std::string& dir, unsigned long job_id, const JobOption& option);
// nullopt: this job has no record on this node.
Result<std::optional<JobOption>> read_job_record(const std::string& dir, unsigned long job_id,
                                                 uid_t trusted_uid);
Status remove_job_record(const std::string& dir, unsigned long job_id);

}  // namespace gpubind::client
