#!/usr/bin/env bash
# The step's thread choice on a node with two hardware threads per core (the machine's CPUs,
# presented as cores of two threads): --hint=nomultithread and --threads-per-core=1 give a task
# one thread of its core, as Slurm alone does; without them a task gets both threads; two tasks on
# one two-thread core get a thread each.
# Usage: threads_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
if (($(nproc) % 2)); then echo "needs an even number of CPUs to pair them into cores: skipped"; exit 77; fi
topology=$(mktemp /tmp/gpubind-threads-XXXXXX.xml)
python3 "$(dirname "$0")/make_node_topology.py" "$topology" --threads-per-core 2 || exit 1
e2e_start_cluster threads 1 --topology "$topology"
trap 'e2e_cleanup; rm -f "$topology"' EXIT
ncpus() { tr ',' '\n' <<<"$1" | awk -F- '{n += ($2 == "" ? 1 : $2 - $1 + 1)} END {print n}'; }

# CPU count and OMP_NUM_THREADS of a one-task step with the given srun options.
one_task() {
  local out json
  out=$(timeout 60 srun -N1 -n1 --gpus=1 --gpu-bind-auto "$@" "$check" --json 2>&1)
  json=$(grep '^{' <<<"$out")
  echo "$(ncpus "$(field GPUBIND_CPUS "$json")") $(field OMP_NUM_THREADS "$json")"
}
[[ "$(one_task)" == "2 2" ]] && ok "no thread option: the task gets both threads of its core" ||
  bad "both threads" "$(one_task)"
[[ "$(one_task --hint=nomultithread)" == "1 1" ]] &&
  ok "--hint=nomultithread: one thread, OMP_NUM_THREADS=1" || bad "nomultithread" "$(one_task --hint=nomultithread)"
[[ "$(one_task --threads-per-core=1)" == "1 1" ]] &&
  ok "--threads-per-core=1: one thread" || bad "threads-per-core" "$(one_task --threads-per-core=1)"
[[ "$(one_task --hint=nomultithread --gpu-bind-auto=smt=2)" == "2 2" ]] &&
  ok "the user's smt flag wins over the step's thread choice" || bad "smt flag" "$(one_task --gpu-bind-auto=smt=2)"

# --overcommit: Slurm gives the step one core for both tasks, whatever the machine's size.
out=$(timeout 60 srun -N1 -n2 --overcommit --gpus=2 --gpu-bind-auto "$check" --json 2>&1)
cpus=$(grep '^{' <<<"$out" | sed -nE 's/.*"GPUBIND_CPUS":"([^"]*)".*/\1/p' | sort)
[[ $(grep -c . <<<"$cpus") -eq 2 && $(uniq -d <<<"$cpus" | grep -c .) -eq 0 &&
  $(ncpus "$(head -1 <<<"$cpus")") -eq 1 ]] &&
  ok "two tasks on one two-thread core: a thread each" || bad "two tasks, one core" "$out"

e2e_no_node_drained
e2e_finish
