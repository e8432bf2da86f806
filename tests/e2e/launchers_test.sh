#!/usr/bin/env bash
# gpubind-run under real launchers from Debian's packages: torchrun (python3-torch), Open MPI's
# mpiexec and MPICH's Hydra mpiexec, each inside a bound Slurm task of the test cluster (the
# workers divide the task) and without Slurm (they divide the shell's CPUs and the node's GPUs).
# Every worker must be bound, own CPUs disjoint from the others' inside what its launcher had, see
# a GPU of its own named by its bus id, and, inside Slurm, get what `srun -n N --gpu-bind-auto`
# would have given local task r. Under another Slurm release (GPUBIND_E2E_SLURM) the launchers,
# gpubind-run and everything else run inside that release's root: its torch, Open MPI and MPICH.
# Usage: launchers_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
# Where the launchers run without Slurm: here, or inside the release's root.
here_cmd=()
if [[ -n "${GPUBIND_E2E_SLURM:-}" ]]; then
  e2e_require_cluster
  here_cmd=("$here/slurm-root" exec "$GPUBIND_E2E_SLURM" --bind "$(cd "$here/../.." && pwd)" --bind "$build" --)
  "${here_cmd[@]}" sh -c 'command -v torchrun && command -v mpiexec.openmpi && command -v mpiexec.hydra' \
    >/dev/null || { echo "Slurm $GPUBIND_E2E_SLURM's root has no launchers (tests/e2e/slurm-root): skipped"; exit 77; }
fi
e2e_start_cluster launchers 1
workers=2  # one CPU each on the smallest test machine

# Debian 12's torch 1.13 on Python 3.11 cannot read torchrun's default --redirects/--tee ("0"):
# stdout goes through a log file and is copied to the console with a "[default<rank>]:" prefix.
# torch_shim/sitecustomize.py stands in for what this machine lacks: a torch built with libuv
# (Debian unstable's 2.14 is not, yet its rendezvous asks for it) and GPUs for --numa-binding.
torchrun_cmd=(env PYTHONPATH="$here/torch_shim${PYTHONPATH:+:$PYTHONPATH}" torchrun --standalone --nproc_per_node "$workers" --redirects 1 --tee 1
  --log_dir "$dir/torchrun" --no_python)
openmpi_cmd=(mpiexec.openmpi --allow-run-as-root --oversubscribe -n "$workers")
hydra_cmd=(mpiexec.hydra -n "$workers")
# Inside an srun task, both MPIs would start their node daemons through Slurm (a step inside the
# step, which waits for the resources the task holds): they are told to start ranks themselves.
openmpi_in_task=("${openmpi_cmd[@]}" --mca ras ^slurm --mca plm isolated)
hydra_in_task=(mpiexec.hydra -launcher fork -rmk user -n "$workers")
# srun gives every task its stdin, and Hydra forwards it to rank 0: a rank that exits before
# reading it can end mpiexec with SIGPIPE before the other rank's output is out. The launchers'
# tasks read nothing, so their stdin is /dev/null.
srun_quiet_stdin=(srun --input=none)
torchrun_in_task=("${torchrun_cmd[@]}")

json_lines() { sed -E 's/^\[[a-z]+[0-9]+\]://' <<<"$out" | grep '^{'; }
cpu_list() { tr ',' '\n' <<<"$1" | awk -F- '{for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c}'; }

