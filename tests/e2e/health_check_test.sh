#!/usr/bin/env bash
# The node health check under Slurm itself: HealthCheckProgram is the shipped gpubind-healthcheck
# (gpubindctl check-node). Of three nodes, n1 matches its policy; n2's gpubind sees a topology with
# a GPU fewer than its policy expects; n3 has a NIC whose link is down. Slurm drains n2 and n3
# with gpubind's reason and keeps n1 up; once n3's link is up again it is resumed. A node whose
# cores changed under Slurm's node line is named (slurm-node).
# Usage: health_check_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
src=$(cd "$here/../.." && pwd)
e2e_start_cluster health 3

# Inside another release's root slurmd runs the health check there: that root's gpubindctl.
hc_ctl=$build/bin/gpubindctl
[[ -n "${GPUBIND_E2E_SLURM:-}" ]] && hc_ctl=$build/slurm-$GPUBIND_E2E_SLURM/bin/gpubindctl
node_xml=$(sed -nE 's/^topology_file: "(.*)"$/\1/p' "$dir/etc/policy.conf")
[[ -f "$node_xml" ]] || { bad "no node topology in $dir/etc/policy.conf"; e2e_finish; exit; }
mapfile -t nics < <("$ctl" topology --topology "$node_xml" --json |
  python3 -c 'import json, sys; [print(n["netdev"] or n["name"]) for n in json.load(sys.stdin)["nics"]]')
gpus=$("$ctl" topology --topology "$node_xml" --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["gpus"]))')
((${#nics[@]} > 0 && gpus > 1)) || { bad "node topology: ${#nics[@]} NICs, $gpus GPUs"; e2e_finish; exit; }

# Each node's view: its policy (what it should have, where its topology is) and a sysfs tree
# (HWLOC_FSROOT) with its NICs' links.
python3 - "$node_xml" "$dir/etc/node-less-gpu.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET
tree = ET.parse(sys.argv[1])
parents = {c: p for p in tree.iter() for c in p}
gpus = [o for o in tree.iter("object")
        if o.get("type") == "PCIDev" and o.get("pci_type", "")[:2] in ("03", "12")]
parents[gpus[-1]].remove(gpus[-1])
tree.write(sys.argv[2])
EOF
for n in n1 n2 n3; do
  root=$dir/health/$n
  for nic in "${nics[@]}"; do
    mkdir -p "$root/sys/class/net/$nic"
    echo up >"$root/sys/class/net/$nic/operstate"
  done
  topology=$node_xml
  [[ $n == n2 ]] && topology=$dir/etc/node-less-gpu.xml
  printf 'topology_file: "%s"\nexpect {\n  gpu_count: %d\n  nic_count: %d\n}\n' \
    "$topology" "$gpus" "${#nics[@]}" >"$root/policy.conf"
done
echo down >"$dir/health/n3/sys/class/net/${nics[0]}/operstate"
# slurmd runs the program with almost no environment: this site script gives the cluster's.
cat >"$dir/etc/healthcheck" <<EOF
#!/bin/bash
node=\${SLURMD_NODENAME:?slurmd did not name the node}
export SLURM_CONF=$dir/etc/slurm.conf GPUBINDCTL=$hc_ctl HWLOC_FSROOT=$dir/health/\$node
exec $src/packaging/healthcheck/gpubind-healthcheck --policy $dir/health/\$node/policy.conf \\
  --socket $dir/run/gpubind.sock >>$dir/log/healthcheck-\$node.log 2>&1
EOF
chmod 755 "$dir/etc/healthcheck"
printf 'HealthCheckProgram=%s\nHealthCheckInterval=2\nHealthCheckNodeState=ANY\n' \
  "$dir/etc/healthcheck" >>"$dir/etc/slurm.conf"
scontrol reconfigure >/dev/null 2>&1 || { bad "scontrol reconfigure"; e2e_finish; exit; }

reason() { sinfo -h -N -n "$1" -o '%E' 2>/dev/null | head -1; }
state() { sinfo -h -N -n "$1" -o '%t' 2>/dev/null | head -1; }
# wait_until SECONDS COMMAND...: polls every 0.2 s.
wait_until() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < end)) || return 1
    sleep 0.2
  done
}
drained_by_gpubind() { [[ $(reason "$1") == gpubind:* && $(state "$1") == drain* ]]; }

