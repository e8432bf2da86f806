#!/usr/bin/env bash
# gpubind-run as a launcher's workers run it, without Slurm or a daemon: planned in-process from a
# fixture (--topology, through libgpubind_stepd.so), applied to the process, then exec'd; usage
# errors, the site's on_error, exit statuses, and a worker inside a worker (GPUs by bus id).
# Usage: gpubind_run_test.sh BUILD_DIR FIXTURES
set -uo pipefail
build=$1
fixtures=$2
runner=$build/bin/gpubind-run
check=$build/bin/gpubind-check
topology=$fixtures/lumi-g.xml
tmp=$(mktemp -d /tmp/gpubind-run-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"
field() { sed -nE "s/.*\"$1\":\"([^\"]*)\".*/\1/p" <<<"$2"; }
: >"$tmp/empty.conf"
site=(--plugstack "$tmp/empty.conf")
# Outside any launcher or Slurm step, whatever ran this test.
clean=(env -u SLURM_LOCALID -u SLURM_JOB_ID -u SLURM_STEP_GPUS -u CUDA_VISIBLE_DEVICES
  -u ROCR_VISIBLE_DEVICES -u ZE_AFFINITY_MASK -u GPU_DEVICE_ORDINAL -u HIP_VISIBLE_DEVICES
  -u GPUBIND_BOUND -u GPUBIND_GPUS -u GPUBIND_GPU_PCI -u OMP_NUM_THREADS -u SLURM_CONF)

# Two workers of one launcher: each applies its own entry of the same plan.
gpus=""
for rank in 0 1; do
  out=$("${clean[@]}" LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 "$runner" "${site[@]}" --topology "$topology" \
    "$check" --json 2>&1)
  json=$(grep '^{' <<<"$out")
  [[ "$(field GPUBIND_BOUND "$json")" == 1 && "$(field local_rank "$json")" == "$rank" &&
    "$(field cpus "$json")" == "$(field GPUBIND_CPUS "$json")" && -n "$(field ROCR_VISIBLE_DEVICES "$json")" ]] &&
    ok "worker $rank of 2 is bound as its entry says" || bad "worker $rank" "$out"
  gpus+="$(field GPUBIND_GPUS "$json") "
done
[[ "$gpus" == "0,1,2,3 4,5,6,7 " ]] && ok "the two workers split the node's 8 GCDs" || bad "GPU split" "$gpus"

# A worker of a worker: the outer one recorded its GCDs' bus ids, the inner ones divide them.
out=$("${clean[@]}" LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 "$runner" "${site[@]}" --topology "$topology" \
  env LOCAL_RANK=1 LOCAL_WORLD_SIZE=4 "$runner" "${site[@]}" --topology "$topology" --verbose \
  "$check" --json 2>&1)
json=$(grep '^{' <<<"$out")
[[ "$(field ROCR_VISIBLE_DEVICES "$json")" == 5 && "$out" == *"by the bus ids gpubind recorded"* &&
  "$(field GPUBIND_GPU_PCI "$json")" == 0000:d6:00.0 ]] &&
  ok "a worker inside a bound worker gets one of its GCDs, found by bus id" || bad "nested" "$out"

# --dry-run: the binding is printed, nothing applied.
out=$("${clean[@]}" LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 "$runner" "${site[@]}" --topology "$topology" --dry-run \
  "$check" --json 2>&1)
[[ "$out" == *"(dry run: not applied)"* && "$out" != *GPUBIND_BOUND* ]] && ok "--dry-run prints and applies nothing" ||
  bad "dry run" "$out"

# The command's exit status is the worker's; a missing command is 127.
"${clean[@]}" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "$runner" "${site[@]}" --topology "$topology" sh -c 'exit 7' 2>/dev/null
[[ $? -eq 7 ]] && ok "the command's exit status is kept" || bad "exit status"
out=$("${clean[@]}" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "$runner" "${site[@]}" --topology "$topology" "$tmp/none" 2>&1)
[[ $? -eq 127 && "$out" == *"cannot run '$tmp/none'"* ]] && ok "a missing command: 127, named" || bad "missing" "$out"

# Usage errors: exit 2, the fault named.
expect_usage() {  # expect_usage NAME TEXT ARGS...
  local name=$1 text=$2
  shift 2
  out=$("${clean[@]}" "$@" 2>&1)
  local rc=$?
  [[ $rc -eq 2 && "$out" == *"$text"* ]] && ok "$name: exit 2, named" || bad "$name" "rc=$rc" "$out"
}
expect_usage "no launcher" "no launcher says which local rank" "$runner" "${site[@]}" true
expect_usage "a rank without its count" "LOCAL_WORLD_SIZE is not set" env LOCAL_RANK=0 "$runner" "${site[@]}" true
expect_usage "a rank beyond the count" "is not below the local size" \
  env LOCAL_RANK=4 LOCAL_WORLD_SIZE=4 "$runner" "${site[@]}" true
expect_usage "an unknown option" "unknown option --frobnicate" \
  env LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "$runner" --frobnicate true
expect_usage "no command" "no COMMAND" env LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "$runner" "${site[@]}"
expect_usage "a bad flag" "order" env LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "$runner" "${site[@]}" --order=sideways true
expect_usage "a named plugstack.conf that is not there" "$tmp/absent.conf" \
  env LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "$runner" --plugstack "$tmp/absent.conf" true

# The site's on_error, from its plugstack.conf line, when the daemon cannot answer.
echo "required /usr/lib/slurm/spank_gpubind.so socket=$tmp/absent.sock on_error=fail" >"$tmp/fail.conf"
out=$("${clean[@]}" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "$runner" --plugstack "$tmp/fail.conf" echo command-ran 2>&1)
[[ $? -eq 1 && "$out" == *"cannot bind local rank 0"* && "$out" != *command-ran* ]] &&
  ok "on_error=fail: exit 1, the command does not run" || bad "on_error=fail" "$out"
echo "include $tmp/skip.d/*.conf" >"$tmp/skip.conf"
mkdir -p "$tmp/skip.d"
echo "optional spank_gpubind.so socket=$tmp/absent.sock on_error=skip" >"$tmp/skip.d/gpubind.conf"
out=$("${clean[@]}" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "$runner" --plugstack "$tmp/skip.conf" echo command-ran 2>&1)
[[ $? -eq 0 && "$out" == *"running unbound"* && "$out" == *command-ran* ]] &&
  ok "on_error=skip (from an included file): runs unbound, says so" || bad "on_error=skip" "$out"

# Flux under resource containment (flux-core 0.89, FLUX_EXEC_CONSTRAINED_RESOURCES): its
# gpu-affinity plugin writes positions among this node's GPUs in the job's R, which a flux
# command on the PATH gives (here a stand-in printing what `flux getattr rank` and `flux job info
# ID R` print): positions 0,1 of R's "6-7" on broker rank 1 are node GPUs 6 and 7.
nvidia=$fixtures/dgx-h100.xml
mkdir -p "$tmp/flux-bin"
cat >"$tmp/flux-bin/flux" <<'FLUX'
#!/bin/sh
case "$*" in
  "getattr rank") echo 1 ;;
  "job info f2Bx9r7 R") echo '{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-7","gpu":"0-1"}},{"rank":"1","children":{"core":"0-7","gpu":"6-7"}}],"starttime":0,"expiration":0}}' ;;
  *) echo "flux: $*: unexpected" >&2; exit 1 ;;
