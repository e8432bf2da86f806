/* The step environment Slurm 26.05 gives with gres.conf Flags=env_uuid, on a test cluster whose
 * Slurm is older or has no NVML to read UUIDs from: CUDA_VISIBLE_DEVICES holds the step's GPU
 * UUIDs, position by position with SLURM_STEP_GPUS (gres_common.c writes the device's unique_id
 * in place of its index). Listed before gpubind in plugstack.conf, so gpubind plans from it.
 * Argument: uuids=UUID0,UUID1,... (the node's GPUs by Slurm index; "-" for a GPU without a UUID,
 * which keeps its number, as Slurm does); append=TOKEN adds a token Slurm's list does not have
 * (a visibility list that no longer matches SLURM_STEP_GPUS). Test only. */
#include <slurm/spank.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

SPANK_PLUGIN(gpubind_test_uuid_env, 1);

static const char* uuid_of(const char* uuids, long index, size_t* length) {
  const char* at = uuids;
  for (long i = 0; i < index && at; ++i) {
    at = strchr(at, ',');
    if (at) ++at;
  }
  if (!at || !*at) return NULL;
  const char* end = strchr(at, ',');
  *length = end ? (size_t)(end - at) : strlen(at);
  return at;
}

int slurm_spank_user_init(spank_t sp, int ac, char** av) {
  const char* uuids = NULL;
  const char* append = NULL;
  for (int i = 0; i < ac; ++i) {
    if (strncmp(av[i], "uuids=", 6) == 0) uuids = av[i] + 6;
    if (strncmp(av[i], "append=", 7) == 0) append = av[i] + 7;
  }
  char indices[1024], list[8192] = "";
  if (!uuids || spank_getenv(sp, "SLURM_STEP_GPUS", indices, sizeof indices) != ESPANK_SUCCESS)
    return 0;
  size_t used = 0;
  for (char* item = strtok(indices, ","); item; item = strtok(NULL, ",")) {
    size_t length = 0;
    const char* uuid = uuid_of(uuids, strtol(item, NULL, 10), &length);
    if (!uuid || used + length + 24 > sizeof list) return -1;
    if (length == 1 && uuid[0] == '-')
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? "," : "", item);
    else
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%.*s", used ? "," : "",
                               (int)length, uuid);
  }
  if (append && used + strlen(append) + 2 < sizeof list)
    snprintf(list + used, sizeof list - used, "%s%s", used ? "," : "", append);
  return spank_setenv(sp, "CUDA_VISIBLE_DEVICES", list, 1) == ESPANK_SUCCESS ? 0 : -1;
}
