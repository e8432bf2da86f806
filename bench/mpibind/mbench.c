/*
 * mbench: times LLNL mpibind's mapping of one hwloc XML dump, for side-by-side comparison with
 * `gpubindctl plan --time` (bench/mpibind/compare.py). Built against an mpibind source tree by
 * scripts/compare-mpibind; mpibind itself is not part of gpubind.
 *
 *   mbench [--env] XML NTASKS [REPEATS]   median of REPEATS timed mappings (default 2000)
 *   mbench --map XML NTASKS                 mpibind's mapping as JSON, for scoring beside
 *                                           gpubind's plan (bench/mpibind/compare.py --quality)
 *
 * One timed mapping is mpibind_init, set_topology, set_ntasks, mpibind() and mpibind_finalize;
 * with --env also mpibind_set_env_vars, which builds the tasks' variables as mpibind's Slurm
 * plugin does (gpubind's plan always includes its tasks' environments).
 *
 * The XML is loaded once with mpibind's own loader (mpibind_load_topology); mpibind() leaves a
 * caller's topology unchanged when no restrict set is given, so every repetition maps the same
 * topology.
 *
 * Prints "gpus_total=G" (the GPUs mpibind sees) from an untimed first mapping, then
 * "median_us=M min_us=m repeats=R ntasks=T". Exit status: 0 ok, 1 usage or load error, 2 mpibind
 * failed, 128+signal when mpibind crashed.
 */
#define _GNU_SOURCE
#include <hwloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpibind.h"

#define WARMUP 100

