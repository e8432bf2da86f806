// Which environment variables gpubind may set in a task: one rule for site policies, the daemon's
// answers and the plugin. A plan's variables come from a site policy and, over the socket, from
// another account; a task runs as its user, root included. So names that change what a task runs
// (its loader, interpreter, shell start-up, tool libraries) are never set, whoever asks, and the
// plugin applies only the variables binding is about plus those the site lists.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpubind {

// LD_*, PATH, BASH_ENV, ENV, PYTHON*, PERL5LIB, tool and plugin library paths
// (CUDA_INJECTION64_PATH, OMP_TOOL_LIBRARIES, NCCL_NET_PLUGIN...), SLURM_* (the job's identity) and
// the like.
bool changes_what_runs(std::string_view name);

// The variables binding is about: GPU visibility and order, the NIC choice of the MPI, NCCL and
// UCX stacks, OpenMP placement, GPUBIND_*. `site` adds names ("FOO") and prefixes ("FOO_*").
// Never true for a name that changes what runs.
bool is_binding_variable(std::string_view name, const std::vector<std::string>& site = {});

// The variable a container runtime sets from `name` inside the container (APPTAINERENV_NAME and
// SINGULARITYENV_NAME set NAME, even under --cleanenv); "" for any other name. Both rules above
// judge such a twin by that variable.
std::string_view container_twin_of(std::string_view name);

// The prefix of those twins for a task whose program is `command` ("apptainer":
// "APPTAINERENV_", "singularity": "SINGULARITYENV_"): such a runtime starts the container's
// command with an environment of its own, the host's without --cleanenv, only the prefixed
// variables with it. "" for any other program.
std::string_view container_env_prefix_of(std::string_view command);

}  // namespace gpubind
