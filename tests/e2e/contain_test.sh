#!/usr/bin/env bash
# Jobs in a mount namespace of their own with SPANK hooks inside it, as sites with namespace/tmpfs
# and SlurmdParameters=contain_spank run them (Slurm 24.05 and later): the plugin still reaches
# the daemon's socket and the job records from inside, so every task is bound from the daemon's
# plan.
# Usage: contain_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
[[ -n "${GPUBIND_E2E_SLURM:-}" ]] ||
  { echo "contain_spank is Slurm 24.05+: runs with scripts/test --slurm 24.11 or 26.05"; exit 77; }
e2e_start_cluster contain 1 --contain /dev/shm

# slurmd's own mount namespace (the Slurm root's, for another release): the jobs' are new ones.
slurmd_namespace=$(readlink "/proc/$(cat "$dir/run/slurmd-n1.pid")/ns/mnt")
probe='echo "ns=$(readlink /proc/self/ns/mnt)"; '"$check"' --json'
run srun -n2 --gpus=2 --gpu-bind-auto=verbose bash -c "$probe"
namespaces=$(sed -n 's/^ns=//p' <<<"$out" | sort -u)
[[ $rc -eq 0 && -n "$namespaces" && "$namespaces" != *$'\n'* && -n "$slurmd_namespace" && "$namespaces" != "$slurmd_namespace" ]] &&
  ok "the tasks run in the job's own mount namespace" || bad "job namespace" "$out"
[[ $(lines_with '\[daemon\]') -eq 2 ]] && ok "  ... and are bound from the daemon's plan" ||
  bad "not planned by the daemon inside the namespace" "$out"
check_tasks "  ... each on its own CPUs and GPU" 2

jid=$(sbatch --parsable -n2 --gpus=2 --gpu-bind-auto -o "$dir/batch.out" --wrap "srun bash -c '$probe'")
for _ in $(seq 400); do [[ -z "$(squeue -h -j "$jid" 2>/dev/null)" ]] && break; sleep 0.1; done
out=$(cat "$dir/batch.out" 2>&1)
check_tasks "sbatch --gpu-bind-auto inside the namespace: the steps are bound" 2

e2e_no_node_drained
e2e_finish
