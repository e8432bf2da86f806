#!/usr/bin/env bash
# A node whose slurmd counts each L3 as a socket (SlurmdParameters=l3cache_as_socket, Slurm's
# documented way to hand out cores by GPU domain) binds as one without it: on a node of one
# package with two L3s (a GPU and a NIC under each), Slurm's core numbers of a step still name the
# same cores, so a step holding only the second L3's cores is bound there, and a full step
# gives each task the GPU of its own L3, in both configurations.
# Usage: l3_socket_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
if (($(nproc) < 2)); then echo "needs 2 CPUs for 2 L3s: skipped"; exit 77; fi
topology=$(mktemp /tmp/gpubind-l3-XXXXXX.xml)
python3 "$(dirname "$0")/make_node_topology.py" "$topology" --l3-per-package 2 --gpus 2 --nics 2 ||
  exit 1
trap 'e2e_cleanup; rm -f "$topology"' EXIT
half=$(($(nproc) / 2))
cpu_list() { tr ',' '\n' <<<"$1" | awk -F- '{for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c}' | sort; }

# check_node LABEL: the node's two cases, in the cluster now running.
check_node() {
  local label=$1 sockets json
  sockets=$(scontrol show node n1 | grep -oE 'Sockets=[0-9]+' | head -1)
  # Both tasks: each its own L3's GPU (GPU 0 under L3 0, GPU 1 under L3 1).
  run srun -n2 -c"$half" --gpus=2 --gpu-bind-auto=verbose "$check" --json
  check_tasks "$label ($sockets): -n2 --gpus=2, each task on its own CPUs and GPU" 2
  [[ "$(grep -c 'GPU 0 (0000:40:00.0, L3 0)' <<<"$out")" -eq 1 &&
    "$(grep -c 'GPU 1 (0001:41:00.0, L3 1)' <<<"$out")" -eq 1 &&
    "$(lines_with 'no CPU in its GPU')" -eq 0 ]] &&
    ok "$label: each task's GPU is in its own L3" || bad "$label: GPUs by L3" "$out"
  # Another job holds one L3's cores and a GPU (which, Slurm chooses): this step has the other
  # L3's cores, which Slurm's core numbers must name to gpubind, and the other GPU. The task is
  # bound on the step's CPUs, their L3 said right, and warned exactly when the GPU is elsewhere.
  local jid other cpus cpu_l3 gpu_l3 warned
  jid=$(sbatch --parsable -n1 -c"$half" --gpus=1 -o /dev/null --wrap "sleep 60")
  for _ in $(seq 100); do [[ "$(squeue -h -t R | wc -l)" -ge 1 ]] && break; sleep 0.1; done
  other=$(srun --jobid="$jid" --overlap -n1 grep Cpus_allowed_list /proc/self/status | awk '{print $2}')
  run srun -n1 -c"$half" --gpus=1 --gpu-bind-auto=verbose "$check" --json
  json=$(grep '^{' <<<"$out")
  cpus=$(field GPUBIND_CPUS "$json")
  cpu_l3=$(sed -nE 's/.*cpus [^ ]+ \(L3 ([0-9]+),.*/\1/p' <<<"$out")
  gpu_l3=$(sed -nE 's/.*GPU [0-9]+ \([0-9a-f:.]+, L3 ([0-9]+)\).*/\1/p' <<<"$out")
  warned=$(lines_with 'no CPU in its GPU')
  local first=${cpus%%[,-]*}
  [[ $rc -eq 0 && "$(field GPUBIND_BOUND "$json")" == 1 && -n "$other" && -n "$cpus" &&
    -z "$(comm -12 <(cpu_list "$cpus") <(cpu_list "$other"))" &&
    "$cpu_l3" == "$((first / half))" && -n "$gpu_l3" &&
    $warned -eq $([[ "$gpu_l3" == "$cpu_l3" ]] && echo 0 || echo 1) ]] &&
    ok "$label: a step beside another job is bound on its own cores (L3 $cpu_l3, GPU in L3 $gpu_l3)" ||
    bad "$label: step beside another job" "other job's CPUs: $other" "$out"
  scancel --quiet --user="$(id -un)"
  for _ in $(seq 100); do [[ "$(squeue -h | wc -l)" -eq 0 ]] && break; sleep 0.1; done
  e2e_no_node_drained
}

e2e_start_cluster l3-socket 1 --topology "$topology" --slurmd-topology
trap 'e2e_cleanup; rm -f "$topology"' EXIT
check_node "sockets are packages"
e2e_cleanup
e2e_start_cluster l3-socket 1 --topology "$topology" --l3cache-as-socket
trap 'e2e_cleanup; rm -f "$topology"' EXIT
[[ "$(scontrol show config | grep -i '^SlurmdParameters')" == *l3cache_as_socket* &&
  "$(scontrol show node n1)" == *"Sockets=2"* ]] &&
  ok "l3cache_as_socket: Slurm counts the two L3s as sockets" ||
  bad "l3cache_as_socket not in effect" "$(scontrol show node n1)"
check_node "l3cache_as_socket"
e2e_finish