esac
FLUX
chmod +x "$tmp/flux-bin/flux"
flux_env=(FLUX_JOB_ID=f2Bx9r7 FLUX_TASK_LOCAL_ID=0 FLUX_TASK_RANK=0 FLUX_JOB_SIZE=2 FLUX_JOB_NNODES=2)
by_node=$("${clean[@]}" "${flux_env[@]}" CUDA_VISIBLE_DEVICES=6,7 "$runner" "${site[@]}" \
  --topology "$nvidia" "$check" --json 2>&1)
out=$("${clean[@]}" PATH="$tmp/flux-bin:$PATH" "${flux_env[@]}" FLUX_EXEC_CONSTRAINED_RESOURCES=1 \
  CUDA_VISIBLE_DEVICES=0,1 "$runner" "${site[@]}" --topology "$nvidia" --verbose "$check" --json 2>&1)
json=$(grep '^{' <<<"$out")
pcis=$(field GPUBIND_GPU_PCI "$(grep '^{' <<<"$by_node")")
[[ -n "$pcis" && "$(field GPUBIND_GPU_PCI "$json")" == "$pcis" && "$(field CUDA_VISIBLE_DEVICES "$json")" == 0,1 &&
  "$out" == *"the node's GPUs 6,7 (the job's R"* && "$out" != *"warning: CUDA"* ]] &&
  ok "Flux, contained: positions 0,1 are R's node GPUs 6,7 ($pcis), named as the job numbers them" ||
  bad "Flux contained positions" "$out" "uncontained 6,7: $by_node"
