/* The C interface between the SPANK plugin and libgpubind_stepd.so, the library it loads in
 * slurmstepd only, when gpubindd cannot answer (the in-process fallback planner), so that srun,
 * sbatch and salloc, which load every SPANK plugin, never load hwloc or protobuf. Requests and
 * answers are step_text.h texts. */
#ifndef GPUBIND_SPANK_STEPD_ABI_H
#define GPUBIND_SPANK_STEPD_ABI_H

#ifdef __cplusplus
extern "C" {
#endif

#define GPUBIND_STEPD_ABI_VERSION 1

/* Returns GPUBIND_STEPD_ABI_VERSION: the plugin refuses a library of another version. */
int gpubind_stepd_abi_version(void);

/* Plans one step. `request` is an encoded StepRequest. On return *answer holds a malloc'd,
 * NUL-terminated text: an encoded StepPlan when the result is 0, else the reason no plan could
 * be made. Free it with gpubind_stepd_free. Never throws, never blocks past the request's
 * timeout plus in-process planning. */
int gpubind_stepd_plan(const char* request, char** answer);
void gpubind_stepd_free(char* answer);

#ifdef __cplusplus
}
#endif

#endif
