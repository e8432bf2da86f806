#!/usr/bin/env bash
# srun --gpu-bind-auto on a real Slurm cluster (tests/e2e/slurm-cluster): affinity and env per
# task, two nodes, sbatch propagation, site default, off, dry-run, verbose, bad flags, and the
# daemon stopped (fallback, skip, fail) — with no node left drained. A hostile daemon on the
# socket: hostile_daemon_test.sh.
# Usage: e2e_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
e2e_start_cluster e2e 2


# --- binding per task ----------------------------------------------------------------------------
run srun -N1 -n1 --gpus=1 --gpu-bind-auto "$check" --json
check_tasks "-n1 bound" 1
run srun -N1 -n2 --gpus=2 --gpu-bind-auto "$check" --json
check_tasks "-n2 bound, disjoint CPUs, one GPU each" 2
if ((ncpus >= 4)); then
  run srun -N1 -n4 --gpus=4 --gpu-bind-auto "$check" --json
  check_tasks "-n4 bound, one GPU each" 4
else
  # Slurm will not overcommit a step that asks for GPUs: 4 tasks on this machine go without.
  run srun -N1 -n4 -O --gpu-bind-auto "$check" --json
  check_tasks "-n4 on $ncpus CPUs (overcommitted, no GPUs) bound" 4 nogpu
  [[ "$out" == *"share cores"* && "$out" != *ROCR_VISIBLE_DEVICES* ]] &&
    ok "-n4 on $ncpus CPUs warns that cores are shared, sets no GPU" || bad "-n4 share warning" "$out"
fi
run srun -N2 -n4 --ntasks-per-node=2 --gpus-per-node=2 --gpu-bind-auto "$check" --json
check_tasks "-N2 -n4 bound on both nodes" 4
[[ $(grep -c '"node":"n1"' <<<"$out") -eq 2 && $(grep -c '"node":"n2"' <<<"$out") -eq 2 ]] &&
  ok "-N2 spreads 2 tasks per node" || bad "-N2 layout" "$out"

# The affinity the task has is the one gpubind planned (verbose line vs the kernel's view).
run srun -N1 -n2 --gpus=2 --gpu-bind-auto=verbose "$check" --json
planned=$(sed -nE 's/^gpubind: .* rank ([0-9]+) \(local [0-9]+\): cpus ([0-9,-]+) .*/\1 \2/p' <<<"$out" | sort)
actual=$(grep '^{' <<<"$out" | sed -nE 's/.*"rank":"([0-9]+)".*"cpus":"([^"]*)".*/\1 \2/p' | sort)
[[ -n "$planned" && "$planned" == "$actual" ]] && ok "verbose table matches the applied affinity" ||
  bad "verbose vs applied" "planned: $planned" "actual: $actual" "$out"
[[ "$out" == *"GPU 0 (0000:40:00.0, L3 0), NIC hsn0 [daemon]"* ]] && ok "verbose shows GPU, bus id, NIC, source" ||
  bad "verbose format" "$out"

# One task with two GPUs (a worker per GPU): the NICs of both, threads per worker.
run srun -N1 -n1 --gpus=2 --gpu-bind-auto=verbose "$check" --json
json=$(grep '^{' <<<"$out")
ncpu_task=$(sed -nE 's/.*"GPUBIND_CPUS":"([^"]*)".*/\1/p' <<<"$json" | tr ',' '\n' |
  awk -F- '{n += ($2 == "" ? 1 : $2 - $1 + 1)} END {print n}')
[[ "$out" == *", NIC hsn0,hsn1 [daemon]"* && "$json" == *'"GPUBIND_NIC":"hsn0,hsn1"'* &&
  "$json" == *"\"OMP_NUM_THREADS\":\"$(((ncpu_task / 2) > 0 ? ncpu_task / 2 : 1))\""* ]] &&
  ok "a task with 2 GPUs gets both GPUs' NICs and a thread share per GPU" || bad "2-GPU task" "$out"

