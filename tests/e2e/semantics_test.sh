#!/usr/bin/env bash
# What a user's own choices mean to gpubind, on every Slurm release the suite runs: an explicit
# --mem-bind is kept; a value the user exports again inside a bound task is the user's in a step
# started from it; a GPU visibility variable on a node whose GPUs Slurm does not manage is the
# user's own, not the step's GPUs, and a site's default=on on_error=fail never fails a step that
# did not ask; a user's own OMP_PLACES and OMP_PROC_BIND win over the omp flag; Slurm's
# --cpu-bind=verbose is followed by what gpubind applied; a warning from
# reading the step's GPU variables reaches the user.
# Usage: semantics_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
# n1: Slurm's 4 GPUs; n2: the same node topology, GPUs Slurm does not manage (no gres).
e2e_start_cluster semantics 2 --unmanaged-gpus 1

# --- An explicit --mem-bind is the user's: Slurm's policy stays, said once. ---
memory_policy='grep -m1 -oE " (bind|prefer|interleave|local|default)[:=]?[0-9,-]*" /proc/self/numa_maps'
run srun -w n1 -n2 --gpus=2 --mem-bind=map_mem:0,0 --gpu-bind-auto sh -c "$memory_policy"
[[ $rc -eq 0 && $(lines_with " bind:0") -eq 2 && $(lines_with "prefer") -eq 0 &&
  $(lines_with "given: tasks keep Slurm's memory binding") -eq 1 ]] &&
  ok "--mem-bind=map_mem:0,0: both tasks keep Slurm's strict binding, said once" ||
  bad "explicit --mem-bind" "$out"
run srun -w n1 -n1 --gpus=1 --gpu-bind-auto sh -c "$memory_policy"
[[ $rc -eq 0 && "$out" == *" prefer:0"* && "$out" != *"memory binding"* ]] &&
  ok "no --mem-bind: gpubind's preference for the GPU's NUMA node" || bad "default memory policy" "$out"
run srun -w n1 -n1 --gpus=1 --mem-bind=none --gpu-bind-auto sh -c "$memory_policy"
[[ $rc -eq 0 && "$out" == *" prefer:0"* && "$out" != *"memory binding"* ]] &&
  ok "--mem-bind=none asks for nothing: gpubind's preference applies" || bad "--mem-bind=none" "$out"

# --- A value exported again inside a bound task is the user's in a step started from it. ---
# The outer task holds both CPUs of the step; each of the inner step's two tasks one.
inner='export OMP_NUM_THREADS=$OMP_NUM_THREADS; echo "outer=$OMP_NUM_THREADS";
  srun --overlap -n2 -c1 "$@" sh -c "echo inner=\${OMP_NUM_THREADS:-unset}"'
inner_values() { sed -n 's/^inner=//p' <<<"$out" | sort -u | tr '\n' ' '; }
run srun -w n1 -n1 -c2 --gpus=1 --gpu-bind-auto bash -c "$inner" inner
outer=$(sed -n 's/^outer=//p' <<<"$out")
[[ $rc -eq 0 && -n "$outer" && "$(inner_values)" == "$outer " ]] &&
  ok "OMP_NUM_THREADS=$outer exported again: an unbound step started in the task keeps it" ||
  bad "re-exported value, unbound inner step" "$out"
run srun -w n1 -n1 -c2 --gpus=1 --gpu-bind-auto bash -c "$inner" inner --gpu-bind-auto
[[ $rc -eq 0 && "$(inner_values)" == "$outer " &&
  $(lines_with "OMP_NUM_THREADS=$outer is kept from the step's environment") -eq 1 ]] &&
  ok "a bound step started in the task keeps it too, and says what its binding would give" ||
  bad "re-exported value, bound inner step" "$out"
run srun -w n1 -n1 -c2 --gpus=1 --gpu-bind-auto bash -c \
  'srun --overlap -n2 -c1 sh -c "echo inner=\${GPUBIND_CPUS:-unset}"'
[[ $rc -eq 0 && "$(inner_values)" == "unset " ]] &&
  ok "the outer binding's GPUBIND_* information does not reach an unbound inner step" ||
  bad "GPUBIND_* in an inner step" "$out"

# --- A user's own OpenMP placement wins over the omp flag (and a policy's omp_places), as every
# other variable of theirs does; verbose says so once. ---
run env OMP_PLACES=threads OMP_PROC_BIND=spread srun -w n1 -n2 --gpus=2 --gpu-bind-auto=verbose,omp \
  "$check" --json
[[ $rc -eq 0 && $(grep -c '"OMP_PLACES":"threads"' <<<"$out") -eq 2 &&
  $(grep -c '"OMP_PROC_BIND":"spread"' <<<"$out") -eq 2 &&
  $(lines_with "OMP_PLACES=threads is your own: kept (gpubind would set cores)") -eq 1 ]] &&
  ok "OMP_PLACES=threads OMP_PROC_BIND=spread with omp: the user's kept, said once" ||
  bad "user's OpenMP placement" "$out"