out=$("${clean[@]}" PATH="$tmp/flux-bin:$PATH" "${flux_env[@]}" FLUX_JOB_ID=f9 FLUX_EXEC_CONSTRAINED_RESOURCES=1 \
  CUDA_VISIBLE_DEVICES=0,1 "$runner" "${site[@]}" --topology "$nvidia" "$check" --json 2>&1)
[[ "$out" == *"warning: CUDA_VISIBLE_DEVICES=0,1 are positions within the Flux job's GPUs"*"\`flux job info f9 R\` failed"* &&
  "$(field GPUBIND_BOUND "$(grep '^{' <<<"$out")")" == 1 ]] &&
  ok "Flux, contained, R unreadable: bound by token, the user told why" || bad "Flux without R" "$out"
# A job id that flux would read as an option is never passed to it.
out=$("${clean[@]}" PATH="$tmp/flux-bin:$PATH" "${flux_env[@]}" FLUX_JOB_ID=--help FLUX_EXEC_CONSTRAINED_RESOURCES=1 \
  CUDA_VISIBLE_DEVICES=0,1 "$runner" "${site[@]}" --topology "$nvidia" "$check" --json 2>&1)
[[ "$out" == *"FLUX_JOB_ID is not a job id"* ]] && ok "Flux: an id like an option is refused" ||
  bad "Flux id like an option" "$out"

# PBS's cgroup hook names a job's GPUs by UUID (pbs_cgroups.PY): placed on the GPU the node's
# UUID names, found live (the NVIDIA driver's files in a sysfs/procfs test bed), with no warning.
if python3 "$(dirname "$0")/../fsroot/make_tree.py" --spec "$(dirname "$0")/../fsroot/specs/dgx-h100.json" \
  "$tmp/dgx-tree" >/dev/null 2>&1; then
  gpu5=$(HWLOC_FSROOT=$tmp/dgx-tree "$build/bin/gpubindctl" topology --topology live --json |
    python3 -c 'import json,sys; g=json.load(sys.stdin)["gpus"][5]; print(g["uuid"], g["pci"])')
  out=$("${clean[@]}" HWLOC_FSROOT="$tmp/dgx-tree" PBS_JOBID=12.pbs PBS_TASKNUM=1 \
    CUDA_VISIBLE_DEVICES="${gpu5% *}" "$runner" "${site[@]}" --topology live --local-rank 0 \
    --local-size 1 "$check" --json 2>&1)
  json=$(grep '^{' <<<"$out")
  [[ -n "$gpu5" && "$(field GPUBIND_GPU_PCI "$json")" == "${gpu5#* }" && "$out" != *"cannot tell"* &&
  "$out" != *"does not list"* ]] &&
    ok "PBS: a GPU named by UUID is placed on its GPU (${gpu5#* })" || bad "PBS UUID" "$gpu5" "$out"
else
  bad "make_tree.py could not write the DGX H100 test bed"
fi

finish