if wait_until 60 drained_by_gpubind n2; then
  [[ $(reason n2) == "gpubind: gpu-count: expected $gpus GPUs, found $((gpus - 1))" ]] &&
    ok "n2 (a GPU fewer) drained by Slurm: $(reason n2)" || bad "n2 reason" "$(reason n2)"
else
  bad "n2 not drained" "$(sinfo -R)" "$(cat "$dir/log/healthcheck-n2.log" 2>/dev/null)"
fi
if wait_until 60 drained_by_gpubind n3; then
  [[ $(reason n3) == "gpubind: nic-down: NIC ${nics[0]}"*"link not up (${nics[0]} down)" ]] &&
    ok "n3 (${nics[0]} down) drained by Slurm: $(reason n3)" || bad "n3 reason" "$(reason n3)"
else
  bad "n3 not drained" "$(sinfo -R)" "$(cat "$dir/log/healthcheck-n3.log" 2>/dev/null)"
fi
# n1 passed the same checks (its log says so) and stays up.
wait_until 30 grep -q "node healthy" "$dir/log/healthcheck-n1.log" 2>/dev/null
[[ $(state n1) == idle && $(reason n1) == none ]] && grep -q "node healthy" "$dir/log/healthcheck-n1.log" &&
  ok "n1 (healthy) stays up" || bad "n1: $(state n1) $(reason n1)" "$(cat "$dir/log/healthcheck-n1.log" 2>/dev/null)"
# Slurm's node line against the node (check-node asks scontrol): n1's matched above; a node whose
# cores changed under its line (SMT switched on in the BIOS) is named, with both views.
if [[ -z "${GPUBIND_E2E_SLURM:-}" ]]; then
  python3 "$here/make_node_topology.py" "$dir/etc/smt-changed.xml" --gpus "$gpus" \
    --nics "${#nics[@]}" --threads-per-core 2 >/dev/null 2>&1
  sed "s|$node_xml|$dir/etc/smt-changed.xml|" "$dir/health/n1/policy.conf" >"$dir/etc/smt-changed.conf"
  out=$(SLURMD_NODENAME=n1 HWLOC_FSROOT=$dir/health/n1 "$ctl" check-node \
    --policy "$dir/etc/smt-changed.conf" --no-daemon 2>&1)
  [[ "$out" == *"ERROR: gpubind: slurm-node: Slurm's node line (scontrol show node -o n1: "* ]] &&
    ok "a node whose cores changed under Slurm's node line: named by check-node" ||
    bad "Slurm's node line against a changed node" "$out"
fi
out=$(timeout 60 srun -N1 -w n1 --gpus=1 --gpu-bind-auto "$check" --json 2>&1)
grep -q '"GPUBIND_BOUND":"1"' <<<"$out" && ok "a job runs on n1, bound" || bad "job on n1" "$out"

# The link comes back: gpubind resumes the node it drained, and only that one.
echo up >"$dir/health/n3/sys/class/net/${nics[0]}/operstate"
# (Slurm 24.11 and later keep a resumed node's reason.)
resumed() { [[ $(state n3) == idle ]]; }
wait_until 60 resumed && ok "n3 resumed once its link is up" || bad "n3 not resumed: $(state n3) $(reason n3)"
drained_by_gpubind n2 && ok "n2 still drained" || bad "n2: $(state n2) $(reason n2)"

# Leave the cluster as the other tests expect it: no health check, every node idle.
scontrol update NodeName=n2 State=RESUME >/dev/null 2>&1
e2e_finish
