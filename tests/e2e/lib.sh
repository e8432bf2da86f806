# Shared by the end-to-end test scripts: source it after setting $build (the build directory).
# e2e_start_cluster NAME NODES starts a cluster in a fresh /tmp folder ($dir) and stops it on exit;
# ok/bad count results; e2e_finish prints the count and sets the exit status. run, field and
# check_tasks read what a step printed.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster=$here/slurm-cluster
# gpubind's programs: the build's, or under another Slurm release (GPUBIND_E2E_SLURM) that root's
# own build, run inside the root (e2e_start_cluster points these at the cluster's wrappers).
check=$build/bin/gpubind-check
ctl=$build/bin/gpubindctl
gpubindd=$build/bin/gpubindd
runner=$build/bin/gpubind-run
ncpus=$(nproc)  # check_tasks: tasks own disjoint CPUs while they fit
passed=0
failed=0
# Slurm and lstopo from a slurm-bundle folder (a GPU machine without Slurm installed).
[[ -z "${GPUBIND_E2E_SLURM_DIR:-}" ]] || export PATH=$GPUBIND_E2E_SLURM_DIR/bin:$GPUBIND_E2E_SLURM_DIR/sbin:$PATH

ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; shift; printf '     %s\n' "$@" | head -20; failed=$((failed + 1)); }

# Skips the whole script (exit 77, which ctest reports as skipped, with a reason) where a Slurm
# cluster cannot be started.
e2e_require_cluster() {
  if [[ $(id -u) -ne 0 ]]; then echo "e2e tests need root (munged, slurmd): skipped"; exit 77; fi
  local cmd
  if [[ -n "${GPUBIND_E2E_SLURM:-}" ]]; then
    # Another release, from its root (scripts/test --slurm makes it): that root must be there.
    [[ -f "$("$here/slurm-root" path "$GPUBIND_E2E_SLURM")/.gpubind-root" ]] ||
      { echo "no Slurm $GPUBIND_E2E_SLURM root: run scripts/test --slurm $GPUBIND_E2E_SLURM"; exit 1; }
    return 0
  fi
  for cmd in munged slurmctld slurmd srun lstopo-no-graphics; do
    command -v "$cmd" >/dev/null || { echo "$cmd not installed: e2e tests skipped"; exit 77; }
  done
}

e2e_cleanup() {
  # A daemon left stopped (SIGSTOP) by a fault test must be able to stop.
  [[ -f "$dir/run/gpubindd.pid" ]] && kill -CONT "$(cat "$dir/run/gpubindd.pid")" 2>/dev/null
  "$cluster" stop "$dir" >/dev/null 2>&1
  rm -rf "$dir"
}

e2e_start_cluster() {  # e2e_start_cluster NAME NODES [slurm-cluster start options...]
  e2e_require_cluster
  dir=$(mktemp -d "/tmp/gpubind-$1-XXXXXX")
  trap e2e_cleanup EXIT
  eval "$("$cluster" start "$dir" --nodes "$2" --build "$build" "${@:3}")" ||
    { echo "cluster did not start"; exit 1; }
  if [[ -n "${GPUBIND_E2E_SLURM:-}" ]]; then
    check=$dir/bin/gpubind-check
    ctl=$dir/bin/gpubindctl
    gpubindd=$dir/bin/gpubindd
    runner=$dir/bin/gpubind-run
  fi
}

e2e_no_node_drained() {
  local states
  # "plnd" (planned by the backfill scheduler, left on idle nodes after a heterogeneous job until
  # its next pass) is idle too; "comp" (a job's epilog still running) passes within seconds.
  for _ in $(seq 100); do
    states=$(sinfo -h -o '%t' | sed 's/^plnd$/idle/' | sort -u | tr '\n' ' ')
    [[ "$states" == *comp* ]] || break
    sleep 0.1
  done
  [[ "$states" == "idle " ]] && ok "no node drained or down" || bad "node states: $states" "$(sinfo -R)"
}

# run NAME CMD...: runs with a 60 s limit; sets $out (stdout+stderr) and $rc.
run() {
  out=$(timeout 60 "$@" 2>&1)
  rc=$?
}
field() { sed -nE "s/.*\"$1\":\"([^\"]*)\".*/\1/p" <<<"$2"; }
lines_with() { grep -c -- "$1" <<<"$out" || true; }

# check_tasks NAME NTASKS [nogpu]: every JSON line of gpubind-check in $out is bound, owns CPUs
# disjoint from the other tasks of its node while tasks fit the cores, exactly as GPUBIND_CPUS says,
# and (unless nogpu) sees one distinct GPU from its step, named by its bus id in GPUBIND_GPU_PCI,
# with CUDA_VISIBLE_DEVICES renumbered for HIP.
check_tasks() {
  local name=$1 want=$2 gpus=${3:-gpu} json nodes node tasks cpus seen_cpus seen_gpus problems=()
  json=$(grep '^{' <<<"$out")
  [[ $(grep -c . <<<"$json") -eq $want ]] || problems+=("expected $want task lines")
  grep -q '"GPUBIND_BOUND":"1"' <<<"$json" || problems+=("not bound")
  [[ $(grep -c '"GPUBIND_BOUND":"1"' <<<"$json") -eq $want ]] || problems+=("not every task bound")
  nodes=$(sed -nE 's/.*"node":"([^"]*)".*/\1/p' <<<"$json" | sort -u)
  for node in $nodes; do
    tasks=$(grep "\"node\":\"$node\"" <<<"$json")
    seen_cpus=""
    seen_gpus=""
    while read -r line; do
      cpus=$(field cpus "$line")
      [[ -n "$cpus" ]] || problems+=("empty CPU set")
      seen_cpus+="$cpus "
      [[ "$(field GPUBIND_CPUS "$line")" == "$cpus" ]] || problems+=("kernel CPUs are not GPUBIND_CPUS: $line")
      [[ $gpus == nogpu ]] && continue
      [[ "$(field GPUBIND_GPU_PCI "$line")" =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$ ]] ||
        problems+=("no GPU bus id in GPUBIND_GPU_PCI: $line")
      seen_gpus+="$(field ROCR_VISIBLE_DEVICES "$line") "
      [[ -n "$(field ROCR_VISIBLE_DEVICES "$line")" ]] || problems+=("no ROCR_VISIBLE_DEVICES: $line")
      [[ "$(field CUDA_VISIBLE_DEVICES "$line")" == "0" ]] || problems+=("CUDA_VISIBLE_DEVICES not renumbered: $line")
    done <<<"$tasks"
    local count
    count=$(grep -c . <<<"$tasks")
    if ((count <= ncpus)); then
      [[ $(tr ' ' '\n' <<<"$seen_cpus" | grep . | sort | uniq -d | wc -l) -eq 0 ]] ||
        problems+=("tasks of $node share CPUs: $seen_cpus")
    fi
    [[ $(tr ' ' '\n' <<<"$seen_gpus" | grep . | sort | uniq -d | wc -l) -eq 0 ]] ||
      problems+=("tasks of $node share GPUs: $seen_gpus")
  done
  if ((${#problems[@]} == 0)); then ok "$name"; else bad "$name" "${problems[@]}" "$out"; fi
}

e2e_finish() {
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}
