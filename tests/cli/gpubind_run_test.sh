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

finish
