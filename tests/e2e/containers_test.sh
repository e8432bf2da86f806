#!/usr/bin/env bash
# Slurm's OCI containers (srun --container=BUNDLE, oci.conf) with runc and crun: inside the
# container each task runs on the CPUs gpubind planned, with its memory policy, as Slurm alone's
# task runs on Slurm's. Its variables reach the container where the Slurm release passes the
# task's environment (23.02 and later write config.json after SPANK's task_init); where it does
# not (22.05), neither Slurm's nor gpubind's do, and the plugin says so and what to do.
# A runtime that cannot run a container on this host at all (crun 1.8 on a host with cgroup v1
# and v2 mounted together) is reported as skipped, with its own message.
# Usage: containers_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"

# What a task sees inside the container: its CPUs, its first mapping's memory policy, and the
# variables that say its binding.
report='grep Cpus_allowed_list /proc/self/status; grep -m1 -oE " (prefer|bind|interleave|default)[^ ]*" /proc/self/numa_maps; env | grep -E "^(GPUBIND_BOUND|GPUBIND_CPUS|ROCR_VISIBLE_DEVICES|SLURM_STEP_GPUS)=" | sort'
inside() { sed -nE "s/^$1[:=][[:space:]]*//p" <<<"$out" | head -1; }

# Two GPU domains, a CPU each, and whole-node steps: Slurm binds a task to both CPUs, gpubind to
# its GPU's, so the two bindings differ and the container shows whose it kept.
topology=$(mktemp /tmp/gpubind-oci-XXXXXX.xml)
python3 "$(dirname "$0")/make_node_topology.py" "$topology" --split 2 || exit 1

