#!/usr/bin/env bash
# gpubindctl check-node, the node health check: offline, each example site policy passes on its
# site's fixture and fails, naming the fault, on a copy of it with a GPU or a NIC removed; live,
# on a sysfs tree with a NIC down and NUMA balancing on, and against a running gpubindd; the
# shipped HealthCheckProgram wrapper and NHC check on those answers.
# Usage: check_node_test.sh PATH/TO/gpubindctl SOURCE_DIR PATH/TO/gpubindd
set -uo pipefail
ctl=$1
src=$2
daemon=$3
fixtures=$src/tests/fixtures
policies=$src/packaging/policies
tmp=$(mktemp -d)
daemon_pid=""
cleanup() {
  [[ -n "$daemon_pid" ]] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$src/tests/cli/lib.sh"
python=/usr/bin/python3
[[ -x $python ]] || python=python3

# expect NAME WANT_RC PATTERN -- COMMAND...: exit status and a line of output (stdout+stderr).
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want ]]; then
    bad "$name: exit $rc, wanted $want" "$out"
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    bad "$name: output lacks /$pattern/" "$out"
  else
    ok "$name"
  fi
}

# without FIXTURE KIND OUT: the fixture less its last GPU (KIND gpu) or the NIC named KIND.
without() {
  "$python" - "$1" "$2" "$3" <<'EOF'
import sys
import xml.etree.ElementTree as ET
src, kind, out = sys.argv[1:]
tree = ET.parse(src)
parents = {c: p for p in tree.iter() for c in p}
def is_gpu(o):
    # PCI class 03xx (display) or 12xx (processing accelerator: PVC, MI300).
    return o.get("type") == "PCIDev" and o.get("pci_type", "")[:2] in ("03", "12")
def has_os(o, name):
    return any(c.get("type") == "OSDev" and c.get("name") == name for c in o.iter("object"))
if kind == "gpu":
    victims = [o for o in tree.iter("object") if is_gpu(o)][-1:]
else:
    victims = [o for o in tree.iter("object") if o.get("type") == "PCIDev" and has_os(o, kind)]
assert victims, f"nothing to remove for {kind}"
for v in victims:
    parents[v].remove(v)
tree.write(out)
EOF
}

# Offline: each site's policy on its own fixture, then with a GPU and a NIC removed.
# POLICY FIXTURE GPUS NIC_TO_REMOVE PAIRS (whether that NIC's GPUs are left without one: one
# NIC per NUMA node; Aurora and DGX H100 pair by package, which keeps three more).
sites=("lumi-g lumi-g 8 hsn2 1" "frontier lumi-g 8 hsn1 1" "aurora aurora-pvc 6 hsn5 0"
  "perlmutter a100-pcionly 4 hsn0 1" "dgx-h100 dgx-h100 8 ibp156s0 0")
for entry in "${sites[@]}"; do
  read -r policy fixture gpus nic pairs <<<"$entry"
  conf=$policies/$policy.conf
  expect "$policy on $fixture: healthy" 0 "^gpubind: node healthy \($gpus GPUs, [0-9]+ NICs checked, offline\)$" \
    -- "$ctl" check-node --topology "$fixtures/$fixture.xml" --policy "$conf"
  without "$fixtures/$fixture.xml" gpu "$tmp/$fixture-gpu.xml" || bad "$fixture: no copy without a GPU"
  expect "$policy on $fixture less a GPU: gpu-count" 1 \
    "^ERROR: gpubind: gpu-count: expected $gpus GPUs, found $((gpus - 1))$" \
    -- "$ctl" check-node --topology "$tmp/$fixture-gpu.xml" --policy "$conf"
  without "$fixtures/$fixture.xml" "$nic" "$tmp/$fixture-nic.xml" || bad "$fixture: no copy without $nic"
  expect "$policy on $fixture less $nic: nic-count first" 1 "^ERROR: gpubind: nic-count: expected [0-9]+ NICs" \
    -- "$ctl" check-node --topology "$tmp/$fixture-nic.xml" --policy "$conf"
  [[ $(head -1 <<<"$out") == "ERROR: gpubind: nic-count: "* ]] || bad "$policy less $nic: first line" "$out"
  # Where the policy names its NICs, the missing one is named; where it pairs, its GPUs say so.
  if grep -q '^  nics:' "$conf"; then
    grep -qx "ERROR: gpubind: nic-missing: NIC $nic is missing" <<<"$out" &&
      ok "$policy less $nic: named" || bad "$policy less $nic: not named" "$out"
  fi
  if ((pairs)); then
    grep -q "^ERROR: gpubind: gpu-nic-pairing: GPU [0-9]" <<<"$out" &&
      ok "$policy less $nic: its GPUs lose their NIC" || bad "$policy less $nic: no pairing fault" "$out"
  fi
