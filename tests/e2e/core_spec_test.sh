#!/usr/bin/env bash
# Core specialisation (Slurm's CoreSpecCount and CpuSpecList) without a cpuset cgroup
# (task/affinity alone) and with one (task/cgroup, ConstrainCores): Slurm keeps the specialised
# core from jobs and, without the cgroup, confines slurmd and slurmstepd to it, so slurmstepd's
# own affinity says nothing of the step. Every step must still be bound by the daemon's plan on
# its own CPUs (those Slurm gives it, never the specialised one), under on_error=fail.
# A job's own -S/--core-spec is the same from the step's side: -S 0 gives the job the node's
# specialised cores (AllowSpecResourcesUsage), -S 1 keeps one of the job's.
# Usage: core_spec_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"

# check_mode NAME CLUSTER_OPTIONS...: one cluster, one node, a specialised core; then the job
# options -S 0 (the job takes the specialised core too) and, on a node without one, --core-spec=1.
check_mode() {
  local name=$1
  shift
  e2e_start_cluster core-spec 1 "$@"
  "$cluster" plugstack "$dir" timeout_ms=5000 on_error=fail
  if [[ "$*" == *CoreSpecCount=0* ]]; then
    check_step "$name, srun --core-spec=1" --core-spec=1 -n1
  else
    check_step "$name" -n1
    [[ "$*" != *CoreSpecCount=1* ]] || check_step "$name, srun -S 0 -c2" -S 0 -n1 -c2
  fi
  e2e_no_node_drained
  e2e_cleanup
  trap - EXIT
}

# check_step NAME SRUN_OPTIONS...: the step under gpubind runs on the CPUs Slurm gives it alone.
check_step() {
  local name=$1
  shift
  # What Slurm keeps for a step: its CPUs under Slurm's own binding, gpubind not asked.
  run srun -N1 "$@" --gpus=1 "$check" --json
  local slurms spec json cpus
  slurms=$(field cpus "$(grep '^{' <<<"$out")")
  spec=$(scontrol show node n1 | sed -nE 's/.*CPUSpecList=([0-9,-]+).*/\1/p')
  [[ -n "$slurms" && ( -n "$spec" || "$*" == *core-spec* ) ]] &&
    ok "$name: Slurm specialises CPU ${spec:-of the job}; steps run on $slurms" ||
    bad "$name: core specialisation is not set up" "$out" "$(scontrol show node n1)"
  run srun -N1 "$@" --gpus=1 --gpu-bind-auto=verbose "$check" --json
  json=$(grep '^{' <<<"$out")
  cpus=$(field cpus "$json")
  [[ $rc -eq 0 && "$(field GPUBIND_BOUND "$json")" == 1 && "$cpus" == "$slurms" &&
    "$out" == *"[daemon]"* && "$out" != *"no usable CPUs"* ]] &&
    ok "$name: bound by the daemon's plan on the step's own CPUs ($cpus), not the specialised $spec" ||
    bad "$name: a step on a core-specialised node" "$out"
  ! grep -q "no usable CPUs" "$dir"/log/slurmd-*.log && ok "$name: no step refused (slurmd's log)" ||
    bad "$name: slurmd's log has a refused step"
  # -S 0: the specialised CPU is the job's too, and gpubind binds on it.
  if [[ "$*" == *"-S 0"* ]]; then
    [[ "$cpus" == 0-1 ]] && ok "$name: the job's -S 0 gives it the specialised CPU ($cpus)" ||
      bad "$name: -S 0 step on $cpus, not 0-1" "$out"
  fi
}

check_mode "CoreSpecCount=1, task/affinity" --core-spec CoreSpecCount=1
check_mode "CpuSpecList=1, task/affinity" --core-spec CpuSpecList=1
check_mode "no node specialisation, task/affinity" --core-spec CoreSpecCount=0
if [[ -d /sys/fs/cgroup/cpuset && -z "${GPUBIND_E2E_SLURM:-}" ]]; then
  check_mode "CoreSpecCount=1, task/cgroup" --core-spec CoreSpecCount=1 --cgroup
else
  echo "skipped: CoreSpecCount with task/cgroup (needs the host's cgroup v1 cpuset)"
fi
e2e_finish