check_runtime() {
  local runtime=$1
  e2e_start_cluster "oci-$runtime" 1 --oci "$runtime" --topology "$topology"
  local bundle=$dir/oci-bundle release
  release=$(srun --version | grep -oE '[0-9]+\.[0-9]+' | head -1)
  run srun -n1 --gpus=1 --exclusive --container="$bundle" sh -c "$report"
  if [[ $rc -ne 0 && "$out" == *"cgroups in hybrid mode not supported"* ]]; then
    echo "skipped: $runtime cannot run a container on this host: $(grep -m1 hybrid <<<"$out")"
    e2e_cleanup
    trap - EXIT
    return
  fi
  local slurms slurm_policy
  slurms=$(inside Cpus_allowed_list)
  slurm_policy=$(grep -m1 -oE "^ (prefer|bind|interleave|default)[^ ]*" <<<"$out" | tr -d ' ')
  [[ $rc -eq 0 && -n "$slurms" && "$slurm_policy" == default ]] &&
    ok "$runtime, Slurm $release alone: the task runs in the container on CPUs $slurms, memory policy $slurm_policy" ||
    bad "$runtime: a container step without gpubind" "$out"
  run srun -n1 --gpus=1 --exclusive --gpu-bind-auto=verbose --container="$bundle" sh -c "$report"
  # The plan, as the plugin printed it before the runtime started: its CPUs and NUMA node.
  local planned numa cpus policy
  planned=$(sed -nE 's/.*rank 0 \(local 0\): cpus ([0-9,-]+) \(L3 [0-9]+, NUMA ([0-9]+)\).*/\1 \2/p' <<<"$out")
  numa=${planned#* }
  planned=${planned% *}
  cpus=$(inside Cpus_allowed_list)
  policy=$(grep -m1 -oE "^ (prefer|bind|interleave|default)[^ ]*" <<<"$out" | tr -d ' ')
  # The memory policy is inherited; the CPUs too, unless the runtime resets them to its cgroup's
  # (runc 1.2 and later: then the task's CPUs are the step's, and gpubind-run restores them).
  if [[ $rc -eq 0 && -n "$planned" && "$cpus" == "$planned" && "$policy" == "prefer:$numa" ]]; then
    ok "$runtime, Slurm $release: inside the container the task runs on the planned CPUs $cpus (Slurm's: $slurms), memory preferred on NUMA $numa"
  elif [[ $rc -eq 0 && -n "$planned" && "$cpus" == "$slurms" && "$policy" == "prefer:$numa" ]]; then
    ok "$runtime, Slurm $release: memory preferred on NUMA $numa inside the container; $runtime reset the CPUs to the step's $cpus (planned: $planned)"
  else
    bad "$runtime: CPUs and memory policy inside the container (planned: ${planned:-none}, NUMA ${numa:-none}; inside: ${cpus:-none}, ${policy:-none})" "$out"
  fi
  if [[ $release == 22.* ]]; then
    [[ -z "$(inside GPUBIND_BOUND)" && -z "$(inside SLURM_STEP_GPUS)" &&
      $(lines_with "this step runs in an OCI container") -eq 1 && "$out" == *"gpubind-run"* ]] &&
      ok "$runtime, Slurm $release: no task variable reaches the container (Slurm's neither); the plugin says so once, and what to do" ||
      bad "$runtime: variables on a release that does not pass them" "$out"
  else
    [[ "$(inside GPUBIND_BOUND)" == 1 && "$(inside GPUBIND_CPUS)" == "$planned" &&
      -n "$(inside ROCR_VISIBLE_DEVICES)" && "$out" != *"this step runs in an OCI container"* ]] &&
      ok "$runtime, Slurm $release: gpubind's variables reach the container (GPUBIND_CPUS=$planned, ROCR_VISIBLE_DEVICES=$(inside ROCR_VISIBLE_DEVICES))" ||
      bad "$runtime: variables inside the container" "$out"
  fi
  # gpubind-run inside the container restores the recorded CPUs where the runtime widened them
  # (runc 1.2 and later reset a container's CPU affinity), and leaves them where it did not.
  local in_runner=$build/bin/gpubind-run
  [[ -n "${GPUBIND_E2E_SLURM:-}" ]] && in_runner=$build/slurm-$GPUBIND_E2E_SLURM/bin/gpubind-run
  if [[ $release != 22.* ]]; then
    run srun -n1 --gpus=1 --exclusive --gpu-bind-auto --container="$bundle" "$in_runner" sh -c "$report"
    [[ $rc -eq 0 && "$(inside Cpus_allowed_list)" == "$planned" && "$(inside GPUBIND_CPUS)" == "$planned" &&
      ( "$cpus" == "$planned" || "$out" == *"CPUs $planned restored, memory on NUMA $numa"* ) ]] &&
      ok "$runtime, Slurm $release: gpubind-run in the container runs the task on the planned CPUs $planned$([[ $cpus != "$planned" ]] && echo " (restored from $cpus)")" ||
      bad "$runtime: gpubind-run inside the container" "$out"
  fi
  e2e_no_node_drained
  e2e_cleanup
  trap - EXIT
}

# Apptainer (packaged in Debian unstable only: the Slurm 26.05 root has it). The image is a
# sandbox folder whose /usr and /etc are the node's, run as the job's user in a user namespace.
# Without --cleanenv the task's variables pass into the container; with it only APPTAINERENV_*
# do, which gpubind sets beside each of its variables for a task that runs apptainer. gpubind-run
# inside the image divides the task among torchrun's workers there.
check_apptainer() {
  e2e_start_cluster apptainer 1
  local release image=$dir/apptainer-image
  release=$(srun --version | grep -oE '[0-9]+\.[0-9]+' | head -1)
  mkdir -p "$image"/{usr,etc,proc,dev,sys,tmp,root,var/tmp}
  ln -s usr/bin "$image/bin"
  ln -s usr/lib "$image/lib"
  ln -s usr/lib64 "$image/lib64"
  ln -s usr/sbin "$image/sbin"
  local in_build=$build
  [[ -n "${GPUBIND_E2E_SLURM:-}" ]] && in_build=$build/slurm-$GPUBIND_E2E_SLURM
  local apptainer=(apptainer -s exec --userns -B "/usr,/etc,$build,$here")
  local cleanenv
  for cleanenv in "" --cleanenv; do
    local how="apptainer exec${cleanenv:+ $cleanenv}"
    run srun -n1 --gpus=1 "${apptainer[@]}" $cleanenv "$image" sh -c "$report"
    local slurms=$(inside Cpus_allowed_list) slurm_gpus=$(inside SLURM_STEP_GPUS)
    [[ $rc -eq 0 && -n "$slurms" && ( -n "$cleanenv" || -n "$slurm_gpus" ) ]] &&
      ok "$how, Slurm $release alone: CPUs $slurms${slurm_gpus:+, SLURM_STEP_GPUS=$slurm_gpus}${cleanenv:+, no task variable}" ||
      bad "$how without gpubind" "$out"
    run srun -n1 --gpus=1 --gpu-bind-auto=verbose "${apptainer[@]}" $cleanenv "$image" sh -c "$report"
    local planned numa
    planned=$(sed -nE 's/.*rank 0 \(local 0\): cpus ([0-9,-]+) \(L3 [0-9]+, NUMA ([0-9]+)\).*/\1 \2/p' <<<"$out")
    numa=${planned#* }
    planned=${planned% *}
    [[ $rc -eq 0 && -n "$planned" && "$(inside Cpus_allowed_list)" == "$planned" &&
      "$(grep -m1 -oE "^ (prefer|bind|default)[^ ]*" <<<"$out" | tr -d ' ')" == "prefer:$numa" &&
      "$(inside GPUBIND_BOUND)" == 1 && "$(inside GPUBIND_CPUS)" == "$planned" &&
      -n "$(inside ROCR_VISIBLE_DEVICES)" ]] &&
      ok "$how, Slurm $release: the planned CPUs $planned, memory on NUMA $numa and gpubind's variables inside (ROCR_VISIBLE_DEVICES=$(inside ROCR_VISIBLE_DEVICES))" ||
      bad "$how with gpubind" "$out"
  done
  # torchrun in the container, each worker started through gpubind-run there.
  run srun --input=none -n1 -c2 --gpus=2 --gpu-bind-auto "${apptainer[@]}" "$image" \
    env PYTHONPATH="$here/torch_shim" torchrun --standalone --nproc_per_node 2 --redirects 1 \
    --tee 1 --log_dir "$dir/torchrun" --no_python "$in_build/bin/gpubind-run" "$in_build/bin/gpubind-check" --json
  local json cpus
  json=$(sed -E 's/^\[[a-z]+[0-9]+\]://' <<<"$out" | grep '^{')
  cpus=$(sed -nE 's/.*"cpus":"([^"]*)".*/\1/p' <<<"$json" | sort -u | tr '\n' ' ')
  [[ $rc -eq 0 && $(grep -c '"GPUBIND_BOUND":"1"' <<<"$json") -eq 2 &&
    $(sed -nE 's/.*"GPUBIND_GPU_PCI":"([^"]*)".*/\1/p' <<<"$json" | sort -u | wc -l) -eq 2 &&
    $(wc -w <<<"$cpus") -eq 2 ]] &&
    ok "torchrun in the container: its 2 workers each bound by gpubind-run, a GPU and CPUs ($cpus) each" ||
    bad "torchrun inside apptainer" "$out"
  e2e_no_node_drained
  e2e_cleanup
  trap - EXIT
}

for runtime in runc crun; do
  if ! command -v "$runtime" >/dev/null && [[ -z "${GPUBIND_E2E_SLURM:-}" ]]; then
    bad "$runtime not installed (scripts/install-deps)"
    continue
  fi
  check_runtime "$runtime"
done
rm -f "$topology"
if command -v apptainer >/dev/null ||
  { [[ -n "${GPUBIND_E2E_SLURM:-}" ]] && "$here/slurm-root" exec "$GPUBIND_E2E_SLURM" -- sh -c 'command -v apptainer' >/dev/null; }; then
  check_apptainer
else
  echo "skipped: Apptainer (packaged in Debian unstable only: run under scripts/test --slurm 26.05)"
fi
e2e_finish
