// slurmd's job prolog and epilog (S_CTX_JOB_SCRIPT), run on each node of a job (component) as
// slurmd's user whether or not the site has a Prolog= script: the job's --gpu-bind-auto is
// recorded for the steps that do not carry it (client/job_option.h), and removed at the end.
// With PrologFlags=Alloc the prolog runs when the job starts, from the job's own options; without
// it, nodes other than the batch host run it when the first step arrives, from that step's.
#include <cstdlib>
#include <optional>
#include <string>

#include "gpubind/client/job_option.h"
#include "plugin_state.h"
#include "slurm_log.h"

namespace gpubind::spank {
namespace {

std::optional<std::string> prolog_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value ? std::optional<std::string>(value) : std::nullopt;
}

std::optional<unsigned long> job_id_of(spank_t sp) {
  uint32_t job_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS) return std::nullopt;
  return job_id;
}

// The job's option as Slurm hands it to the prolog (spank_option_getopt reads the prolog's
// SPANK_-prefixed copy).
std::optional<std::string> job_option_value(spank_t sp) {
  char* optarg = nullptr;
  if (spank_option_getopt(sp, bind_option(), &optarg) != ESPANK_SUCCESS) return std::nullopt;
  return std::string(optarg ? optarg : "");
}

}  // namespace

void job_prolog(spank_t sp, const SiteArgs& site) {
  const auto job_id = job_id_of(sp);
  if (!job_id) return;
  const auto record = client::job_option_to_record(
      prolog_env(std::string("SPANK_") + client::kComponentOptionEnv), job_option_value(sp));
  // A job without the option leaves no record, nor one an earlier job of the same id left.
  const Status done = record ? client::write_job_record(site.job_records, *job_id, *record)
                             : client::remove_job_record(site.job_records, *job_id);
  if (!done) {
    log_error("job " + std::to_string(*job_id) + ": cannot record its --" + kOptionName + ": " +
              done.error().message);
    // Never an earlier job's record of the same id in its place.
    if (record) (void)client::remove_job_record(site.job_records, *job_id);
  }
}

void job_epilog(spank_t sp, const SiteArgs& site) {
  const auto job_id = job_id_of(sp);
  if (!job_id) return;
  if (const Status removed = client::remove_job_record(site.job_records, *job_id); !removed)
    log_error("job " + std::to_string(*job_id) + ": " + removed.error().message);
}

}  // namespace gpubind::spank