run srun -w n1 -n1 --gpus=1 --gpu-bind-auto=omp "$check" --json
[[ $rc -eq 0 && "$out" == *'"OMP_PLACES":"cores"'* && "$out" == *'"OMP_PROC_BIND":"close"'* ]] &&
  ok "without the user's own: omp sets cores and close" || bad "omp without the user's" "$out"

# --- A visibility variable where Slurm manages no GPU is the user's own. ---
run env CUDA_VISIBLE_DEVICES=3 srun -w n2 -n1 --gpu-bind-auto=verbose "$check" --json
json=$(grep '^{' <<<"$out")
[[ $rc -eq 0 && "$(field CUDA_VISIBLE_DEVICES "$json")" == 3 &&
  "$(field GPUBIND_BOUND "$json")" == 1 && "$json" != *ROCR_VISIBLE_DEVICES* &&
  -z "$(field GPUBIND_GPU_PCI "$json")" && "$out" == *"CUDA_VISIBLE_DEVICES=3 is the user's own"* ]] &&
  ok "CUDA_VISIBLE_DEVICES=3 on a node without Slurm's GPUs: kept as it is, bound without GPUs, said in verbose" ||
  bad "user's own visibility variable" "$out"

"$cluster" plugstack "$dir" timeout_ms=1000 default=on on_error=fail
# GPU 7: none of the node's 4, as a GPU-less node has none.
run env CUDA_VISIBLE_DEVICES=7 srun -w n2 -n2 sh -c 'echo "task $SLURM_PROCID cvd=$CUDA_VISIBLE_DEVICES"'
[[ $rc -eq 0 && $(lines_with "cvd=7") -eq 2 && "$out" != *"failed"* ]] &&
  ok "default=on on_error=fail: a step that did not ask runs, the user's CUDA_VISIBLE_DEVICES=7 untouched" ||
  bad "site default with the user's visibility variable" "$out"
! grep -qE "does not fit|stale|reload gpubindd" "$dir"/log/slurmd-n2.log "$dir"/run/gpubindd.log 2>/dev/null &&
  ok "nothing in the logs blames the daemon's topology" ||
  bad "stale-topology message in the logs" "$(grep -hE 'does not fit|stale|reload' "$dir"/log/* 2>/dev/null | head -5)"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback

# --- Slurm's --cpu-bind=verbose: what gpubind applied follows Slurm's mask line. ---
run srun -w n1 -n1 --gpus=1 --cpu-bind=verbose --gpu-bind-auto "$check" --json
json=$(grep '^{' <<<"$out")
[[ $rc -eq 0 && "$out" == *"cpu-bind"* &&
  "$out" == *"cpus $(field GPUBIND_CPUS "$json") "*"(replaces the CPU mask Slurm set)"* ]] &&
  ok "--cpu-bind=verbose: gpubind says the CPUs it applied after Slurm's mask" ||
  bad "--cpu-bind=verbose" "$out"

# --- A warning from reading the step's GPU variables reaches the user. ---
uuid_env=$(dirname "$(cat "$dir/etc/plugin")")/gpubind_test_uuid_env.so
if [[ -f "$uuid_env" ]]; then
  cp "$dir/etc/plugstack.conf" "$dir/etc/plugstack.conf.gpubind"
  { echo "required $uuid_env uuids=-,-,-,- append=7"; cat "$dir/etc/plugstack.conf.gpubind"; } \
    >"$dir/etc/plugstack.conf.new" && mv "$dir/etc/plugstack.conf.new" "$dir/etc/plugstack.conf"
  run srun -w n1 -n1 --gpus=1 --gpu-bind-auto "$check" --json
  [[ $rc -eq 0 && $(lines_with "warning: CUDA_VISIBLE_DEVICES=.*,7 does not match SLURM_STEP_GPUS") -eq 1 ]] &&
    ok "a visibility list that does not match SLURM_STEP_GPUS: the warning reaches the user" ||
    bad "warning from the step's GPU variables" "$out"
  # And the admin: once in slurmd's log, with the job and step.
  logged=$(grep -cE "gpubind: job [0-9]+ step [0-9]+: warning: CUDA_VISIBLE_DEVICES=.*,7 does not match" \
    "$dir"/log/slurmd-n1.log)
  [[ $logged -eq 1 ]] && ok "the step's warning is in slurmd's log once, with its job and step" ||
    bad "the step's warning in slurmd's log ($logged lines)" "$(grep gpubind "$dir"/log/slurmd-n1.log | tail -5)"
  mv "$dir/etc/plugstack.conf.gpubind" "$dir/etc/plugstack.conf"
else
  bad "no $uuid_env (built with the plugin)"
fi

e2e_no_node_drained
e2e_finish