done
expect "--json" 1 '"healthy":false,.*"code":"gpu-count","severity":"error"' \
  -- "$ctl" check-node --topology "$tmp/lumi-g-gpu.xml" --policy "$policies/lumi-g.conf" --json
expect "no expectations: healthy" 0 "node healthy" -- "$ctl" check-node --topology "$fixtures/lumi-g.xml"

# Bad input: exit 2, the field named.
printf 'expect {\n  gpu_count: 8\n  nics: "hsn[0-3"\n}\n' >"$tmp/bad.conf"
expect "bad policy: exit 2" 2 "bad.conf:3: expect.nics\[0\]: 'hsn\[0-3': '\[' without '\]'" \
  -- "$ctl" check-node --topology "$fixtures/lumi-g.xml" --policy "$tmp/bad.conf"
expect "missing policy: exit 2" 2 "policy file '$tmp/none.conf'" \
  -- "$ctl" check-node --topology "$fixtures/lumi-g.xml" --policy "$tmp/none.conf"
expect "missing topology: exit 2" 2 "gpubindctl: check-node: " \
  -- "$ctl" check-node --topology "$tmp/none.xml" --no-daemon
expect "unknown option: exit 2" 2 "check-node: " -- "$ctl" check-node --ntasks 3

# Live, on a LUMI-G sysfs tree: its links and sysctl as written here.
tree=$tmp/lumi
if ! "$python" "$src/tests/fsroot/make_tree.py" --spec "$src/tests/fsroot/specs/lumi-g-mi250x.json" "$tree" >"$tmp/tree.log" 2>&1; then
  bad "make_tree.py" "$(cat "$tmp/tree.log")"