# check_workers NAME ALLOWED GPUS: $workers JSON lines, local ranks 0..n-1, each bound as
# GPUBIND_CPUS says, inside ALLOWED, CPUs disjoint, GPUS GPUs each by bus id, none shared, a NIC
# each.
check_workers() {
  local name=$1 allowed=$2 gpus=$3 json line cpus pcis problems=() all_cpus="" all_gpus="" ranks=""
  json=$(json_lines)
  [[ $(grep -c . <<<"$json") -eq $workers ]] || problems+=("expected $workers worker lines")
  while read -r line; do
    [[ -n "$line" ]] || continue
    cpus=$(field cpus "$line")
    ranks+="$(field local_rank "$line") "
    [[ "$(field GPUBIND_BOUND "$line")" == 1 ]] || problems+=("not bound: $line")
    [[ -n "$cpus" && "$(field GPUBIND_CPUS "$line")" == "$cpus" ]] ||
      problems+=("kernel CPUs are not GPUBIND_CPUS: $line")
    [[ -z "$(comm -23 <(cpu_list "$cpus" | sort) <(cpu_list "$allowed" | sort))" ]] ||
      problems+=("CPUs $cpus outside the launcher's $allowed")
    all_cpus+="$(cpu_list "$cpus") "
    pcis=$(field GPUBIND_GPU_PCI "$line" | tr ',' '\n')
    [[ $(grep -cE '^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$' <<<"$pcis") -eq $gpus ]] ||
      problems+=("not $gpus GPU(s) by bus id: $line")
    all_gpus+="$pcis "
    [[ -n "$(field ROCR_VISIBLE_DEVICES "$line")" && -n "$(field GPUBIND_NIC "$line")" ]] ||
      problems+=("no GPU or NIC variable: $line")
  done <<<"$json"
  [[ "$(tr ' ' '\n' <<<"$ranks" | grep . | sort -n | tr '\n' ' ')" == "$(seq -s ' ' 0 $((workers - 1))) " ]] ||
    problems+=("local ranks: $ranks")
  [[ $(tr ' ' '\n' <<<"$all_cpus" | grep . | sort | uniq -d | wc -l) -eq 0 ]] ||
    problems+=("workers share CPUs: $all_cpus")
  [[ $(tr ' ' '\n' <<<"$all_gpus" | grep . | sort | uniq -d | wc -l) -eq 0 ]] ||
    problems+=("workers share GPUs: $all_gpus")
  if ((${#problems[@]} == 0)); then ok "$name"; else bad "$name" "${problems[@]}" "$out"; fi
}

# "local_rank cpus bus-id nic" per worker, sorted: what a plan gave each local rank.
per_rank() {
  json_lines | while read -r line; do
    echo "$(field local_rank "$line") $(field cpus "$line") $(field GPUBIND_GPU_PCI "$line") $(field GPUBIND_NIC "$line")"
  done | sort
}

if ((${#here_cmd[@]} == 0)); then
  command -v torchrun >/dev/null && command -v mpiexec.openmpi >/dev/null &&
    command -v mpiexec.hydra >/dev/null ||
    { echo "torchrun, mpiexec.openmpi and mpiexec.hydra are needed (scripts/install-deps)"; exit 1; }
fi

# The plan srun gives the same shape: the reference for the nested runs.
run srun -N1 -n"$workers" --gpus="$workers" --gpu-bind-auto "$check" --json
reference=$(per_rank)
[[ $(grep -c . <<<"$reference") -eq $workers ]] || bad "srun -n$workers reference" "$out"
run srun -N1 -n1 -c"$workers" --gpus="$workers" --gpu-bind-auto "$check" --json
step_cpus=$(field cpus "$(json_lines)")
shell_cpus=$(field cpus "$("$check" --json)")

node_gpus=4  # slurm-cluster's node
for launcher in torchrun openmpi hydra; do
  declare -n cmd=${launcher}_cmd in_task=${launcher}_in_task
  # Inside a bound Slurm task: one task with the GPUs of all workers.
  run "${srun_quiet_stdin[@]}" -N1 -n1 -c"$workers" --gpus="$workers" --gpu-bind-auto \
    "${in_task[@]}" "$runner" --verbose "$check" --json
  check_workers "$launcher in a bound srun task: one GPU and disjoint CPUs per worker" "$step_cpus" 1
  [[ "$out" == *"[daemon]"* && "$out" == *"by the bus ids gpubind recorded"* ]] &&
    ok "$launcher in srun: planned by the daemon from the task's own GPUs" || bad "$launcher source" "$out"
  [[ "$(per_rank)" == "$reference" ]] &&
    ok "$launcher in srun: each worker gets what srun -n$workers --gpu-bind-auto gives its local rank" ||
    bad "$launcher vs srun" "nested:" "$(per_rank)" "srun:" "$reference" "$out"

  # Without Slurm: the shell's CPUs and every GPU of the node, from the same daemon (plugstack.conf).
  run "${here_cmd[@]}" "${cmd[@]}" "$runner" --verbose "$check" --json
  check_workers "$launcher without Slurm: an equal share of the node per worker" "$shell_cpus" \
    $((node_gpus / workers))
  [[ "$out" == *"[daemon]"* ]] && ok "$launcher without Slurm: planned by the daemon" || bad "$launcher no-Slurm source" "$out"
done

# torchrun --numa-binding (PyTorch 2.9 and later) binds each worker itself, next to the GPU its
# local rank numbers (two fake GPUs on NUMA node 0 here), under numactl, with nothing in the
# worker's environment to say so. gpubind-run finds it on torchrun's command line and keeps it, as
# the plugin keeps an explicit --cpu-bind: the workers plan over the launcher's CPUs, keep
# torchrun's, and get gpubind's GPU and NIC variables.
numa0_cpus=$(cat /sys/devices/system/node/node0/cpulist 2>/dev/null || echo "$shell_cpus")
within() { comm -12 <(cpu_list "$1" | sort) <(cpu_list "$2" | sort) | sort -n | paste -sd, -; }
as_list() { cpu_list "$1" | sort -n | paste -sd, -; }
# check_kept NAME EXPECTED GPUS: $workers JSON lines, each on exactly the CPUs EXPECTED (torchrun's
# `node` binding: its GPU's NUMA node within the launcher's CPUs), GPUBIND_CPUS saying so, GPUS
# GPUs of its own by bus id and a NIC.
check_kept() {
  local name=$1 expected=$2 gpus=$3 json line problems=() all_gpus=""
  json=$(json_lines)
  [[ $(grep -c . <<<"$json") -eq $workers ]] || problems+=("expected $workers worker lines")
  while read -r line; do
    [[ -n "$line" ]] || continue
    [[ "$(as_list "$(field cpus "$line")")" == "$expected" ]] || problems+=("not on torchrun's CPUs $expected: $line")
    [[ "$(field GPUBIND_CPUS "$line")" == "$(field cpus "$line")" ]] || problems+=("GPUBIND_CPUS is not the CPUs kept: $line")
    [[ $(field GPUBIND_GPU_PCI "$line" | tr ',' '\n' | grep -c .) -eq $gpus && -n "$(field GPUBIND_NIC "$line")" ]] ||
      problems+=("not $gpus GPU(s) and a NIC: $line")
    all_gpus+="$(field GPUBIND_GPU_PCI "$line" | tr ',' ' ') "
  done <<<"$json"
  [[ $(tr ' ' '\n' <<<"$all_gpus" | grep . | sort | uniq -d | wc -l) -eq 0 ]] || problems+=("workers share GPUs: $all_gpus")
  if ((${#problems[@]} == 0)); then ok "$name"; else bad "$name" "${problems[@]}" "$out"; fi
}
kept_said() {  # kept_said MODE: one line for the node, each worker's binding line marked
  [[ $(lines_with "torchrun --numa-binding=$1 given: workers keep torchrun's CPU binding") -eq 1 &&
    $(lines_with "(CPUs bound by torchrun)") -eq $workers ]]
}
fake_gpus=(env GPUBIND_TEST_TORCH_GPU_NUMA=0,0)
if "${here_cmd[@]}" torchrun --help 2>/dev/null | grep -q -- --numa-binding; then
  # Without gpubind-run: torchrun binds the workers within the CPUs the plugin gave the task.
  run srun -N1 -n1 -c"$workers" --gpus="$workers" --gpu-bind-auto "${fake_gpus[@]}" \
    "${torchrun_in_task[@]}" --numa-binding=node "$check" --json
  [[ "$(json_lines | sed -nE 's/.*"cpus":"([^"]*)".*/\1/p' | while read -r c; do as_list "$c"; done | sort -u)" == \
    "$(within "$numa0_cpus" "$step_cpus")" && $(json_lines | grep -c '"GPUBIND_BOUND":"1"') -eq $workers ]] &&
    ok "torchrun --numa-binding in a bound task: each worker on its GPU's NUMA node within the task" ||
    bad "torchrun --numa-binding in a bound task" "$out"

  run srun -N1 -n1 -c"$workers" --gpus="$workers" --gpu-bind-auto "${fake_gpus[@]}" \
    "${torchrun_in_task[@]}" --numa-binding=node "$runner" --verbose "$check" --json
  check_kept "torchrun --numa-binding=node, gpubind-run in a bound task: torchrun's CPUs, a GPU each" \
    "$(within "$numa0_cpus" "$step_cpus")" 1
  kept_said node && [[ $(lines_with "CPUs $step_cpus (") -eq $workers ]] &&
    ok "torchrun --numa-binding=node in srun: kept and said, planned over the task's CPUs" ||
    bad "torchrun --numa-binding=node in srun: what gpubind-run says" "$out"

  # exclusive narrows each worker to its own cores: the workers still plan over the agent's.
  run "${here_cmd[@]}" "${fake_gpus[@]}" "${torchrun_cmd[@]}" --numa-binding=exclusive \
    "$runner" --verbose "$check" --json
  check_workers "torchrun --numa-binding=exclusive without Slurm: torchrun's own cores per worker" \
    "$(within "$numa0_cpus" "$shell_cpus")" $((node_gpus / workers))
  kept_said exclusive && [[ $(lines_with "CPUs $shell_cpus (") -eq $workers ]] &&
    ok "torchrun --numa-binding=exclusive: kept and said, planned over the launcher's CPUs" ||
    bad "torchrun --numa-binding=exclusive: what gpubind-run says" "$out"

  # A site that forces gpubind's binding (override_explicit=yes) replaces torchrun's, and says so.
  "$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback override_explicit=yes
  run "${here_cmd[@]}" "${fake_gpus[@]}" "${torchrun_cmd[@]}" --numa-binding=node \
    "$runner" --verbose "$check" --json
  check_workers "torchrun --numa-binding=node, override_explicit=yes: gpubind's share per worker" \
    "$shell_cpus" $((node_gpus / workers))
  [[ $(lines_with "override_explicit=yes: gpubind's binding replaces torchrun's") -eq 1 &&
    $(lines_with "(replaces torchrun's CPU binding)") -eq $workers ]] &&
    ok "torchrun --numa-binding=node, override_explicit=yes: replaced and said" || bad "override_explicit" "$out"
  "$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback
else
  echo "skipped: this torchrun has no --numa-binding (PyTorch 2.9 and later)"
fi

# Two bound tasks of two GPUs each, two workers in each: the second task's GPUs are not the first
# of the step (SLURM_STEP_GPUS lists all four), so only the bus ids gpubind recorded name them.
run "${srun_quiet_stdin[@]}" -N1 -n2 --gpus=4 --gpu-bind-auto "${hydra_in_task[@]}" "$runner" --verbose "$check" --json
gpus_seen=$(json_lines | sed -nE 's/.*"GPUBIND_GPU_PCI":"([^"]*)".*/\1/p' | sort)
[[ $(grep -c . <<<"$gpus_seen") -eq 4 && $(sort -u <<<"$gpus_seen" | grep -c .) -eq 4 &&
  $(grep -c , <<<"$gpus_seen") -eq 0 && $(lines_with "by the bus ids gpubind recorded") -eq 4 &&
  "$out" != *"cannot tell which"* ]] &&
  ok "workers in each of two bound tasks split that task's own GPUs: four workers, four GPUs" ||
  bad "two tasks, two workers each" "$out"

# Open MPI binds each rank to a core by default: the workers still divide what mpiexec had.
run "${here_cmd[@]}" "${openmpi_cmd[@]}" --bind-to core "$runner" --verbose "$check" --json
[[ "$out" == *"the launcher's: it bound this worker to"* ]] &&
  check_workers "Open MPI --bind-to core: the workers divide mpiexec's CPUs" "$shell_cpus" \
    $((node_gpus / workers)) ||
  bad "Open MPI --bind-to core" "$out"

# The daemon absent: each worker plans in-process with the site's policy, and says so once.
run "${here_cmd[@]}" env LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 "$runner" --socket "$dir/run/absent.sock" --verbose "$check" --json
[[ $rc -eq 0 && "$out" == *"[fallback]"* && "$out" == *"planned in-process instead"* &&
  "$(json_lines)" == *'"GPUBIND_BOUND":"1"'* ]] &&
  ok "no daemon: the worker plans in-process and says so" || bad "fallback" "$out"

# A Slurm task the plugin bound already: gpubind-run keeps its binding.
run srun -N1 -n"$workers" --gpus="$workers" --gpu-bind-auto "$runner" --verbose "$check" --json
[[ "$(per_rank)" == "$reference" && $(lines_with "bound by gpubind's plugin already") -eq $workers ]] &&
  ok "gpubind-run as an srun task the plugin bound keeps that binding" || bad "already bound" "$out"

# Usage errors: no launcher, no command.
run "${here_cmd[@]}" env -u SLURM_LOCALID "$runner" true
[[ $rc -eq 2 && "$out" == *"no launcher says which local rank"* ]] && ok "no launcher: exit 2, named" ||
  bad "no launcher" "rc=$rc" "$out"
run "${here_cmd[@]}" env LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "$runner" /nonexistent/program
[[ $rc -eq 127 && "$out" == *"cannot run '/nonexistent/program'"* ]] && ok "a missing COMMAND: exit 127, named" ||
  bad "missing command" "rc=$rc" "$out"

e2e_no_node_drained
e2e_finish