# Exactly one daemon request per step and node, whatever the task count.
requests() { "$ctl" --socket "$dir/run/gpubind.sock" status --json | sed -nE 's/.*"requests":([0-9]+).*/\1/p'; }
before=$(requests)
run srun -N2 -n4 --ntasks-per-node=2 --gpus-per-node=2 --gpu-bind-auto true
after=$(requests)
[[ $rc -eq 0 && $((after - before)) -eq 2 ]] && ok "one daemon request per step per node (2 nodes, 4 tasks: 2)" ||
  bad "requests per step: $before -> $after" "$out"

# Co-located one-GPU jobs whose GPUs are equally near both NICs do not all get hsn0: a job
# holding GPU 0 runs, the next one gets GPU 1 and with it the second NIC.
sbatch -w n1 -N1 -n1 --gpus=1 -o /dev/null --wrap "sleep 60" >/dev/null
for _ in $(seq 100); do [[ "$(squeue -h -t R | wc -l)" -ge 1 ]] && break; sleep 0.1; done
run srun -w n1 -N1 -n1 --gpus=1 --gpu-bind-auto "$check" --json
[[ "$(field GPUBIND_GPU_PCI "$out")" == 0000:41:00.0 && "$(field GPUBIND_NIC "$out")" == hsn1 ]] &&
  ok "a second one-GPU job on the node (GPU 1) gets the second of two equally near NICs" ||
  bad "NIC of co-located jobs" "$out"
scancel --quiet --user="$(id -un)"
for _ in $(seq 100); do [[ "$(squeue -h | wc -l)" -eq 0 ]] && break; sleep 0.1; done

# slurmd's log says what the plugin decided for each bound step (SlurmdDebug=verbose).
[[ $(cat "$dir"/log/slurmd-n*.log | grep -c "gpubind: job [0-9]* step [0-9]*: [0-9]* tasks planned by daemon") -ge 1 ]] &&
  ok "slurmd's log names each bound step's plan" || bad "slurmd log" "$(tail -5 "$dir"/log/slurmd-n1.log)"

# --- how binding is asked for --------------------------------------------------------------------
run env SLURM_GPU_BIND_AUTO=verbose srun -N1 -n2 --gpus=2 "$check" --json
check_tasks "SLURM_GPU_BIND_AUTO binds" 2
run srun -N1 -n2 --gpus=2 "$check" --json
[[ "$out" != *GPUBIND_BOUND* ]] && ok "no option, site default off: not bound" || bad "default off" "$out"
run sbatch --wait -N1 -n2 --gpus=2 --gpu-bind-auto=verbose -o "$dir/batch.out" \
  --wrap "srun $check --json"
out=$(cat "$dir/batch.out" 2>/dev/null)
[[ $rc -eq 0 ]] && check_tasks "#SBATCH --gpu-bind-auto reaches the steps" 2 || bad "sbatch rc $rc" "$out"
[[ "$out" == *"gpubind: "*"[daemon]"* ]] && ok "#SBATCH flags (verbose) reach the steps" || bad "sbatch verbose" "$out"
# A step without GPUs in a job with GPUs gets no GPU (the job's SLURM_JOB_GPUS are not its own).
run sbatch --wait -N1 -n2 --gpus=2 -o "$dir/batch3.out" \
  --wrap "srun -n1 --gres=none --gpu-bind-auto $check --json"
out=$(cat "$dir/batch3.out" 2>/dev/null)
[[ $rc -eq 0 && "$out" == *'"GPUBIND_BOUND":"1"'* && "$out" != *VISIBLE_DEVICES* &&
  "$out" != *GPUBIND_GPUS* ]] && ok "srun --gres=none in a GPU job: bound, no GPU" ||
  bad "--gres=none step" "$out"
