#!/usr/bin/env bash
# Steps confined as many sites confine them: task/cgroup with ConstrainCores and ConstrainDevices,
# each fake GPU a device file of its own. In every task, the GPUs gpubind names (GPUBIND_GPU_PCI)
# are GPU devices the task's cgroup lets it open: all of them where Slurm chose each task's GPUs
# (--gpu-bind=map_gpu, --gpus-per-task), a share of the step's where it did not; also on a node
# another job shares.
# Usage: cgroup_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
[[ -d /sys/fs/cgroup/devices ]] || { echo "no cgroup v1 devices controller: skipped"; exit 77; }
e2e_start_cluster cgroup 1 --cgroup
# Slurm's gres index K is gpubind's GPU K: K's bus id from the node's topology.
pci_of=$("$ctl" --socket "$dir/run/gpubind.sock" topology --json |
  grep -oE '"index":[0-9]+,"pci":"[^"]*"' | sed -E 's/"index":([0-9]+),"pci":"([^"]*)"/\1 \2/')

# Each task prints its rank, GPUBIND_GPU_PCI and the gres devices it may open (an open of a
# device without a driver fails with ENXIO where the cgroup allows it, EPERM where it does not).
probe='r=""; for f in '"$dir"'/dev/n1-gpu*; do
  out=$( (exec 3<"$f") 2>&1 ); [[ "$out" == *"not permitted"* ]] || r+="${f##*gpu} ";
done; echo "task $SLURM_PROCID pci=${GPUBIND_GPU_PCI:-} open=$r"'
check_step() {  # check_step NAME exact|within SRUN_OPTIONS...
  local name=$1 mode=$2 out line problems=() want got
  shift 2
  out=$(timeout 60 srun -N1 --gpu-bind-auto "$@" bash -c "$probe" 2>&1)
  [[ $(grep -c '^task ' <<<"$out") -ge 1 ]] || problems+=("no task lines")
  while read -r line; do
    [[ "$line" == task* ]] || continue
    want=$(sed -E 's/.*open=//' <<<"$line" | tr ' ' '\n' | grep . |
      while read -r k; do awk -v k="$k" '$1 == k {print $2}' <<<"$pci_of"; done | sort | tr '\n' ' ')
    got=$(sed -E 's/.*pci=([^ ]*).*/\1/' <<<"$line" | tr ',' '\n' | grep . | sort | tr '\n' ' ')
    if [[ $mode == exact ]]; then
      [[ -n "$got" && "$got" == "$want" ]] || problems+=("${line%% pci*}: names $got, may open $want")
    else
      [[ -n "$got" && -z "$(comm -23 <(tr ' ' '\n' <<<"$got" | grep .) <(tr ' ' '\n' <<<"$want" | grep .))" ]] ||
        problems+=("${line%% pci*}: names $got, may open only $want")
    fi
  done <<<"$out"
  if ((${#problems[@]} == 0)); then ok "$name"; else bad "$name" "${problems[@]}" "$out"; fi
}
check_step "ConstrainDevices, -n2 --gpus=2: each task names one of the step's GPUs" within -n2 --gpus=2
check_step "ConstrainDevices, --gpu-bind=map_gpu:1,0: each task names Slurm's GPU, the one it may open" \
  exact -n2 --gpus=2 --gpu-bind=map_gpu:1,0
check_step "ConstrainDevices, --gpus-per-task=2 order=cpu: each task names its own two GPUs" \
  exact -n2 --gpus=4 --gpus-per-task=2 --gpu-bind-auto=order=cpu

# Slurm's per-task GPUs under ConstrainDevices: each task may open its own GPU alone (the probe's
# open= list), and the plugin says once what that costs and what to do; where gpubind shares the
# step's GPUs out, every task may open all of them and nothing is said.
isolation="warning: Slurm gave each task a device cgroup of its own GPUs"
out=$(timeout 60 srun -N1 -n2 --gpus-per-task=1 --gpu-bind-auto bash -c "$probe" 2>&1)
[[ $(grep -c "$isolation" <<<"$out") -eq 1 && "$out" == *"allow-task-sharing"* &&
  $(grep -cE '^task [01] .*open=[0-9] $' <<<"$out") -eq 2 ]] &&
  ok "ConstrainDevices, --gpus-per-task=1: each task opens its own GPU alone, said once with allow-task-sharing" ||
  bad "per-task device cgroups" "$out"
out=$(timeout 60 srun -N1 -n2 --gpus=2 --gpu-bind-auto bash -c "$probe" 2>&1)
[[ "$out" != *"$isolation"* && $(grep -cE '^task [01] .*open=[0-9] [0-9] $' <<<"$out") -eq 2 ]] &&
  ok "ConstrainDevices, --gpus=2: every task may open the step's GPUs; nothing said" ||
  bad "step-wide device cgroup" "$out"

# Another job holds GPUs 0 and 1: this step's GPUs are 2 and 3, which its tasks see as 0 and 1.
sbatch -N1 -n1 --gpus=2 -o /dev/null --wrap "sleep 60" >/dev/null
for _ in $(seq 100); do [[ "$(squeue -h -t R | wc -l)" -ge 1 ]] && break; sleep 0.1; done
check_step "ConstrainDevices on a shared node: the step's GPUs 2 and 3, named right" exact -n1 --gpus=2
scancel --quiet --user="$(id -un)"
for _ in $(seq 100); do [[ "$(squeue -h | wc -l)" -eq 0 ]] && break; sleep 0.1; done

e2e_no_node_drained
e2e_finish
