#!/usr/bin/env bash
# A job's --gpu-bind-auto binds every step of the job, including those that do not carry it: a
# step attached from outside (srun --jobid --overlap), and the steps of a heterogeneous batch job
# (sbatch's form and salloc's),
# where the option applies to the component it was given on. srun's own option still wins, and
# binds only its own step even in the job srun allocates for it (also where, without
# PrologFlags=Alloc, its step starts a node's prolog); the job record each node's prolog keeps goes
# when the job ends.
# Usage: job_option_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
e2e_start_cluster job-option 2

bound_count() { grep -c '"GPUBIND_BOUND":"1"' <<<"$out" || true; }
json_count() { grep -c '^{' <<<"$out" || true; }
wait_running() {  # wait_running JOBID
  for _ in $(seq 400); do
    [[ "$(squeue -h -j "$1" -o %t 2>/dev/null)" == R ]] && return 0
    sleep 0.1
  done
  return 1
}
wait_gone() {  # wait_gone JOBID
  for _ in $(seq 400); do
    [[ -z "$(squeue -h -j "$1" -o %t 2>/dev/null)" ]] && return 0
    sleep 0.1
  done
  return 1
}

# --- A step attached from outside the job. ---
jid=$(sbatch --parsable -w n1 -n2 --gpus=2 --gpu-bind-auto -o /dev/null --wrap "sleep 60")
wait_running "$jid" || bad "job $jid did not start" "$(squeue)"
run srun --jobid="$jid" --overlap -n2 "$check" --json
[[ $rc -eq 0 && $(json_count) -eq 2 && $(bound_count) -eq 2 ]] &&
  ok "sbatch --gpu-bind-auto: a step attached with srun --jobid --overlap is bound" ||
  bad "step attached from outside" "$out"
check_tasks "  ... each task on its own CPUs and GPU" 2
[[ -f "$dir/run/jobs/$jid" ]] && ok "the job's option is recorded on its node while it runs" ||
  bad "no job record $dir/run/jobs/$jid" "$(ls -la "$dir/run/jobs" 2>&1)"
run srun --jobid="$jid" --overlap -n1 --gpu-bind-auto=off "$check" --json
[[ $rc -eq 0 && $(json_count) -eq 1 && $(bound_count) -eq 0 ]] &&
  ok "srun's own --gpu-bind-auto=off wins over the job's" || bad "srun's own option" "$out"
scancel "$jid"
wait_gone "$jid"
for _ in $(seq 50); do [[ -e "$dir/run/jobs/$jid" ]] || break; sleep 0.1; done
[[ ! -e "$dir/run/jobs/$jid" ]] && ok "the record goes when the job ends" ||
  bad "job record left after the job" "$(ls -la "$dir/run/jobs")"

jid=$(sbatch --parsable -w n1 -n1 --gpus=1 -o /dev/null --wrap "sleep 60")
wait_running "$jid" || bad "job $jid did not start" "$(squeue)"
run srun --jobid="$jid" --overlap -n1 "$check" --json
[[ $rc -eq 0 && $(json_count) -eq 1 && $(bound_count) -eq 0 &&
  "$(cat "$dir/run/jobs/$jid" 2>&1)" == *not-given* ]] &&
  ok "a job without the option: recorded as not given, a step attached from outside is not bound" ||
  bad "job without the option" "$out"
scancel "$jid"
wait_gone "$jid"

# srun's own option is its step's, also in the job srun allocates for it.
srun -w n1 -n1 --gpus=1 --gpu-bind-auto -J own-step sleep 60 >/dev/null 2>&1 &
for _ in $(seq 400); do
  jid=$(squeue -h -n own-step -t R -o %A 2>/dev/null)
  [[ -n "$jid" ]] && break
  sleep 0.1
done
run srun --jobid="$jid" --overlap -n1 "$check" --json
[[ -n "$jid" && $rc -eq 0 && $(json_count) -eq 1 && $(bound_count) -eq 0 ]] &&
  ok "srun --gpu-bind-auto binds its own step only: a step attached to its job is not bound" ||
  bad "srun's own option and a step attached to its job" "$out"