else
  for i in 0 1 2 3; do echo up >"$tree/sys/class/net/hsn$i/operstate"; done
  mkdir -p "$tree/proc/sys/kernel"
  echo 0 >"$tree/proc/sys/kernel/numa_balancing"
  live=(env HWLOC_FSROOT="$tree" "$ctl" check-node --topology live --policy "$policies/lumi-g.conf")
  # A tree has no PCI names: the model is unknown, which is only a warning.
  expect "live tree: healthy" 0 "^gpubind: node healthy \(8 GPUs, 4 NICs checked\)$" -- "${live[@]}" --no-daemon
  echo down >"$tree/sys/class/net/hsn2/operstate"
  echo 1 >"$tree/proc/sys/kernel/numa_balancing"
  expect "live tree: NIC down" 1 "^ERROR: gpubind: nic-down: NIC hsn2 \(0000:d5:00.0\): link not up \(hsn2 down\)$" \
    -- "${live[@]}" --no-daemon
  grep -qx "ERROR: gpubind: numa-balancing: kernel.numa_balancing is 1, the policy wants it off (0)" <<<"$out" &&
    ok "live tree: numa_balancing 1" || bad "live tree: numa_balancing not reported" "$out"
  [[ $(grep -c '^ERROR:' <<<"$out") -eq 2 ]] && ok "live tree: only those two" || bad "live tree: other faults" "$out"
  expect "offline: links and sysctl not read" 0 "node healthy" \
    -- env HWLOC_FSROOT="$tree" "$ctl" check-node --topology "$fixtures/lumi-g.xml" --policy "$policies/lumi-g.conf"
  echo up >"$tree/sys/class/net/hsn2/operstate"
  echo 0 >"$tree/proc/sys/kernel/numa_balancing"
  # The daemon: none on the socket, then one that answers.
  expect "live: no daemon" 1 "^ERROR: gpubind: daemon: gpubindd does not answer: $tmp/gpubind.sock: " \
    -- "${live[@]}" --socket "$tmp/gpubind.sock" --timeout 2000
  "$daemon" --foreground --socket "$tmp/gpubind.sock" --config "$policies/lumi-g.conf" \
    --topology "$fixtures/lumi-g.xml" 2>"$tmp/daemon.log" &
  daemon_pid=$!
  for _ in $(seq 100); do [[ -S "$tmp/gpubind.sock" ]] && break; sleep 0.1; done
  expect "live: the daemon answers" 0 "node healthy" -- "${live[@]}" --socket "$tmp/gpubind.sock"

  # The HealthCheckProgram wrapper and the NHC check on the same answers, with a fake scontrol
  # and sinfo that record what they were asked.
  mkdir -p "$tmp/bin"
  # check-node's own `scontrol show node` (Slurm's node line) gets no answer here: not compared.
  printf '#!/bin/sh\n[ "$1" = show ] && exit 1\necho "$*" >>%s/scontrol.log\n' "$tmp" >"$tmp/bin/scontrol"
  printf '#!/bin/sh\ncat %s/node 2>/dev/null || echo "idle|none"\n' "$tmp" >"$tmp/bin/sinfo"
  chmod +x "$tmp/bin/scontrol" "$tmp/bin/sinfo"
  hc=(env PATH="$tmp/bin:$PATH" HWLOC_FSROOT="$tree" GPUBINDCTL="$ctl" SLURMD_NODENAME=nid001
    "$src/packaging/healthcheck/gpubind-healthcheck" --policy "$policies/lumi-g.conf" --socket "$tmp/gpubind.sock")
  expect "wrapper: healthy node left alone" 0 "node healthy" -- "${hc[@]}"
  [[ ! -e $tmp/scontrol.log ]] && ok "wrapper: no scontrol when healthy" || bad "wrapper: scontrol" "$(cat "$tmp/scontrol.log")"
  echo down >"$tree/sys/class/net/hsn2/operstate"
  expect "wrapper: fault, exit 1" 1 "nic-down" -- "${hc[@]}"
  grep -qx 'update NodeName=nid001 State=DRAIN Reason=gpubind: nic-down: NIC hsn2 (0000:d5:00.0): link not up (hsn2 down)' \
    "$tmp/scontrol.log" && ok "wrapper: drains with the first fault" || bad "wrapper: drain" "$(cat "$tmp/scontrol.log")"
  : >"$tmp/scontrol.log"
  echo "drained|Maintenance: DIMM" >"$tmp/node"
  "${hc[@]}" >/dev/null
  [[ ! -s $tmp/scontrol.log ]] && ok "wrapper: another reason is kept" || bad "wrapper: overwrote" "$(cat "$tmp/scontrol.log")"
  echo "drained|gpubind: nic-down: NIC hsn2 (0000:d5:00.0): link not up (hsn2 down)" >"$tmp/node"
  "${hc[@]}" >/dev/null
  [[ ! -s $tmp/scontrol.log ]] && ok "wrapper: drained already, left alone" || bad "wrapper: drained again" "$(cat "$tmp/scontrol.log")"
  # Slurm 24.11 keeps a resumed node's reason: an idle node with gpubind's old reason is drained again.
  echo "idle|gpubind: nic-down: NIC hsn2 (0000:d5:00.0): link not up (hsn2 down)" >"$tmp/node"
  "${hc[@]}" >/dev/null
  grep -q 'State=DRAIN' "$tmp/scontrol.log" && ok "wrapper: a resumed node with the old reason is drained again" ||
    bad "wrapper: not drained again" "$(cat "$tmp/scontrol.log")"
  : >"$tmp/scontrol.log"
  echo "drained|gpubind: nic-down: NIC hsn2 (0000:d5:00.0): link not up (hsn2 down)" >"$tmp/node"
  echo up >"$tree/sys/class/net/hsn2/operstate"
  expect "wrapper: healthy again" 0 "node healthy" -- "${hc[@]}"
  grep -qx 'update NodeName=nid001 State=RESUME' "$tmp/scontrol.log" &&
    ok "wrapper: resumes what gpubind drained" || bad "wrapper: resume" "$(cat "$tmp/scontrol.log")"
  : >"$tmp/scontrol.log"
  echo "idle|gpubind: nic-down: NIC hsn2 (0000:d5:00.0): link not up (hsn2 down)" >"$tmp/node"
  "${hc[@]}" >/dev/null
  [[ ! -s $tmp/scontrol.log ]] && ok "wrapper: an idle node is not resumed again" || bad "wrapper: resumed idle" "$(cat "$tmp/scontrol.log")"
  echo "drained|Maintenance: DIMM" >"$tmp/node"
  "${hc[@]}" >/dev/null
  [[ ! -s $tmp/scontrol.log ]] && ok "wrapper: never resumes another's drain" || bad "wrapper: resumed" "$(cat "$tmp/scontrol.log")"
  expect "wrapper: bad policy drains too" 1 "bad.conf" \
    -- env PATH="$tmp/bin:$PATH" GPUBINDCTL="$ctl" SLURMD_NODENAME=nid001 \
    "$src/packaging/healthcheck/gpubind-healthcheck" --policy "$tmp/bad.conf" --no-daemon
  rm -f "$tmp/node"

  # NHC: check_gpubind calls die 1 with the first fault.
  nhc() {
    bash -c 'die() { echo "die $1: $2"; }; source "$1"; shift; check_gpubind "$@"' _ \
      "$src/packaging/healthcheck/gpubind.nhc" "$@"
  }
  export HWLOC_FSROOT=$tree GPUBINDCTL=$ctl
  expect "nhc: healthy" 0 "^$" -- nhc --policy "$policies/lumi-g.conf" --no-daemon
  echo down >"$tree/sys/class/net/hsn2/operstate"
  expect "nhc: die 1 with the first fault" 1 "^die 1: gpubind: nic-down: NIC hsn2 " \
    -- nhc --policy "$policies/lumi-g.conf" --no-daemon
  expect "nhc: bad policy" 1 "^die 1: gpubind: check-node failed: check-node: .*bad.conf" \
    -- nhc --policy "$tmp/bad.conf" --no-daemon
  unset HWLOC_FSROOT GPUBINDCTL
fi

finish
