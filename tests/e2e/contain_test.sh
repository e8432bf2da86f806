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

# A job whose namespace Slurm could not make (namespace/tmpfs failing before any plugin runs,
# "container_g_stepd_create" in 24.11, "namespace_g_stepd_create" in 26.05) is Slurm's failure, not
# gpubind's. slurm-root makes slurmd's own namespace so that the kernel numbers every job's after
# it, which the kernel requires; should one still fail, the job is run again (at most 5 times, the
# node resumed) and the count said.
namespace_failures() { grep -cE '(container|namespace)_g_stepd_create' "$dir/log/slurmd-n1.log" || true; }
retried=0
contained() {  # contained FUNCTION: runs it (setting out and rc) until Slurm made the namespace
  local before
  for _ in 1 2 3 4 5; do
    before=$(namespace_failures)
    "$1"
    (($(namespace_failures) == before)) && return
    retried=$((retried + 1))
    scancel --quiet --user="$(id -un)"
    scontrol update nodename=n1 state=resume >/dev/null 2>&1
    for _ in $(seq 100); do [[ "$(sinfo -h -o %t)" == idle ]] && break; sleep 0.1; done
  done
}

# slurmd's own mount namespace (the Slurm root's, for another release): the jobs' are new ones.
slurmd_namespace=$(readlink "/proc/$(cat "$dir/run/slurmd-n1.pid")/ns/mnt")
probe='echo "ns=$(readlink /proc/self/ns/mnt)"; '"$check"' --json'
step() { out=$(timeout 30 srun -n2 --gpus=2 --gpu-bind-auto=verbose bash -c "$probe" 2>&1); rc=$?; }
contained step
namespaces=$(sed -n 's/^ns=//p' <<<"$out" | sort -u)
[[ $rc -eq 0 && -n "$namespaces" && "$namespaces" != *$'\n'* && -n "$slurmd_namespace" && "$namespaces" != "$slurmd_namespace" ]] &&
  ok "the tasks run in the job's own mount namespace" || bad "job namespace" "$out"
[[ $(lines_with '\[daemon\]') -eq 2 ]] && ok "  ... and are bound from the daemon's plan" ||
  bad "not planned by the daemon inside the namespace" "$out"
check_tasks "  ... each on its own CPUs and GPU" 2

batch() {
  local jid
  jid=$(sbatch --parsable -n2 --gpus=2 --gpu-bind-auto -o "$dir/batch.out" --wrap "srun bash -c '$probe'")
  for _ in $(seq 300); do [[ -z "$(squeue -h -j "$jid" 2>/dev/null)" ]] && break; sleep 0.1; done
  out=$(cat "$dir/batch.out" 2>&1)
}
contained batch
check_tasks "sbatch --gpu-bind-auto inside the namespace: the steps are bound" 2

((retried == 0)) || echo "note: Slurm could not make a job's namespace $retried time(s); those jobs were run again"
e2e_no_node_drained
e2e_finish