scancel "$jid"
wait_gone "$jid"
wait

# --- A heterogeneous batch job: the option applies to the component it was given on. ---
# het_job COMPONENT_WITH_OPTION: each component's step prints its JSON line, tagged with it.
het_job() {
  local script=$dir/het-$1.sh opt0="" opt1=""
  [[ $1 == 0 ]] && opt0=" --gpu-bind-auto=verbose"
  [[ $1 == 1 ]] && opt1=" --gpu-bind-auto=verbose"
  cat >"$script" <<EOF
#!/bin/bash
#SBATCH -w n1 -n1 --gpus=1$opt0
#SBATCH hetjob
#SBATCH -w n2 -n1 --gpus=1$opt1
srun --het-group=0 $check --json | sed 's/^/component0 /'
srun --het-group=1 $check --json | sed 's/^/component1 /'
EOF
  local jid
  jid=$(sbatch --parsable -o "$dir/het-$1.out" "$script" 2>&1)
  rc=$?
  wait_gone "${jid%%+*}" || rc=1
  out="$jid"$'\n'$(cat "$dir/het-$1.out" 2>&1)
}
component_bound() { grep "^component$1 {" <<<"$out" | grep -c '"GPUBIND_BOUND":"1"' || true; }
component_lines() { grep -c "^component$1 {" <<<"$out" || true; }
# only_component_bound K NAME: each component's step ran once, and only component K's is bound.
only_component_bound() {
  local other=$((1 - $1))
  [[ $rc -eq 0 && $(component_lines 0) -eq 1 && $(component_lines 1) -eq 1 &&
    $(component_bound "$1") -eq 1 && $(component_bound $other) -eq 0 ]] &&
    ok "$2: component $1's step is bound, component $other's is not" || bad "$2" "$out"
}
het_job 1
only_component_bound 1 "batch hetjob, option on component 1"
het_job 0
only_component_bound 0 "batch hetjob, option on component 0"

# --- The salloc form: salloc's shell holds the last component's option, and srun replays it to
# every step; each component's own record says whether it was given there. ---
salloc_het() {  # salloc_het COMPONENT_WITH_OPTION
  local opt0="" opt1=""
  [[ $1 == 0 ]] && opt0="--gpu-bind-auto=verbose"
  [[ $1 == 1 ]] && opt1="--gpu-bind-auto=verbose"
  out=$(timeout 90 salloc -w n1 -n1 --gpus=1 $opt0 : -w n2 -n1 --gpus=1 $opt1 bash -c \
    "srun --het-group=0 $check --json | sed 's/^/component0 /';
     srun --het-group=1 $check --json | sed 's/^/component1 /'" 2>&1)
  rc=$?
}
salloc_het 1
only_component_bound 1 "salloc A : B --gpu-bind-auto"
salloc_het 0
only_component_bound 0 "salloc A --gpu-bind-auto : B"

e2e_no_node_drained

# --- Without PrologFlags=Alloc a node's prolog runs from the first step there. A step given its
# own option does not record it as the job's: later steps keep the job's option on every node. ---
e2e_cleanup
e2e_start_cluster job-option-no-alloc 2 --no-alloc-prolog
cat >"$dir/first-step-own.sh" <<EOF
#!/bin/bash
#SBATCH -N2 -n2 --gpus-per-node=1 --gpu-bind-auto
srun -N2 -n2 --gpu-bind-auto=off true
srun -N2 -n2 $check --json
EOF
jid=$(sbatch --parsable -o "$dir/first-step-own.out" "$dir/first-step-own.sh")
wait_gone "$jid"
out=$(cat "$dir/first-step-own.out" 2>&1)
[[ $(json_count) -eq 2 && $(bound_count) -eq 2 ]] &&
  ok "no PrologFlags=Alloc, a first step with its own --gpu-bind-auto=off: later steps bound on both nodes" ||
  bad "first step's own option without Alloc" "$out"
e2e_no_node_drained
e2e_finish
