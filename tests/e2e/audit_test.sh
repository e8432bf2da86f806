#!/usr/bin/env bash
# gpubindctl audit on the test cluster, a node of two GPU domains (a CPU each): a step gpubind
# bound reads as planned; a task that moves a process to other CPUs after launch is re-pinned,
# naming it; a step without gpubind whose CPU is the other domain's is far from its GPU; two
# steps on one CPU overlap; an unprivileged user sees their own jobs and nothing of another's.
# With --cgroup, the same under task/cgroup (ConstrainCores, ConstrainDevices).
# Usage: audit_test.sh BUILD_DIR [--cgroup]
set -uo pipefail
build=$(cd "$1" && pwd)
cgroup=()
[[ ${2:-} == --cgroup ]] && cgroup=(--cgroup)
source "$(dirname "$0")/lib.sh"
if (($(nproc) < 2)); then echo "needs 2 CPUs for 2 domains: skipped"; exit 77; fi
if ((${#cgroup[@]})) && [[ ! -d /sys/fs/cgroup/devices ]]; then
  echo "no cgroup v1 devices controller: skipped"
  exit 77
fi
topology=$(mktemp /tmp/gpubind-audit-XXXXXX.xml)
python3 "$(dirname "$0")/make_node_topology.py" "$topology" --split 2 || exit 1
chmod 644 "$topology"  # the unprivileged user reads it too
records=$(mktemp -d /tmp/gpubind-audit-records-XXXXXX)
rmdir "$records"  # audit --record makes it, root's alone
e2e_start_cluster audit 1 --topology "$topology" "${cgroup[@]}"
trap 'e2e_cleanup; rm -rf "$topology" "$records"' EXIT
audit=("$ctl" audit --policy "$dir/etc/policy.conf")

# submit SBATCH_ARGS... -- SCRIPT: a job whose steps run SCRIPT; waits until its step 0 shows
# in the audit and prints the job id.
submit() {
  local args=() job
  while [[ $1 != -- ]]; do args+=("$1"); shift; done
  shift
  job=$(sbatch --parsable -o /dev/null "${args[@]}" --wrap "$1")
  for _ in $(seq 200); do
    "${audit[@]}" --job "$job" | grep -q "step 0:" && break
    sleep 0.1
  done
  echo "$job"
}
# until_audit JOB PATTERN: the audit of JOB (per task) once it matches PATTERN (grep -E), or
# after 20 s as it then is: tasks start one by one, each first a fork of slurmstepd's.
until_audit() {
  for _ in $(seq 200); do
    out=$("${audit[@]}" --job "$1" --tasks)
    grep -qE "$2" <<<"$out" && return
    sleep 0.1
  done
}
cancel_all() {
  scancel --quiet --user=root
  runuser -u nobody -- scancel --quiet --user=nobody 2>/dev/null
  for _ in $(seq 100); do [[ "$(squeue -h | wc -l)" -eq 0 ]] && break; sleep 0.1; done
}

job=$(submit -n2 --gpus=2 -- "srun --gpu-bind-auto sleep 60")
until_audit "$job" "step 0: 2 tasks: 2 as-planned"
[[ "$out" == *"job $job step 0: 2 tasks: 2 as-planned"* && $(grep -c "as-planned: every thread on its planned CPUs" <<<"$out") -eq 2 ]] &&
  ok "a bound step: 2 tasks as planned" || bad "bound step" "$out"
json=$("${audit[@]}" --job "$job" --json --tasks)
python3 -c '
import json, sys
steps = [s for s in json.load(sys.stdin)["steps"] if s["step"] == "0"]
assert steps and steps[0]["verdicts"] == {"as-planned": 2}, steps
assert all(t["gpus"] and t["threads"] >= 1 for t in steps[0]["task_list"]), steps' <<<"$json" &&
  ok "--json: the step's verdicts and each task's GPUs and threads" || bad "audit --json" "$json"
# The metrics: tasks by verdict (every verdict present), on the daemon's topology, valid for
# Prometheus. They count every task on the node, other clusters' on this machine too: the counts
# are those of the whole node's audit, read before and after them with nothing changed between.
node_verdicts() { "${audit[@]}" --json | python3 -c '
import collections, json, sys
total = collections.Counter()
for step in json.load(sys.stdin)["steps"]: total.update(step["verdicts"])
print(" ".join(f"{v}={total[v]}" for v in ("as-planned", "unbound-far")))'; }
for _ in $(seq 20); do
  before=$(node_verdicts)
  metrics=$("$ctl" --socket "$dir/run/gpubind.sock" metrics --audit)
  [[ "$(node_verdicts)" == "$before" ]] && break
done
checked=$(promtool check metrics <<<"$metrics" 2>&1)
planned=${before#as-planned=} planned=${planned%% *}
[[ "$planned" -ge 2 && "$metrics" == *"gpubind_audit_tasks{verdict=\"as-planned\"} $planned"* &&
  "$metrics" == *"gpubind_audit_tasks{verdict=\"unbound-far\"} ${before##*unbound-far=}"* &&
  "$metrics" == *"gpubind_audit_up 1"* && "$metrics" == *"gpubind_daemon_up 1"* && -z "$checked" ]] &&
  ok "metrics --audit: tasks by verdict, and promtool check metrics passes" ||
  bad "metrics --audit (the node's audit: $before)" "$metrics" "promtool: $checked"
# The record kept per job (root only, in a folder nobody else may enter).
"$ctl" --socket "$dir/run/gpubind.sock" audit --record "$records"
[[ $? -eq 0 && "$(stat -c %a "$records")" == 700 && "$(cat "$records/$job")" == "n1: step 0: 2 tasks: 2 as-planned"* ]] &&
  ok "audit --record: the job's verdicts on this node, in a folder of root's alone" ||
  bad "audit --record" "$(ls -la "$records" 2>&1)" "$(cat "$records/$job" 2>&1)"
if [[ -z "${GPUBIND_E2E_SLURM:-}" ]]; then
  out=$(cd /tmp && runuser -u nobody -- "$ctl" audit --record /tmp/x --policy "$dir/etc/policy.conf" 2>&1)
  [[ $? -ne 0 && "$out" == *"root only"* ]] && ok "audit --record: refused to anyone but root" ||
    bad "audit --record as a user" "$out"
fi
cancel_all

# Rank 0 runs two threads, one of which moves itself onto both CPUs after launch (the step's:
# under ConstrainCores a task cannot leave its step's CPUs, only its own plan); the main thread
# stays where gpubind bound it. (Python 3.13 and later give the thread's own name to the
# kernel, earlier ones leave it python3's.)
cat >"$dir/repin.py" <<'PY'
import os, sys, threading, time
def mover():
    os.sched_setaffinity(0, {0, 1})  # this thread alone
    time.sleep(60)
if os.environ.get("SLURM_PROCID") == "0":
    threading.Thread(target=mover, name="mover", daemon=True).start()
time.sleep(60)
PY
chmod 644 "$dir/repin.py"
job=$(submit -n2 --gpus=2 -- "srun --gpu-bind-auto /usr/bin/python3 $dir/repin.py")
until_audit "$job" "step 0: 2 tasks: 1 as-planned, 1 re-pinned"
[[ "$out" == *"job $job step 0: 2 tasks: 1 as-planned, 1 re-pinned"* && "$out" =~ rank\ 0\ .*thread\ [0-9]+\ \((python3|mover)\)\ on\ CPUs\ 0-1 ]] &&
  ok "a thread that moved itself to other CPUs after launch: re-pinned, naming it" || bad "re-pinned" "$out"
out=$("$ctl" explain --job "$job" --policy "$dir/etc/policy.conf" | sed -n '/rank 0 /,/verdict/p')
planned=$(sed -nE 's/.*planned: CPUs ([0-9,-]+), GPUs.*/\1/p' <<<"$out")
[[ -n "$planned" && "$out" == *"now:     "*"0-1 (1 thread)"* && "$out" == *"$planned (1 thread"* &&
  "$out" == *"verdict: re-pinned"* ]] &&
  ok "explain --job: each task's plan (CPUs $planned) beside what its threads run on now" ||
  bad "explain --job" "$out"
cancel_all

# Another job holds the first domain's CPU: this job's GPU 0 is there, its step on the other.
sbatch -n1 -o /dev/null --wrap "sleep 60" >/dev/null
job=$(submit -n1 --gpus=1 -- "srun sleep 60")
until_audit "$job" "step 0: 1 task: 1 unbound-far"
[[ "$out" == *"job $job step 0: 1 task: 1 unbound-far"* && "$out" == *"none of its CPUs is next to its GPU"* ]] &&
  ok "a step without gpubind off its GPU's domain: unbound-far" || bad "unbound far" "$out"
cancel_all

job=$(submit -n1 --gpus=1 -- "srun --overlap sleep 60 & srun --overlap sleep 60 & wait")
until_audit "$job" "step 1: 1 task: 1 unbound-overlapping"
[[ $(grep -c "1 unbound-overlapping" <<<"$out") -eq 2 && "$out" == *"shares cores with job $job step"* ]] &&
  ok "two steps on one CPU: both overlapping, each naming the other" || bad "overlapping" "$out"

# Root's job runs; nobody sees nothing of it, then their own job alone. (A release's root runs
# its commands through wrappers that need root: the host's Slurm only.)
if [[ -n "${GPUBIND_E2E_SLURM:-}" ]]; then
  echo "skipped: an unprivileged user's view (the host's Slurm only)"
  cancel_all
  e2e_no_node_drained
  e2e_finish
  exit
fi
# Other clusters on this machine (tests run side by side) may run steps of root's and nobody's
# own: the checks name this cluster's jobs, never count what the node runs.
# seen JOB TEXT: whether the audit TEXT shows any step of JOB.
seen() { grep -q "job $1 step" <<<"$2"; }
out=$(cd /tmp && runuser -u nobody -- "${audit[@]}")
json=$(cd /tmp && runuser -u nobody -- "${audit[@]}" --json)
[[ "$json" == *'"all_users":false'* ]] && ! seen "$job" "$out" && seen "$job" "$("${audit[@]}")" &&
  ok "an unprivileged user sees nothing of another user's job" || bad "unprivileged, another's job" "$out"
cancel_all
mine=$(cd /tmp && runuser -u nobody -- sbatch --parsable -o /dev/null -n1 --gpus=1 --wrap "srun --gpu-bind-auto sleep 60")
theirs=$(sbatch --parsable -o /dev/null -n1 --wrap "srun sleep 60")
for _ in $(seq 200); do
  all=$("${audit[@]}")
  grep -q "job $mine step 0:" <<<"$all" && grep -q "job $theirs step 0:" <<<"$all" && break
  sleep 0.1
done
out=$(cd /tmp && runuser -u nobody -- "${audit[@]}")
[[ "$out" == *"job $mine step 0: 1 task: 1 as-planned"* ]] && ! seen "$theirs" "$out" && seen "$theirs" "$all" &&
  ok "an unprivileged user sees their own job's step alone; root sees both" || bad "unprivileged, own job" "$out" "root: $all"
cancel_all
e2e_no_node_drained
e2e_finish
