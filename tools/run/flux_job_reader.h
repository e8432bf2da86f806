// Reads a Flux job's GPUs on this node from Flux itself (`flux getattr rank`, `flux job info ID
// R`), for gpubind-run's workers under resource containment: the one place gpubind-run runs a
// command of another program before its own.
#pragma once

#include "gpubind/client/flux_job.h"

namespace gpubind::run {

// Nothing is run outside a contained Flux job (client::flux_constrained); each command gets 5 s.
client::FluxJob read_flux_job(const client::EnvLookup& env);

}  // namespace gpubind::run
