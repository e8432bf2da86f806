#!/usr/bin/env bash
# On a machine with real GPUs: a Slurm cluster whose gres are the machine's own GPU device files,
# gpubindd discovering the node live, and in every task of several step shapes the vendor
# driver's own answer to "which GPU do I see" (tests/support/driver_gpu_probe.cpp: CUDA's
# cuDeviceGetPCIBusId, or HIP's) compared with the GPU gpubind planned for that task, and the
# task's CPU affinity with the CPUs it planned. Then the same with the daemon stopped (the
# fallback discovers the node inside slurmstepd). Skipped where there are no GPU device files or
# no driver answers. GPUBIND_E2E_SLURM_DIR=DIR runs Slurm from a slurm-bundle folder (as it does
# for every e2e test). Also check-node and explain against the live node.
# Usage: real_gpus_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
probe=$build/bin/gpubind_driver_probe

if ! compgen -G '/dev/nvidia[0-9]*' >/dev/null && ! compgen -G '/dev/dri/renderD*' >/dev/null; then
  echo "no GPU device files (/dev/nvidia[0-9]*, /dev/dri/renderD*): skipped"
  exit 77
fi
outside=$("$probe" 2>&1)
if [[ "$outside" != *'"driver_sees":["'* ]]; then
  echo "no GPU driver answers here ($outside): skipped"
  exit 77
fi
echo "the driver, outside Slurm: $outside"

e2e_start_cluster real-gpus 1 --real-gpus
socket=$dir/run/gpubind.sock

# The daemon's live topology holds the GPUs the driver enumerates, by bus id, and no other.
topology=$("$ctl" --socket "$socket" topology --json 2>&1)
daemon_ids=$(grep -oE '"pci":"[0-9a-f:.]+"' <<<"$topology" | cut -d'"' -f4 | sort | tr '\n' ' ')
driver_ids=$(grep -oE '"driver_sees":\[[^]]*\]' <<<"$outside" | grep -oE '[0-9a-f]+:[0-9a-f:.]+' |
  while read -r id; do printf '%04x:%s\n' "$((16#${id%%:*}))" "${id#*:}"; done | sort | tr '\n' ' ')
ngpus=$(wc -w <<<"$driver_ids")
[[ -n "$daemon_ids" && "$daemon_ids" == "$driver_ids" ]] &&
  ok "live topology: the driver's $ngpus GPU(s) by bus id ($daemon_ids)" ||
  bad "live topology GPUs" "daemon: $daemon_ids" "driver: $driver_ids" "$topology"

# Every task line of a step: the driver sees exactly GPUBIND_GPU_PCI (as a set, bus ids
# normalised), and the task runs on exactly GPUBIND_CPUS.
check_tasks() {  # check_tasks NTASKS OUTPUT
  python3 - "$1" "$2" <<'PY'
import json, sys
want, lines = int(sys.argv[1]), [l for l in sys.argv[2].splitlines() if l.startswith("{")]
def norm(bus):
    domain, rest = bus.lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"
def cpus(text):
    out = set()
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out
faults, ranks = [], set()
for line in lines:
    t = json.loads(line)
    ranks.add(t["rank"])
    planned = {norm(b) for b in t["GPUBIND_GPU_PCI"].split(",") if b}
    seen = {norm(b) for b in t["driver_sees"]}
    if t["error"]: faults.append(f"rank {t['rank']}: driver error {t['error']}")
    if not planned: faults.append(f"rank {t['rank']}: no GPUBIND_GPU_PCI")
    if seen != planned: faults.append(f"rank {t['rank']}: driver sees {sorted(seen)}, planned {sorted(planned)}")
    if cpus(t["affinity"]) != cpus(t["GPUBIND_CPUS"]):
        faults.append(f"rank {t['rank']}: runs on {t['affinity']}, planned {t['GPUBIND_CPUS']}")
if len(ranks) != want: faults.append(f"{len(ranks)} task lines, {want} tasks")
print("\n".join(faults))
sys.exit(1 if faults else 0)
PY
}

cpus=$(nproc)
shapes=("-n1 --gpus=1" "-n2 --gpus=1" "-n$((cpus < 8 ? cpus : 8)) --gpus=1")
((cpus >= 8)) && shapes+=("-n4 -c2 --gpus=1")
((ngpus > 1)) && shapes+=("-n$ngpus --gpus=$ngpus" "-n$((2 * ngpus)) --gpus=$ngpus" "-n1 --gpus=$ngpus")
step() {  # step LABEL SRUN_OPTIONS...
  local label=$1 ntasks out faults
  shift
  ntasks=$(sed -nE 's/.*-n([0-9]+).*/\1/p' <<<"$*")
  # shellcheck disable=SC2086
  out=$(timeout 120 srun -N1 $* --gpu-bind-auto "$probe" 2>&1)
  if faults=$(check_tasks "$ntasks" "$out"); then
    ok "$label srun $*: each of $ntasks task(s) sees exactly its planned GPU and runs on its planned CPUs"
  else
    bad "$label srun $*" "$faults" "$out"
  fi
}
for shape in "${shapes[@]}"; do step daemon "$shape"; done

# gpubindd discovered the node without initialising a GPU runtime: no GPU device open.
daemon_pid=$(cat "$dir/run/gpubindd.pid")
open_gpus=$(ls -l "/proc/$daemon_pid/fd" 2>/dev/null | grep -cE '/dev/(nvidia|dri|kfd)' || true)
[[ "$open_gpus" -eq 0 ]] && ok "gpubindd holds no GPU device open" ||
  bad "gpubindd holds $open_gpus GPU device descriptor(s)" "$(ls -l "/proc/$daemon_pid/fd")"
echo "gpubindd: $(awk '/^VmRSS|^Threads/ {printf "%s %s %s  ", $1, $2, $3}' "/proc/$daemon_pid/status")"

# The operator tools on the live node: check-node passes with a policy expecting the driver's
# GPU count and names the fault when it expects one more; explain from the daemon agrees with
# the daemon's own plan (it checks that itself) and gives each task's GPU a reason.
printf 'expect { gpu_count: %d }\n' "$ngpus" >"$dir/expect-ok.conf"
printf 'expect { gpu_count: %d }\n' "$((ngpus + 1))" >"$dir/expect-more.conf"
out=$("$ctl" --socket "$socket" check-node --policy "$dir/expect-ok.conf" 2>&1) &&
  ok "check-node on the live node: $out" || bad "check-node on the live node" "$out"
out=$("$ctl" --socket "$socket" check-node --policy "$dir/expect-more.conf" 2>&1)
rc=$?
[[ $rc -eq 1 && "$out" == *"gpu-count: expected $((ngpus + 1)) GPUs, found $ngpus"* ]] &&
  ok "check-node names a missing GPU" || bad "check-node names a missing GPU (exit $rc)" "$out"
out=$("$ctl" --socket "$socket" explain --ntasks "$ngpus" --json 2>&1)
[[ $? -eq 0 && $(grep -o '"reason":"rank-order"' <<<"$out" | wc -l) -eq $ngpus ]] &&
  ok "explain on the live node: $ngpus task(s), each GPU with its reason" ||
  bad "explain on the live node" "$out"

# The daemon gone, the plugin's fallback plans from its own live discovery: same answers.
"$cluster" daemon stop "$dir"
step fallback "-n2 --gpus=1"
((ngpus > 1)) && step fallback "-n$ngpus --gpus=$ngpus"

e2e_no_node_drained
e2e_finish