static void crash_handler(int sig) {
  char msg[96];
  int n =
      snprintf(msg, sizeof(msg), "error: mpibind crashed (signal %d: %s)\n", sig, strsignal(sig));
  if (n > 0) (void)!write(STDERR_FILENO, msg, (size_t)n);
  _exit(128 + sig);
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One mapping; on success the handle is returned for the caller to finalize. */
static int map_once(hwloc_topology_t topo, int ntasks, int with_env, mpibind_t** out) {
  mpibind_t* h = NULL;
  int rc;
  if (mpibind_init(&h) != 0 || h == NULL) return -1;
  if (mpibind_set_topology(h, topo) != 0) return -2;
  if (mpibind_set_ntasks(h, ntasks) != 0) return -3;
  /* On failure the handle is not finalized: mpibind may fail before allocating the arrays
     mpibind_finalize frees. */
  rc = mpibind(h);
  if (rc != 0) return rc;
  if (with_env && mpibind_set_env_vars(h) != 0) return -4;
  *out = h;
  return 0;
}

/* mpibind reads the GPUVendor info of every GPU OS device and crashes where hwloc gave none (DRM
   devices such as card0 in dumps made without a GPU runtime). Such devices of a GPU vendor get
   the vendor of their PCI device, so that mpibind maps these dumps at all; those of any other
   vendor (a BMC's VGA chip), which neither binder counts as a GPU, are shown to mpibind as
   block devices, which it ignores. Nothing else is changed. */
static void name_gpu_vendors(hwloc_topology_t topo) {
  hwloc_obj_t osdev = NULL;
  while ((osdev = hwloc_get_next_osdev(topo, osdev)) != NULL) {
    hwloc_obj_t pci = osdev->parent;
    const char* vendor = NULL;
    if (osdev->attr->osdev.type != HWLOC_OBJ_OSDEV_GPU ||
        hwloc_obj_get_info_by_name(osdev, "GPUVendor") != NULL)
      continue;
    if (pci != NULL && pci->type == HWLOC_OBJ_PCI_DEVICE) {
      switch (pci->attr->pcidev.vendor_id) {
        case 0x10de:
          vendor = "NVIDIA Corporation";
          break;
        case 0x1002:
          vendor = "Advanced Micro Devices, Inc. [AMD/ATI]";
          break;
        case 0x8086:
          vendor = "Intel Corporation";
          break;
      }
    }
    if (vendor != NULL)
      hwloc_obj_add_info(osdev, "GPUVendor", vendor);
    else
      osdev->attr->osdev.type = HWLOC_OBJ_OSDEV_BLOCK;
  }
}

static void usage(const char* self) {
  fprintf(stderr, "usage: %s [--env] XML NTASKS [REPEATS]\n       %s --map XML NTASKS\n", self,
          self);
}

/* {"tasks": [{"cpus": "0-5,48-53", "gpus": ["0000:03:00.0"]}, ...]}: each task's PUs (OS
   indices, as a list) and its GPUs by PCI bus id, as mpibind's Slurm plugin would bind them. */
static int print_mapping(mpibind_t* h, int ntasks) {
  hwloc_bitmap_t* cpus = mpibind_get_cpus(h);
  char list[65536];
  int t, g, ngpus = 0;
  const int any_gpu = mpibind_get_num_gpus(h) > 0; /* mpibind reads no GPU list without one */
  if (cpus == NULL || (any_gpu && mpibind_set_gpu_ids(h, MPIBIND_ID_PCIBUS) != 0)) return -1;
  printf("{\"tasks\": [");
  for (t = 0; t < ntasks; t++) {
    char** gpus = any_gpu ? mpibind_get_gpus_ptask(h, t, &ngpus) : NULL;
    if (hwloc_bitmap_list_snprintf(list, sizeof(list), cpus[t]) < 0) return -1;
    printf("%s{\"cpus\": \"%s\", \"gpus\": [", t ? ", " : "", list);
    for (g = 0; gpus != NULL && g < ngpus; g++)
      printf("%s\"%s\"", g ? ", " : "", gpus[g]);
    printf("]}");
  }
  printf("]}\n");
  return 0;
}

int main(int argc, char* argv[]) {
  int with_env = 0, map = 0, ntasks, repeats = 2000, i, rc, first = 1;
  hwloc_topology_t topo;
  mpibind_t* h = NULL;
  double* samples;

  signal(SIGSEGV, crash_handler);
  signal(SIGBUS, crash_handler);
  signal(SIGFPE, crash_handler);
  signal(SIGABRT, crash_handler);
  signal(SIGILL, crash_handler);

  if (argc > 1 && strcmp(argv[1], "--env") == 0) {
    with_env = 1;
    first = 2;
  } else if (argc > 1 && strcmp(argv[1], "--map") == 0) {
    map = 1;
    first = 2;
  }
  if (argc - first < 2 || argc - first > 3) {
    usage(argv[0]);
    return 1;
  }
  const char* xml = argv[first];
  ntasks = atoi(argv[first + 1]);
  if (argc - first == 3) repeats = atoi(argv[first + 2]);
  if (ntasks <= 0 || repeats <= 0) {
    fprintf(stderr, "error: NTASKS and REPEATS must be positive\n");
    return 1;
  }

  if (hwloc_topology_init(&topo) < 0 || hwloc_topology_set_xml(topo, xml) < 0 ||
      mpibind_load_topology(topo) != 0) {
    fprintf(stderr, "error: cannot load %s\n", xml);
    return 1;
  }
  name_gpu_vendors(topo);

  rc = map_once(topo, ntasks, with_env, &h);
  if (rc != 0) {
    fprintf(stderr, "error: mpibind failed (rc=%d) on %s with %d tasks\n", rc, xml, ntasks);
    return 2;
  }
  if (map) {
    rc = print_mapping(h, ntasks);
    mpibind_finalize(h);
    hwloc_topology_destroy(topo);
    if (rc != 0) fprintf(stderr, "error: cannot read mpibind's mapping of %s\n", xml);
    return rc == 0 ? 0 : 2;
  }
  printf("gpus_total=%d\n", mpibind_get_num_gpus(h));
  mpibind_finalize(h);

  samples = malloc(sizeof(double) * (size_t)repeats);
  if (samples == NULL) {
    fprintf(stderr, "error: out of memory\n");
    return 1;
  }
  for (i = -WARMUP; i < repeats; i++) {
    double t0 = now_ns();
    rc = map_once(topo, ntasks, with_env, &h);
    if (rc == 0) rc = mpibind_finalize(h);
    double t1 = now_ns();
    if (rc != 0) {
      fprintf(stderr, "error: mpibind failed (rc=%d) in repetition %d\n", rc, i);
      return 2;
    }
    if (i >= 0) samples[i] = t1 - t0;
  }
  qsort(samples, (size_t)repeats, sizeof(double), cmp_double);
  double median = (repeats % 2) ? samples[repeats / 2]
                                : 0.5 * (samples[repeats / 2 - 1] + samples[repeats / 2]);
  printf("median_us=%.3f min_us=%.3f repeats=%d ntasks=%d\n", median / 1e3, samples[0] / 1e3,
         repeats, ntasks);
  free(samples);
  hwloc_topology_destroy(topo);
  return 0;
}
