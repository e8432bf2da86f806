#!/usr/bin/env bash
# Shared GPU nodes: gres/shard and gres/mps steps (each GPU's shares on that GPU's File=), on a
# node of two GPU domains. A shard or MPS step is bound to the GPU Slurm gave it (the one its
# SLURM_STEP_GPUS names, told by its bus id), with cores near it where the step has any, never
# to another GPU; Slurm's own share variables (SLURM_SHARDS_ON_NODE,
# CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) are kept.
# Usage: shared_gpus_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
if (($(nproc) < 2)); then echo "needs 2 CPUs for 2 domains: skipped"; exit 77; fi
topology=$(mktemp /tmp/gpubind-shared-XXXXXX.xml)
python3 "$(dirname "$0")/make_node_topology.py" "$topology" --split 2 || exit 1

# The bus id and CPUs of node GPU $1 in the topology.
gpu_pci() {
  "$ctl" topology --topology "$topology" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["gpus"][int(sys.argv[1])]["pci"])' "$1"
}
gpu_cpus() {
  "$ctl" topology --topology "$topology" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["gpus"][int(sys.argv[1])]["locality"]["cpus"])' "$1"
}

# check_share NAME SRUN_OPTIONS...: Slurm's choice first (unbound), then the bound step.
check_share() {
  local name=$1
  shift
  run srun -N1 "$@" env
  local step_gpus shares mps
  step_gpus=$(sed -n 's/^SLURM_STEP_GPUS=//p' <<<"$out" | sort -u)
  shares=$(sed -n 's/^SLURM_SHARDS_ON_NODE=//p' <<<"$out" | sort -u)
  mps=$(sed -n 's/^CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=//p' <<<"$out" | sort -u)
  if [[ -z "$step_gpus" || "$step_gpus" == *,* ]]; then
    bad "$name: Slurm gave the step one GPU" "$out"
    return
  fi
  run srun -N1 "$@" --gpu-bind-auto=verbose bash -c "$check --json; env | grep -E '^(SLURM_SHARDS_ON_NODE|CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)='"
  local json problems=() line
  json=$(grep '^{' <<<"$out")
  [[ $rc -eq 0 && -n "$json" ]] || problems+=("no bound task")
  while read -r line; do
    [[ -z "$line" ]] && continue
    [[ "$(field GPUBIND_BOUND "$line")" == 1 ]] || problems+=("not bound: $line")
    [[ "$(field GPUBIND_GPU_PCI "$line")" == "$(gpu_pci "$step_gpus")" ]] ||
      problems+=("not on GPU $step_gpus ($(gpu_pci "$step_gpus")): $line")
    [[ "$(field ROCR_VISIBLE_DEVICES "$line")" == "$step_gpus" ]] || problems+=("another GPU visible: $line")
  done <<<"$json"
  [[ -z "$shares" || "$out" == *"SLURM_SHARDS_ON_NODE=$shares"* ]] || problems+=("SLURM_SHARDS_ON_NODE lost")
  [[ -z "$mps" || "$out" == *"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$mps"* ]] || problems+=("MPS percentage lost")
  if ((${#problems[@]} == 0)); then
    ok "$name: on Slurm's GPU $step_gpus ($(gpu_pci "$step_gpus"))${shares:+, $shares shard(s) kept}${mps:+, MPS $mps% kept}"
  else
    bad "$name" "${problems[@]}" "$out"
  fi
}

e2e_start_cluster shared-shard 1 --topology "$topology" --shared-gpus shard
check_share "--gres=shard:1" -n1 --gres=shard:1
# Alone on the node, the step's task has its GPU's cores.
json=$(grep '^{' <<<"$out")
[[ "$(field cpus "$json")" == "$(gpu_cpus "$(field GPUBIND_GPUS "$json")")" ]] &&
  ok "--gres=shard:1: the task runs on its GPU's cores ($(field cpus "$json"))" || bad "shard cores" "$out"
check_share "-n2 --gres=shard:2 (two tasks, one GPU's shards)" -n2 --gres=shard:2
# Another job holds the first GPU's shards: the step's shard is on another GPU, and is bound there.
sbatch -N1 -n1 --gres=shard:2 -o /dev/null --wrap "sleep 60" >/dev/null
for _ in $(seq 100); do [[ "$(squeue -h -t R | wc -l)" -ge 1 ]] && break; sleep 0.1; done
check_share "--gres=shard:1 beside another job's shards" -n1 --gres=shard:1
scancel --quiet --user="$(id -un)"
for _ in $(seq 100); do [[ "$(squeue -h | wc -l)" -eq 0 ]] && break; sleep 0.1; done
# Without ConstrainDevices --gpus-per-task gives each task its GPU in its variables only: every
# task may open every GPU, and the plugin says nothing of device cgroups.
run srun -N1 -n2 --gpus-per-task=1 --gpu-bind-auto "$check" --json
[[ $rc -eq 0 && "$out" != *"device cgroup of its own"* ]] &&
  ok "--gpus-per-task=1 without ConstrainDevices: no device cgroup warning" || bad "no isolation warning" "$out"
e2e_no_node_drained
e2e_cleanup

e2e_start_cluster shared-mps 1 --topology "$topology" --shared-gpus mps
trap 'e2e_cleanup; rm -f "$topology"' EXIT
check_share "--gres=mps:50" -n1 --gres=mps:50
check_share "-n2 --gres=mps:100" -n2 --gres=mps:100
e2e_no_node_drained
e2e_finish