# A site whose Slurm does not manage GPUs: by default a step Slurm says nothing about gets none;
# with gpus_without_gres=node it shares out the node's GPUs, while --gres=none still means none.
run srun -N1 -n2 --gpu-bind-auto "$check" --json
[[ "$out" == *'"GPUBIND_BOUND":"1"'* && "$out" != *GPUBIND_GPUS* ]] &&
  ok "no GPUs asked, gpus_without_gres=none (default): bound, no GPU" || bad "no GPUs, default" "$out"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback gpus_without_gres=node
run srun -N1 -n2 --gpu-bind-auto "$check" --json
[[ "$(grep '^{' <<<"$out" | sed -nE 's/.*"GPUBIND_GPUS":"([^"]*)".*/\1/p' | tr ',' '\n' | sort | tr '\n' ' ')" == "0 1 2 3 " &&
  $(grep -c '"ROCR_VISIBLE_DEVICES"' <<<"$out") -eq 2 ]] &&
  ok "gpus_without_gres=node: a step Slurm says nothing about shares out the node's 4 GPUs" ||
  bad "gpus_without_gres=node" "$out"
run sbatch --wait -N1 -n2 --gpus=2 -o "$dir/batch4.out" \
  --wrap "srun -n1 --gres=none --gpu-bind-auto $check --json"
out=$(cat "$dir/batch4.out" 2>/dev/null)
[[ $rc -eq 0 && "$out" == *'"GPUBIND_BOUND":"1"'* && "$out" != *GPUBIND_GPUS* ]] &&
  ok "gpus_without_gres=node: srun --gres=none in a GPU job still gets no GPU" || bad "node, --gres=none" "$out"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback
run sbatch --wait -N1 -n1 --gpu-bind-auto -o "$dir/batch2.out" --wrap "$check --json"
out=$(cat "$dir/batch2.out" 2>/dev/null)
[[ $rc -eq 0 && "$out" != *GPUBIND_BOUND* ]] && ok "the batch script itself is left alone" || bad "batch step" "$out"

"$cluster" plugstack "$dir" default=on timeout_ms=1000
run srun -N1 -n2 --gpus=2 "$check" --json
check_tasks "plugstack default=on binds every job" 2
run srun -N1 -n2 --gpus=2 --gpu-bind-auto=off "$check" --json
[[ $rc -eq 0 && "$out" != *GPUBIND_BOUND* ]] && ok "--gpu-bind-auto=off opts out of default=on" || bad "off" "$out"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback

run srun -N1 -n2 --gpus=2 --gpu-bind-auto=dry-run "$check" --json
[[ $rc -eq 0 && "$out" != *GPUBIND_BOUND* && $(lines_with "(dry run: not applied)") -eq 2 ]] &&
  ok "dry-run prints the plan and applies nothing" || bad "dry-run" "$out"
run srun -N1 -n2 --gpus=2 --gpu-bind-auto=order=cpu,no-nic-env,omp "$check" --json
[[ $rc -eq 0 && "$out" != *NCCL_SOCKET_IFNAME* && "$out" == *'"OMP_PLACES":"cores"'* ]] &&
  ok "flags no-nic-env and omp act" || bad "flags" "$out"

# --- a user's or a module's own variables win over gpubind's --------------------------------------
# A LUMI-like policy: the node's Slingshot interfaces for NCCL, Cray MPICH's NIC per rank.
generation() { "$ctl" --socket "$dir/run/gpubind.sock" status --json | sed -nE 's/.*"policy_generation":([0-9]+).*/\1/p'; }
reload_policy() {
  local before
  before=$(generation)
  kill -HUP "$(cat "$dir/run/gpubindd.pid")"
  for _ in $(seq 100); do [[ "$(generation)" != "$before" ]] && return 0; sleep 0.1; done
  return 1
}
cp "$dir/etc/policy.conf" "$dir/policy.plain"
cat >>"$dir/etc/policy.conf" <<'POLICY'
nic_env { name: "NCCL_SOCKET_IFNAME" value: "{node_nics_netdev}" when: "slingshot" only_if_unset: true }
nic_env { name: "MPICH_OFI_NIC_POLICY" value: "USER" when: "slingshot" only_if_unset: true }
nic_env { name: "MPICH_OFI_NIC_MAPPING" value: "{nic_mapping}" when: "slingshot" only_if_unset: true }
POLICY
reload_policy || bad "policy reload"
run env -u NCCL_SOCKET_IFNAME -u OMP_NUM_THREADS -u MPICH_OFI_NIC_POLICY \
  srun -N1 -n2 --gpus=2 --gpu-bind-auto "$check" --json
json=$(grep '^{' <<<"$out")
[[ $(grep -c '"NCCL_SOCKET_IFNAME":"hsn0,hsn1"' <<<"$json") -eq 2 &&
  $(grep -c '"MPICH_OFI_NIC_POLICY":"USER"' <<<"$json") -eq 2 &&
  $(grep -c '"OMP_NUM_THREADS":"1"' <<<"$json") -eq 2 ]] &&
  ok "policy's NIC and thread variables set where the user has none (node-wide NCCL_SOCKET_IFNAME)" ||
  bad "defaults without user variables" "$out"
run env NCCL_SOCKET_IFNAME=eth7 OMP_NUM_THREADS=5 MPICH_OFI_NIC_POLICY=NUMA \
  srun -N1 -n2 --gpus=2 --gpu-bind-auto "$check" --json
json=$(grep '^{' <<<"$out")
[[ $(grep -c '"NCCL_SOCKET_IFNAME":"eth7"' <<<"$json") -eq 2 &&
  $(grep -c '"OMP_NUM_THREADS":"5"' <<<"$json") -eq 2 &&
  $(grep -c '"MPICH_OFI_NIC_POLICY":"NUMA"' <<<"$json") -eq 2 &&
  $(grep -c '"GPUBIND_BOUND":"1"' <<<"$json") -eq 2 ]] &&
  ok "user-set NCCL_SOCKET_IFNAME, OMP_NUM_THREADS, MPICH_OFI_NIC_POLICY survive binding" ||
  bad "user variables overwritten" "$out"
cp "$dir/policy.plain" "$dir/etc/policy.conf"
reload_policy || bad "policy reload"

# --- steps started inside a bound task -----------------------------------------------------------
# The inner step inherits the outer task's environment: gpubind's GPUBIND_* information there is
# cleared; the values it set stay, as the user may have exported them again (semantics_test.sh).
inner='srun -n1 --overlap "$0" --json; OMP_NUM_THREADS=5 srun -n1 --overlap "$0" --json'
run env -u OMP_NUM_THREADS srun -N1 -n1 --gpus=1 --gpu-bind-auto bash -c "$inner" "$check"
json=$(grep '^{' <<<"$out")
first=$(sed -n 1p <<<"$json")
second=$(sed -n 2p <<<"$json")
[[ $rc -eq 0 && -n "$first" && "$first" != *GPUBIND_* ]] &&
  ok "a step inside a bound task inherits none of its GPUBIND_* information" ||
  bad "stale variables in a nested step" "$out"
[[ "$second" == *'"OMP_NUM_THREADS":"5"'* && "$second" != *GPUBIND_* ]] &&
  ok "a variable the user set again before the nested step is kept" || bad "user's variable in a nested step" "$out"
inner='srun -n1 --overlap --gpu-bind-auto "$0" --json'
run env -u OMP_NUM_THREADS srun -N1 -n1 --gpus=1 --gpu-bind-auto bash -c "$inner" "$check"
json=$(grep '^{' <<<"$out")
[[ $rc -eq 0 && $(grep -c '"GPUBIND_BOUND":"1"' <<<"$json") -eq 1 &&
  "$(field OMP_NUM_THREADS "$json")" == "$(field GPUBIND_CPUS "$json" | tr ',' '\n' |
    awk -F- '{n += ($2 == "" ? 1 : $2 - $1 + 1)} END {print n}')" ]] &&
  ok "a bound step inside a bound task gets its own OMP_NUM_THREADS" || bad "bound nested step" "$out"

# --- Slurm's own per-task GPU choice is kept ------------------------------------------------------
# --gpu-bind=map_gpu gives rank 0 GPU 1 (bus 0000:41:00.0) and rank 1 GPU 0: each task keeps
# Slurm's GPU, its visibility variables as Slurm set them, on cores of its own.
slurm_choice_ok() {  # slurm_choice_ok RANK VISIBLE PCI: the JSON line of RANK in $out agrees
  local line
  line=$(grep "\"rank\":\"$1\"" <<<"$out")
  [[ "$(field ROCR_VISIBLE_DEVICES "$line")" == "$2" && "$(field CUDA_VISIBLE_DEVICES "$line")" == "$2" &&
    "$(field GPUBIND_GPUS "$line")" == "$2" && "$(field GPUBIND_GPU_PCI "$line")" == "$3" ]]
}
distinct_cpus() { [[ $(grep '^{' <<<"$out" | sed -nE 's/.*"cpus":"([^"]*)".*/\1/p' | sort | uniq -d | wc -l) -eq 0 ]]; }
run srun -N1 -n2 --gpus=2 --gpu-bind=map_gpu:1,0 --gpu-bind-auto=verbose "$check" --json
slurm_choice_ok 0 1 0000:41:00.0 && slurm_choice_ok 1 0 0000:40:00.0 && distinct_cpus &&
  [[ $(lines_with "(GPUs chosen by Slurm)") -eq 2 &&
    $(lines_with "--gpu-bind=map_gpu:1,0 given: tasks keep the GPUs Slurm chose") -eq 1 ]] &&
  ok "--gpu-bind=map_gpu:1,0: each task keeps the GPU Slurm gave it, on cores of its own" ||
  bad "--gpu-bind=map_gpu kept" "$out"
# gpubindctl explain says the same of that step: each task's GPU and CPUs under Slurm's binding.
step_cpus=$(grep '^{' <<<"$out" | sed -nE 's/.*"cpus":"([^"]*)".*/\1/p' | paste -sd, -)
explained=$("$ctl" --socket "$dir/run/gpubind.sock" explain --ntasks 2 --gpus 0,1 --cpus "$step_cpus" \
  --slurm-gpu-bind map_gpu:1,0 --json 2>&1)
python3 - "$out" "$explained" <<'PY' && ok "explain --slurm-gpu-bind map_gpu:1,0 names each task's GPU and CPUs as bound" ||
import json, sys
bound = {int(json.loads(l)["rank"]): json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")}
for task in json.loads(sys.argv[2])["tasks"]:
    env, b = {e["name"]: e["value"] for e in task["env"]}, bound[task["rank"]]["env"]
    assert env["GPUBIND_GPU_PCI"] == b["GPUBIND_GPU_PCI"] and task["cpus"] == b["GPUBIND_CPUS"], (task, b)
    assert all(g["reason"] == "fixed" for g in task["gpus"]), task["gpus"]
PY
  bad "explain --slurm-gpu-bind map_gpu:1,0 against the step" "$out" "$explained"
if ((ncpus >= 2)); then
  run srun -N1 -n2 --gpus=4 --gpus-per-task=2 --gpu-bind-auto=order=cpu "$check" --json
  slurm_choice_ok 0 0,1 0000:40:00.0,0000:41:00.0 && slurm_choice_ok 1 2,3 0000:42:00.0,0000:43:00.0 &&
    distinct_cpus && [[ $(lines_with "given: tasks keep the GPUs") -eq 0 ]] && ok "--gpus-per-task=2 with order=cpu: each task keeps Slurm's two GPUs" ||
    bad "--gpus-per-task kept" "$out"
fi
# Two tasks Slurm put on one GPU are planned as a shared GPU is: its domain's CPUs split
# between them, the warning every shared GPU gets, none about shared cores.
run srun -N1 -n2 --gpus=2 --gpu-bind=map_gpu:0 --gpu-bind-auto "$check" --json
slurm_choice_ok 0 0 0000:40:00.0 && slurm_choice_ok 1 0 0000:40:00.0 &&
  { ((ncpus < 2)) || distinct_cpus; } && [[ $(lines_with "may share") -eq 0 &&
    $(lines_with "2 tasks share GPU 0000:40:00.0") -eq 1 ]] &&
  ok "two tasks Slurm put on one GPU keep it and split its CPUs, with the shared-GPU warning" ||
  bad "--gpu-bind=map_gpu:0" "$out"

# --- the user's explicit --cpu-bind / --gpu-bind win, with one line; a site may force gpubind -----
cpus_of_rank() { field cpus "$(grep "\"rank\":\"$1\"" <<<"$out")"; }
run srun -N1 -n2 --gpus=2 --cpu-bind=map_cpu:1,0 --gpu-bind-auto "$check" --json
[[ "$(cpus_of_rank 0)" == 1 && "$(cpus_of_rank 1)" == 0 &&
  $(lines_with "--cpu-bind=map_cpu:1,0 given: tasks keep Slurm's CPU binding") -eq 1 &&
  "$(field ROCR_VISIBLE_DEVICES "$(grep '"rank":"0"' <<<"$out")")" == 0 &&
  $(grep -c '"GPUBIND_GPU_PCI"' <<<"$out") -eq 2 && $(grep -c SLURM_GPUBIND_USER_BIND <<<"$out") -eq 0 ]] &&
  ok "--cpu-bind=map_cpu:1,0: Slurm's CPUs kept, one line, gpubind's GPU variables still set" ||
  bad "--cpu-bind=map_cpu kept" "$out"
run srun -N1 -n1 --gpus=1 --cpu-bind=verbose,cores --gpu-bind-auto "$check" --json
[[ $(lines_with "--cpu-bind=cores given") -eq 1 && $(grep -c '"OMP_NUM_THREADS"' <<<"$out") -eq 0 ]] &&
  ok "--cpu-bind=verbose,cores: Slurm's binding kept, no OMP_NUM_THREADS from gpubind's own CPUs" ||
  bad "--cpu-bind=cores kept" "$out"
run srun -N1 -n2 --gpus=2 --cpu-bind=verbose --gpu-bind-auto "$check" --json
[[ $(lines_with "given: tasks keep") -eq 0 ]] && ok "--cpu-bind=verbose alone binds nothing: gpubind binds" ||
  bad "--cpu-bind=verbose" "$out"
run srun -N1 -n2 --gpus=2 --gpu-bind=none --gpu-bind-auto "$check" --json
# Slurm 22.05 sets no visibility variable under --gpu-bind=none, 24.11 the step's list: either
# way every task keeps what Slurm set, the same for both.
rocr() { field ROCR_VISIBLE_DEVICES "$(grep "\"rank\":\"$1\"" <<<"$out")"; }
[[ "$(rocr 0)" == "$(rocr 1)" && "$(rocr 0)" != 0 && $(grep -c '"GPUBIND_GPUS"' <<<"$out") -eq 2 &&
  $(lines_with "--gpu-bind=none given") -eq 1 ]] &&
  ok "--gpu-bind=none: the GPU visibility variables stay Slurm's, GPUBIND_GPUS names each task's near GPU" ||
  bad "--gpu-bind=none" "$out"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback override_explicit=yes
run srun -N1 -n2 --gpus=2 --cpu-bind=map_cpu:1,0 --gpu-bind-auto "$check" --json
[[ "$(cpus_of_rank 0)" == 0 && $(lines_with "given: tasks keep") -eq 0 ]] &&
  ok "override_explicit=yes: the site's gpubind binding replaces --cpu-bind" || bad "override_explicit" "$out"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback

# --- heterogeneous steps: each component takes its own flags --------------------------------------
run srun -N1 -n1 --gpus=1 --gpu-bind-auto=verbose "$check" --json : -N1 -n2 --gpus=2 "$check" --json
[[ $rc -eq 0 && $(grep -c '"GPUBIND_BOUND":"1"' <<<"$out") -eq 1 &&
  "$(grep '"GPUBIND_BOUND":"1"' <<<"$out")" == *'"rank":"0"'* && $(lines_with "^gpubind: .* rank 0 (local 0)") -eq 1 &&
  $(lines_with "^gpubind: .* rank [12] ") -eq 0 && $(grep -c SLURM_GPUBIND <<<"$out") -eq 0 ]] &&
  ok "het step: the first component's --gpu-bind-auto=verbose binds only its own task" || bad "het step, first" "$out"
run srun -N1 -n1 --gpus=1 "$check" --json : -N1 -n2 --gpus=2 --gpu-bind-auto=verbose "$check" --json
[[ $rc -eq 0 && $(grep -c '"GPUBIND_BOUND":"1"' <<<"$out") -eq 2 &&
  $(grep '"rank":"0"' <<<"$out" | grep -c GPUBIND_BOUND) -eq 0 &&
  $(lines_with "^gpubind: .* rank 1 (local 0)") -eq 1 && $(lines_with "^gpubind: .* rank 2 (local 1)") -eq 1 ]] &&
  ok "het step: the second component's flags bind its tasks; lines name SLURM_PROCID and the local rank" ||
  bad "het step, second" "$out"

# --- bad flags fail at once, naming the flag -----------------------------------------------------
run srun -N1 -n1 --gpu-bind-auto=bogus true
[[ $rc -ne 0 && "$out" == *"unknown flag 'bogus'"* ]] && ok "srun: bad flag fails, names it" || bad "bad flag rc=$rc" "$out"
run srun -N1 -n1 --gpu-bind-auto=off,verbose true
[[ $rc -ne 0 && "$out" == *"contradicts"* ]] && ok "srun: contradictory flags fail" || bad "contradiction rc=$rc" "$out"
run sbatch --gpu-bind-auto=order=sideways --wrap true
[[ $rc -ne 0 && "$out" == *"order=sideways"* ]] && ok "sbatch: bad flag fails, names it" || bad "sbatch bad flag rc=$rc" "$out"
run env SLURM_GPU_BIND_AUTO=smt=x srun -N1 -n1 true
[[ $rc -ne 0 && "$out" == *"SLURM_GPU_BIND_AUTO=smt=x"* ]] && ok "bad SLURM_GPU_BIND_AUTO fails, names it" || bad "bad env rc=$rc" "$out"
# A value longer than any set of flags: refused by its length, at once, and not echoed back.
run env SLURM_GPU_BIND_AUTO="$(head -c 70000 /dev/zero | tr '\0' v)" srun -N1 -n1 true
[[ $rc -ne 0 && "$out" == *"SLURM_GPU_BIND_AUTO: the flags are 70000 bytes long"* && ${#out} -lt 4000 ]] &&
  ok "over-long SLURM_GPU_BIND_AUTO fails, says its length" || bad "long env rc=$rc" "${out:0:400}"
run srun -N1 -n1 --gpu-bind-auto=help true
[[ $rc -eq 0 && "$out" == *"dry-run"* ]] && ok "help prints the flags" || bad "help rc=$rc" "$out"

# --- the daemon stopped: never hang; fallback binds, skip keeps Slurm's binding, fail fails ------
"$cluster" daemon stop "$dir"
start=$SECONDS
run srun -N1 -n2 --gpus=2 --gpu-bind-auto "$check" --json
elapsed=$((SECONDS - start))
check_tasks "daemon stopped: fallback still binds" 2
[[ "$out" == *"planned in-process"* ]] && ok "fallback says so, once" || bad "fallback message" "$out"
((rc != 124)) && ok "fallback: the launch ended on its own (${elapsed}s)" || bad "fallback launch hung (${elapsed}s)"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=skip
run srun -N1 -n2 --gpus=2 --gpu-bind-auto "$check" --json
[[ $rc -eq 0 && "$out" != *GPUBIND_BOUND* && "$out" == *"Slurm's binding is kept"* ]] &&
  ok "on_error=skip: job runs with Slurm's binding and a warning" || bad "skip rc=$rc" "$out"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=fail
run srun -N1 -n2 --gpus=2 --gpu-bind-auto "$check" --json
[[ $rc -ne 0 && "$out" == *"cannot bind task"* && "$out" != *GPUBIND_BOUND* ]] &&
  ok "on_error=fail: tasks fail with a clear message" || bad "fail rc=$rc" "$out"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback
"$cluster" daemon start "$dir"
# A hung daemon (accepts, never answers): the launch waits timeout_ms, then falls back.
kill -STOP "$(cat "$dir/run/gpubindd.pid")"
start=$SECONDS
run srun -N1 -n2 --gpus=2 --gpu-bind-auto "$check" --json
elapsed=$((SECONDS - start))
kill -CONT "$(cat "$dir/run/gpubindd.pid")"
check_tasks "daemon hung (SIGSTOP): fallback binds" 2
[[ "$out" == *"did not answer in time"* ]] && ok "hung daemon: the user is told it timed out" || bad "hung message" "$out"
((rc != 124)) && ok "hung daemon: the launch ended on its own (${elapsed}s)" || bad "hung daemon: launch hung (${elapsed}s)"
run srun -N1 -n2 --gpus=2 --gpu-bind-auto=verbose "$check" --json
[[ "$out" == *"[daemon]"* ]] && ok "daemon back: plans come from it again" || bad "daemon back" "$out"

# A daemon whose node view is stale (its topology has one GPU; Slurm gives the step GPUs 0 and 1):
# not the step's fault. The plugin plans from the site's topology, says why, and slurmd logs it.
"$cluster" daemon stop "$dir"
python3 "$here/make_node_topology.py" "$dir/etc/one-gpu.xml" --gpus 1 --nics 2 || bad "one-GPU topology"
"$cluster" daemon start "$dir" --topology "$dir/etc/one-gpu.xml"
run srun -N1 -n2 --gpus=2 --gpu-bind-auto=verbose "$check" --json
check_tasks "stale daemon topology: the fallback binds" 2
[[ "$out" == *"does not fit the daemon's topology: GPU 1 does not exist"* && "$out" == *"[fallback]"* &&
  $(lines_with "does not fit the daemon's topology") -eq 1 ]] &&
  ok "stale daemon topology: planned in-process, the user is told why, once" || bad "stale topology" "$out"
grep -q "does not fit the daemon's topology" "$dir"/log/slurmd-*.log &&
  ok "stale daemon topology: slurmd's log says so" || bad "stale topology not in slurmd's log"
# Whoever launched, the fallback is counted: the plugin decides on the report as the job's user
# and leaves it as root (task_post_fork) in the daemon's root-owned spool, where no user can write.
if [[ -z "${GPUBIND_E2E_SLURM:-}" ]] && command -v runuser >/dev/null; then
  fallbacks() {
    "$ctl" --socket "$dir/run/gpubind.sock" metrics |
      awk '$1 == "gpubind_fallbacks_total{reason=\"node_mismatch\"}" {print $2}'
  }
  before=$(fallbacks)
  out=$(cd /tmp && timeout 60 runuser -u nobody -- srun -N1 -n2 --gpus=2 --gpu-bind-auto=verbose \
    "$check" --json 2>&1)
  after=$(fallbacks)
  [[ "$out" == *"[fallback]"* && -n "$before" && $((after - before)) -eq 1 ]] &&
    ok "a fallback of nobody's launch is counted in gpubind_fallbacks_total" ||
    bad "nobody's fallback: counted ${before:-?} -> ${after:-?}" "$out"
  [[ $(find "$dir/run/fallback-reports" -type f | wc -l) -eq 0 ]] &&
    ok "the daemon took the report in" || bad "reports left in the spool"
fi
"$cluster" daemon stop "$dir"
"$cluster" daemon start "$dir"

# --- nothing left behind -------------------------------------------------------------------------
e2e_no_node_drained
e2e_finish
