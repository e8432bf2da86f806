/* The C interface between the SPANK plugin and libgpubind_stepd.so, the library it loads in
 * slurmstepd only, when gpubindd cannot answer (the in-process fallback planner), so that srun,
 * sbatch and salloc, which load every SPANK plugin, never load hwloc or protobuf. Requests and
 * answers are the bytes the daemon's compact transport carries: binder.proto's PlanRequest and
 * PlanResponse. */
#ifndef GPUBIND_SPANK_STEPD_ABI_H
#define GPUBIND_SPANK_STEPD_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: protobuf payloads (1 carried key=value texts). */
#define GPUBIND_STEPD_ABI_VERSION 2

/* Returns GPUBIND_STEPD_ABI_VERSION: the plugin refuses a library of another version. */
int gpubind_stepd_abi_version(void);

/* Plans one step: `request` holds `request_size` bytes of a gpubind.v1.PlanRequest, `policy` the
 * policy file to plan with (NULL or "" = the site's file, if there is one, as gpubindd chooses).
 * On return *answer holds a malloc'd buffer of *answer_size bytes: a gpubind.v1.PlanResponse when
 * the result is 0, else the reason no plan could be made (a text, also NUL-terminated). Free it
 * with gpubind_stepd_free. Never throws. */
int gpubind_stepd_plan(const void* request, size_t request_size, const char* policy, void** answer,
                       size_t* answer_size);
/* The same on the hwloc XML dump `topology` (NULL or "" = as gpubind_stepd_plan: the policy's
 * topology_file, else live discovery). gpubind-run's --topology; the plugin does not use it. */
int gpubind_stepd_plan_on(const void* request, size_t request_size, const char* policy,
                          const char* topology, void** answer, size_t* answer_size);
void gpubind_stepd_free(void* answer);

#ifdef __cplusplus
}
#endif

#ifdef GPUBIND_STEPD_LOADER
#include <dlfcn.h>

/* The library's entry points, as its loaders (the plugin, the tests) find them. */
struct gpubind_stepd_api {
  int (*abi_version)(void);
  int (*plan)(const void*, size_t, const char*, void**, size_t*);
  int (*plan_on)(const void*, size_t, const char*, const char*, void**, size_t*);
  void (*free)(void*);
};

/* Fills `api` from the loaded library `lib`; 0 when every entry point is there and of this
 * interface version, -1 otherwise (the library must not be called). */
static inline int gpubind_stepd_resolve(void* lib, struct gpubind_stepd_api* api) {
  api->abi_version = (int (*)(void))dlsym(lib, "gpubind_stepd_abi_version");
  api->plan =
      (int (*)(const void*, size_t, const char*, void**, size_t*))dlsym(lib, "gpubind_stepd_plan");
  api->plan_on = (int (*)(const void*, size_t, const char*, const char*, void**, size_t*))dlsym(
      lib, "gpubind_stepd_plan_on");
  api->free = (void (*)(void*))dlsym(lib, "gpubind_stepd_free");
  /* plan_on is optional: the plugin never needs it, and an older library lacks it. */
  if (!api->abi_version || !api->plan || !api->free) return -1;
  return api->abi_version() == GPUBIND_STEPD_ABI_VERSION ? 0 : -1;
}
#endif

#endif
