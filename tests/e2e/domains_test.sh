#!/usr/bin/env bash
# A node of several GPU domains (the machine's cores presented as 2 packages, each with its own
# NUMA node, L3, two GPUs and a NIC): a task never gets fewer CPUs than Slurm gave it
# (--cpus-per-gpu), and a task whose allocation leaves it no core in its GPU's domain (a shared
# node) is warned once, with the GPU's domain named in the verbose line.
# Usage: domains_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
if (($(nproc) < 2)); then echo "needs 2 CPUs for 2 domains: skipped"; exit 77; fi
topology=$(mktemp /tmp/gpubind-domains-XXXXXX.xml)
python3 "$(dirname "$0")/make_node_topology.py" "$topology" --split 2 || exit 1
e2e_start_cluster domains 1 --topology "$topology"
trap 'e2e_cleanup; rm -f "$topology"' EXIT
ncpus() { tr ',' '\n' <<<"$1" | awk -F- '{n += ($2 == "" ? 1 : $2 - $1 + 1)} END {print n}'; }

# Slurm gives the step one CPU per GPU: the task gets all of them, not only its GPUs' domain.
out=$(timeout 60 srun -N1 -n1 --gpus=2 --cpus-per-gpu=1 --gpu-bind-auto "$check" --json 2>&1)
cpus=$(field GPUBIND_CPUS "$(grep '^{' <<<"$out")")
[[ $(ncpus "$cpus") -eq 2 ]] && ok "--gpus=2 --cpus-per-gpu=1: the task gets both CPUs Slurm gave it ($cpus)" ||
  bad "--cpus-per-gpu CPUs" "$out"

# Another job holds the first domain's cores (the first half of the CPUs): this step's task has
# its GPU there and its cores in the other domain. One warning says so; the verbose line names the
# GPU's domain.
sbatch -N1 -n1 -c $(($(nproc) / 2)) -o /dev/null --wrap "sleep 60" >/dev/null
for _ in $(seq 100); do [[ "$(squeue -h -t R | wc -l)" -ge 1 ]] && break; sleep 0.1; done
out=$(timeout 60 srun -N1 -n1 --gpus=1 --gpu-bind-auto=verbose "$check" --json 2>&1)
[[ $(grep -c "1 of 1 task has no CPU in its GPU's domain (local task 0: " <<<"$out") -eq 1 &&
  "$out" == *"GPU 0 (0000:40:00.0, L3 0)"* ]] &&
  ok "a task far from its GPU: one warning naming it as the node's local task, and the GPU's domain in the verbose line" ||
  bad "far from the GPU" "$out"
scancel --quiet --user="$(id -un)"
for _ in $(seq 100); do [[ "$(squeue -h | wc -l)" -eq 0 ]] && break; sleep 0.1; done

e2e_no_node_drained
e2e_finish
