// What the plugin says through Slurm's log functions (slurmd's log in slurmstepd and the job
// prolog; the user's terminal in srun, sbatch and salloc), "gpubind: " first and the message made
// printable (gpubind/printable.h): a job's environment, a daemon's answer and report files are
// quoted in them, and none of it may start a line of the log of its own.
#pragma once

#include <string>

#include "gpubind/printable.h"

extern "C" {
#include <slurm/spank.h>
}

namespace gpubind::spank {

inline void log_error(const std::string& message) {
  slurm_error("gpubind: %s", printable(message).c_str());
}
inline void log_info(const std::string& message) {
  slurm_info("gpubind: %s", printable(message).c_str());
}
inline void log_verbose(const std::string& message) {
  slurm_verbose("gpubind: %s", printable(message).c_str());
}
inline void log_debug(const std::string& message) {
  slurm_debug("gpubind: %s", printable(message).c_str());
}

}  // namespace gpubind::spank
