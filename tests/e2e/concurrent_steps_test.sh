#!/usr/bin/env bash
# Many steps launched at once on one node: 50 `srun --overlap -n2 --gpus=2 --gpu-bind-auto`
# steps inside one job, alive together (each waits for all the others: shown by evidence, not by
# sampling, so a busy machine only makes it slower). Each must be planned by gpubindd (no timeout, no
# fallback), bound, its two tasks on disjoint CPUs and distinct GPUs of its allocation, and every
# step must get the same plan (they share one allocation). On a node with 2 CPUs, overlapping
# steps inside one job are the only way to have 50 steps running at once.
# Usage: concurrent_steps_test.sh BUILD_DIR [STEPS]
set -uo pipefail
build=$(cd "$1" && pwd)
steps=${2:-50}
source "$(dirname "$0")/lib.sh"
e2e_start_cluster steps 1
requests() { "$ctl" --socket "$dir/run/gpubind.sock" status --json | sed -nE 's/.*"requests":([0-9]+).*/\1/p'; }

# The job: start every step and wait for all. Each task marks that it is alive, then waits (at most
# 240 s) until every task of every step has marked, and records how many marks it saw: a task
# that saw all of them proves that all steps were alive together, whatever the machine's load.
mkdir -p "$dir/alive"
cat >"$dir/job.sh" <<JOB
#!/bin/bash
for i in \$(seq $steps); do
  srun --overlap -n2 --gpus=2 --gpu-bind-auto=verbose bash -c '$check --json
    touch "$dir/alive/\$SLURM_STEP_ID.\$SLURM_PROCID"
    shopt -s nullglob
    for _ in \$(seq 480); do
      marks=("$dir"/alive/*)
      ((\${#marks[@]} >= $((steps * 2)))) && break
      sleep 0.5
    done
    marks=("$dir"/alive/*)
    echo "tasks alive together: \${#marks[@]}"' >"$dir/step-\$i.out" 2>&1 &
done
wait
JOB
chmod +x "$dir/job.sh"
before=$(requests)
start=$SECONDS
timeout 400 sbatch --wait -N1 -n2 --gpus=2 -o "$dir/job.out" "$dir/job.sh" >/dev/null
rc=$?
elapsed=$((SECONDS - start))
after=$(requests)
[[ $rc -eq 0 ]] && ok "job of $steps steps ended 0 in ${elapsed}s" || bad "job exit $rc" "$(cat "$dir/job.out")"
# The fewest marks any task saw: every step was alive at once when that is all of them.
fewest=$(cat "$dir"/step-*.out | sed -nE 's/^tasks alive together: ([0-9]+)$/\1/p' | sort -n | head -1)
seen=$(cat "$dir"/step-*.out | grep -c '^tasks alive together: ')
((${fewest:-0} == steps * 2 && seen == steps * 2)) &&
  ok "all $steps steps alive at once (every task saw all $((steps * 2)) tasks started)" ||
  bad "steps alive at once: $seen tasks reported, the fewest saw ${fewest:-none} of $((steps * 2))"
((after - before == steps)) && ok "one daemon request per step ($((after - before)))" ||
  bad "daemon requests: $before -> $after"

problems=()
reference=""
for ((i = 1; i <= steps; i++)); do
  out=$(cat "$dir/step-$i.out")
  json=$(grep '^{' <<<"$out")
  [[ $(grep -c '"GPUBIND_BOUND":"1"' <<<"$json") -eq 2 ]] || { problems+=("step $i: not 2 bound tasks"); continue; }
  [[ $(grep -c '\[daemon\]$' <<<"$out") -eq 2 && "$out" != *fallback* && "$out" != *warning* ]] ||
    problems+=("step $i: not planned by the daemon alone: $out")
  cpus=$(sed -nE 's/.*"cpus":"([^"]*)".*/\1/p' <<<"$json" | sort)
  gpus=$(sed -nE 's/.*"ROCR_VISIBLE_DEVICES":"([^"]*)".*/\1/p' <<<"$json" | sort)
  [[ $(uniq -d <<<"$cpus" | grep -c .) -eq 0 && $(grep -c . <<<"$cpus") -eq 2 ]] || problems+=("step $i: tasks share CPUs: $cpus")
  [[ $(uniq -d <<<"$gpus" | grep -c .) -eq 0 && $(grep -c . <<<"$gpus") -eq 2 ]] || problems+=("step $i: tasks share GPUs: $gpus")
  plan=$(grep '^gpubind: ' <<<"$out" | sed -E 's/^gpubind: [^ ]+ //' | sort)
  [[ -z "$reference" ]] && reference=$plan
  [[ "$plan" == "$reference" ]] || problems+=("step $i: plan differs from step 1: $plan")
done
((${#problems[@]} == 0)) && ok "$steps steps: every task bound by the daemon, disjoint CPUs and GPUs, same plan" ||
  bad "step plans" "${problems[@]}"

e2e_no_node_drained
e2e_finish
