#!/usr/bin/env bash
# The audit's record of a job after it ends, on a real Slurm cluster with accounting (slurmdbd
# on a private MariaDB): the metrics run records each running job's verdicts on its node
# (metrics --audit --record), and the packaged epilog (packaging/epilog/gpubind-audit-epilog, as
# Slurm's Epilog=) puts them into the job's AdminComment, read back with sacct: per node, beside
# what other tools wrote there, and nothing for a job no audit saw. The host's Slurm only (the
# release roots have no slurmdbd).
# Usage: audit_accounting_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
if [[ -n "${GPUBIND_E2E_SLURM:-}" ]]; then echo "skipped: the host's Slurm only (slurmdbd)"; exit 77; fi
for tool in slurmdbd mariadbd sacctmgr; do
  command -v "$tool" >/dev/null || PATH=$PATH:/usr/sbin command -v "$tool" >/dev/null ||
    { echo "skipped: $tool not installed (scripts/install-deps)"; exit 77; }
done
if (($(nproc) < 2)); then echo "needs 2 CPUs for 2 domains: skipped"; exit 77; fi
topology=$(mktemp /tmp/gpubind-acct-XXXXXX.xml)
records=$(mktemp -d /tmp/gpubind-acct-records-XXXXXX)
chmod 700 "$records"
epilog=$(mktemp /tmp/gpubind-acct-epilog-XXXXXX)
trap 'rm -rf "$topology" "$records" "$epilog"' EXIT
python3 "$(dirname "$0")/make_node_topology.py" "$topology" --split 2 || exit 1
e2e_start_cluster acct 2 --topology "$topology" --accounting --epilog "$epilog"
trap 'e2e_cleanup; rm -rf "$topology" "$records" "$epilog"' EXIT
# Slurm's Epilog= as a site would set it: the packaged script, told where the records are (the
# file is read when each job ends).
cat >"$epilog" <<SCRIPT
#!/bin/bash
export GPUBIND_AUDIT_RECORDS=$records GPUBIND_CTL=$ctl PATH=$PATH SLURM_CONF=$SLURM_CONF
exec $(cd "$(dirname "$0")/../.." && pwd)/packaging/epilog/gpubind-audit-epilog
SCRIPT
chmod 755 "$epilog"
record() { "$ctl" --socket "$dir/run/gpubind.sock" metrics --audit --record "$records" >/dev/null; }
# until_step JOB PATTERN: waits (20 s at most) until the audit of JOB matches PATTERN.
until_step() {
  for _ in $(seq 200); do
    "$ctl" audit --policy "$dir/etc/policy.conf" --job "$1" | grep -qE "$2" && return
    sleep 0.1
  done
}
# admin_comment JOB: the job's AdminComment once it ended and its epilogs ran (30 s at most).
admin_comment() {
  local comment=""
  for _ in $(seq 300); do
    comment=$(sacct -n -X -P -j "$1" -o AdminComment 2>/dev/null)
    [[ -n "$comment" && -z "$(squeue -h -j "$1" 2>/dev/null)" && ! -e "$records/$1" ]] && break
    sleep 0.1
  done
  echo "$comment"
}

# A bound step seen by the metrics run, then ended: its verdicts in the job's AdminComment.
job=$(sbatch --parsable -o /dev/null -N1 -n2 --gpus=2 --wrap "srun --gpu-bind-auto sleep 4")
until_step "$job" "step 0: 2 tasks: 2 as-planned"
record
[[ "$(cat "$records/$job" 2>&1)" == *"step 0: 2 tasks: 2 as-planned"* ]] || bad "no record of job $job" "$(ls -la "$records")"
comment=$(admin_comment "$job")
[[ "$comment" =~ ^gpubind\{n[12]:\ step\ 0:\ 2\ tasks:\ 2\ as-planned ]] && [[ ! -e "$records/$job" ]] &&
  ok "a job's verdicts in its AdminComment after it ended: $comment" || bad "AdminComment" "$comment" "$(ls "$records")"

# A re-pinned step that ended before its job: the next reading (the batch step alone) keeps
# the ended step's last line.
job=$(sbatch --parsable -o /dev/null -N1 -n1 --gpus=1 --wrap "srun --gpu-bind-auto bash -c 'sleep 30 & taskset -pc 0-1 \$! >/dev/null; sleep 3; kill %1'; sleep 5")
until_step "$job" "step 0: 1 task: 1 re-pinned"
record
for _ in $(seq 100); do
  "$ctl" audit --policy "$dir/etc/policy.conf" --job "$job" | grep -q "step 0:" || break
  sleep 0.1
done
record
scontrol update job="$job" AdminComment="jobstats:ok"
comment=$(admin_comment "$job")
[[ "$comment" == "jobstats:ok gpubind{n"[12]": step 0: 1 task: 1 re-pinned / step batch: "*"}" ]] &&
  ok "an ended step's last verdict kept, beside another tool's text: $comment" || bad "kept" "$comment"

# Two nodes whose epilogs run together: each node's entry, none lost.
job=$(sbatch --parsable -o /dev/null -N2 -n2 --gpus-per-node=1 --wrap "srun --gpu-bind-auto sleep 4")
until_step "$job" "step 0: 1 task: 1 as-planned.*"
for _ in $(seq 100); do
  [[ $("$ctl" audit --policy "$dir/etc/policy.conf" --job "$job" | grep -c "step 0:") -ge 2 ]] && break
  sleep 0.1
done
record
comment=$(admin_comment "$job")
[[ "$comment" == "gpubind{n1: step 0: 1 task: 1 as-planned"*" | n2: step 0: 1 task: 1 as-planned"*"}" ]] &&
  ok "two nodes' epilogs at once: both entries" || bad "two nodes" "$comment"

# A job no audit saw: nothing written, and the epilog fails nothing.
job=$(sbatch --parsable -o /dev/null -N1 -n1 --wrap "true")
for _ in $(seq 100); do [[ -z "$(squeue -h -j "$job")" ]] && break; sleep 0.1; done
sleep 1
[[ -z "$(sacct -n -X -P -j "$job" -o AdminComment)" ]] &&
  ok "a job no audit saw: no AdminComment" || bad "unaudited job" "$(sacct -n -X -P -j "$job" -o AdminComment)"
e2e_no_node_drained
e2e_finish
