#!/usr/bin/env bash
# Live discovery on captured sysfs/procfs trees (tests/fsroot): what gpubind reads on the node
# itself must plan like the node's dump.
#
# Usage: live_trees_test.sh GPUBINDCTL SHARED_TOPOLOGIES_DIR [GPUBIND_QUALITY]
#                                                          (exit 77 = skipped: no shared dumps)
#  (a) each dump below of SHARED_TOPOLOGIES_DIR becomes a tree (make_tree.py --from-xml); then
#      - hwloc 2.9 reads the tree as the dump (lstopo under HWLOC_FSROOT, canonical view:
#        CPUs, caches, NUMA nodes, distances, PCI tree, network and RDMA devices), and
#      - `gpubindctl plan --topology live` under HWLOC_FSROOT=tree equals `gpubindctl plan
#        --topology DUMP`, for 1, G/2, G and 2G tasks (G: the dump's GPUs).
#  (b) each spec in tests/fsroot/specs becomes a tree (i915 and xe layouts where it has Intel
#      GPUs), planned live for 1, G/2, G, 2G tasks; every task of those plans has the spec's
#      "expected_env" values (UCX_NET_DEVICES naming a dual-port HCA's active port, say); with
#      GPUBIND_QUALITY, gpubind-quality --live runs its independent checks (the planner
#      invariants) on it. Each NVIDIA GPU's MIG instances (`gpubindctl topology --json`) are the
#      compute instances its spec gives it ("mig"), none where it gives none.
#
# Compared: every field of the plan's JSON (each task's cpus, mask, GPUs, NIC, NUMA/L3, env,
# warnings) except those that say where the topology came from rather than what was planned:
# "source", "hostname", "os_name" (the runtime's device name: rsmi0, cuda0 ... exist only in a
# dump), and any "found_by"/"evidence" field (how live discovery learnt a fact). The topology's
# path inside warnings is replaced by a placeholder before comparing.
#
# GPUBIND_LIVE_TREES_EXPECTED_DIFF: space-separated dump and spec names (spec/driver for the
# Intel layouts) whose difference is known and explained where the list is set;
# they are reported, not failed, and an
# entry that no longer differs fails, so the list stays true.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
gpubindctl=$1
shared=$2
quality=${3:-}
make_tree=$here/../fsroot/make_tree.py
specs=$here/../fsroot/specs
dumps="tioga-mi250x tuolumne-mi300a-tpx tuolumne-mi300a-cpx tuolumne-mi300a-spx
  SYNTHETIC-aurora-pvc-4gpu-flat dell-xe8640-h100 lenovo-sd665nv3-h200-nvml h100-vm-live
  chimera-gtx1070-vegafe juwels-booster-a100"
expected_diff=" ${GPUBIND_LIVE_TREES_EXPECTED_DIFF:-} "

with_dumps=1
if [[ ! -d $shared ]]; then
  echo "no hwloc dumps in '$shared': live trees not compared with dumps (node specs still run)"
  with_dumps=0
fi
for tool in lstopo-no-graphics python3; do
  command -v $tool >/dev/null || { echo "skipped: $tool missing"; exit 77; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/gpubind-live-trees.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
known=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The plan's JSON without its provenance fields, paths replaced, keys sorted.
normalized_plan() {
  python3 -c '
import json, sys
ignored = {"source", "hostname", "os_name", "found_by", "evidence"}
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in ignored}
    if isinstance(v, list):
        return [strip(x) for x in v]
    if isinstance(v, str):
        for path in sys.argv[1:]:
            v = v.replace(path, "<topology>")
    return v
print(json.dumps(strip(json.load(sys.stdin)), indent=1, sort_keys=True))
' "$@"
}

gpu_count() {  # devices of a topology as the runtimes count them (a tile under FLAT is one):
  # a dump, or live under the caller's HWLOC_FSROOT
  "$gpubindctl" topology --topology "$1" --json |
    python3 -c 'import json,sys; print(sum(max(g["tiles"], 1) for g in json.load(sys.stdin)["gpus"]))'
}

task_counts() {  # 1, G/2, G, 2G without repeats or zeros
  local g=$1
  printf '%s\n' 1 $((g / 2)) "$g" $((2 * g)) | awk '$1 > 0 && !seen[$1]++'
}

# lstopo's view of a tree as make_tree.py --canonical prints it (no x86 component: gpubind's live
# loader leaves it out, and it would add this machine's caches).
tree_view() {
  HWLOC_COMPONENTS=-x86 HWLOC_FSROOT=$1 lstopo-no-graphics --whole-io --of xml - |
    python3 "$make_tree" --canonical -
}

echo "== (a) trees from dumps: hwloc's view and the plans"
for name in $( ((with_dumps)) && echo $dumps); do
  dump=$shared/$name.xml
  [[ -f $dump ]] || { fail "$name: dump missing in $shared"; continue; }
  tree=$work/$name
  python3 "$make_tree" --from-xml "$dump" "$tree" || { fail "$name: make_tree failed"; continue; }
  lstopo-no-graphics -i "$dump" --whole-io --of xml - | python3 "$make_tree" --canonical - >"$work/$name.dump.view"
  tree_view "$tree" >"$work/$name.tree.view"
  if ! diff -u "$work/$name.dump.view" "$work/$name.tree.view" >"$work/$name.view.diff"; then
    fail "$name: hwloc reads the tree differently from the dump:"
    head -20 "$work/$name.view.diff"
  fi
  g=$(gpu_count "$dump")
  differs=""
  for n in $(task_counts "$g"); do
    "$gpubindctl" plan --topology "$dump" --ntasks "$n" --json 2>&1 | normalized_plan "$dump" >"$work/$name.$n.dump.json"
    HWLOC_FSROOT=$tree "$gpubindctl" plan --topology live --ntasks "$n" --json 2>&1 |
      normalized_plan "$dump" >"$work/$name.$n.live.json"
    if ! diff -u "$work/$name.$n.dump.json" "$work/$name.$n.live.json" >"$work/$name.$n.diff"; then
      differs+=" $n"
    fi
  done
  if [[ -z $differs && $expected_diff == *" $name "* ]]; then
    fail "$name: listed in GPUBIND_LIVE_TREES_EXPECTED_DIFF but its live plans now equal the dump's"
  elif [[ -z $differs ]]; then
    echo "ok: $name (G=$g): live plans equal the dump's for ntasks $(task_counts "$g" | tr '\n' ' ')"
  elif [[ $expected_diff == *" $name "* ]]; then
    echo "known difference: $name (G=$g, live G=$(HWLOC_FSROOT=$tree gpu_count live)): ntasks$differs"
    known=$((known + 1))
  else
    fail "$name (G=$g, live G=$(HWLOC_FSROOT=$tree gpu_count live)): live plans differ for ntasks$differs; first:"
    head -30 "$work/$name.${differs%% *}.diff" 2>/dev/null || head -30 "$work/$name.$(echo $differs | cut -d' ' -f1).diff"
  fi
done

# GPUBIND_LIVE_TREES_KNOWN_VIOLATIONS: "label|text" entries (separated by ",") for planner cases
# gpubind-quality flags on a spec's live plan that it flags on the same node's XML dump too:
# planner matters, not discovery ones. A violation matching none of them fails.
only_known_violations() {  # LABEL QUALITY_OUTPUT
  grep -q VIOLATION "$2" || return 1
  local line entry known_one unknown=0
  while IFS= read -r line; do
    known_one=0
    IFS=',' read -ra entries <<<"${GPUBIND_LIVE_TREES_KNOWN_VIOLATIONS:-}"
    for entry in "${entries[@]}"; do
      [[ -n $entry && $1 == "${entry%%|*}" && $line == *"${entry#*|}"* ]] && known_one=1
    done
    ((known_one)) || unknown=1
  done < <(grep VIOLATION "$2")
  ((unknown == 0)) || return 1
  echo "known planner case: $1: $(grep -c VIOLATION "$2") gpubind-quality violation(s) listed in GPUBIND_LIVE_TREES_KNOWN_VIOLATIONS"
}

# The first NVIDIA GPU whose MIG instance count live differs from its spec's "mig" list, and how.
mig_differs() {  # SPEC TOPOLOGY_JSON
  python3 -c '
import json, sys
spec, topology = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
found = {g["pci"]: g["mig_instances"] for g in topology["gpus"]}
for device in spec["pci"]:
    gpu = device.get("gpu", {})
    if gpu.get("vendor") == "nvidia" and found.get(device["bdf"]) != len(gpu.get("mig", [])):
        print("GPU %s: %s MIG instances, the spec gives %d" % (device["bdf"],
              found.get(device["bdf"]), len(gpu.get("mig", []))))
        sys.exit(0)
sys.exit(1)' "$@"
}

# The first task of a plan (JSON) whose environment lacks one of the expected values, and why.
env_differs() {  # PLAN_JSON EXPECTED_ENV_JSON
  python3 -c '
import json, sys
plan, expected = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
for task in plan["tasks"]:
    for name, value in expected.items():
        if task["env"].get(name) != value:
            print("task %d: %s=%s, expected %s" % (task["rank"], name, task["env"].get(name), value))
            sys.exit(0)
sys.exit(1)' "$@"
}

echo "== (b) trees from node specs: planned live, planner invariants"
for spec in "$specs"/*.json; do
  name=$(basename "$spec" .json)
  drivers=i915
  python3 -c 'import json, sys; sys.exit(not any(d.get("gpu", {}).get("vendor") == "intel"
      for d in json.load(open(sys.argv[1]))["pci"]))' "$spec" && drivers="i915 xe"
  for driver in $drivers; do
    label=$name
    [[ $drivers == "i915 xe" ]] && label="$name/$driver"
    tree=$work/spec-$name-$driver
    out=$work/spec-$name-$driver.out
    python3 "$make_tree" --spec "$spec" --intel-driver "$driver" "$tree" ||
      { fail "$label: make_tree failed"; continue; }
    size=$(find "$tree" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
    ((size < 1000000)) || fail "$label: tree holds $size bytes"
    g=$(HWLOC_FSROOT=$tree gpu_count live) || { fail "$label: live topology not read"; continue; }
    expected_gpus=$(python3 -c '
import json, sys
spec = json.load(open(sys.argv[1]))
print(spec.get("expected_gpus", ""))' "$spec")
    expected_env=$(python3 -c '
import json, sys
print(json.dumps(json.load(open(sys.argv[1])).get("expected_env", {})))' "$spec")
    bad=""
    for n in $(task_counts "$g"); do
      if ! HWLOC_FSROOT=$tree "$gpubindctl" plan --topology live --ntasks "$n" --json >"$out.json" 2>"$out.err"; then
        bad+=" $n"
      elif why=$(env_differs "$out.json" "$expected_env"); then
        fail "$label: ntasks $n: $why"
      fi
    done
    [[ -z $bad ]] || fail "$label: live plan refused for ntasks$bad: $(head -2 "$out.err")"
    HWLOC_FSROOT=$tree "$gpubindctl" topology --topology live --json >"$out.topology.json"
    if why=$(mig_differs "$spec" "$out.topology.json"); then
      fail "$label: $why"
    fi
    if [[ -n $quality ]]; then
      if ! HWLOC_FSROOT=$tree "$quality" --no-timing --live >"$out.quality" 2>&1 &&
        ! only_known_violations "$label" "$out.quality"; then
        if [[ $expected_diff == *" $label "* ]]; then
          echo "known difference: $label: gpubind-quality --live finds $(grep -c VIOLATION "$out.quality") violation(s), e.g."
          known=$((known + 1))
        else
          fail "$label: gpubind-quality --live:"
        fi
        grep -E 'VIOLATION|error' "$out.quality" | head -3
      fi
    fi
    if [[ -n $expected_gpus && $expected_gpus != "$g" ]]; then
      if [[ $expected_diff == *" $label "* ]]; then
        echo "known difference: $label: live finds $g GPUs, the node has $expected_gpus"
        known=$((known + 1))
      else
        fail "$label: live finds $g GPUs, the node has $expected_gpus"
      fi
    elif [[ $expected_diff == *" $label "* ]]; then
      fail "$label: listed in GPUBIND_LIVE_TREES_EXPECTED_DIFF but live now finds its $g GPUs"
    else
      echo "ok: $label: $g GPUs, ${size} bytes, planned live for ntasks $(task_counts "$g" | tr '\n' ' ')"
    fi
  done
done

# (c) What the kernel reports of a device's locality (make_tree.py --io-locality): local_cpus of
# every CPU but a numa_node is that node, named as the source, and plans as the full locality
# on a node whose NUMA nodes are its L3s (DGX H100); neither is unknown, said, never planned near.
echo "== (c) PCI locality from the kernel's numa_node alone, and none at all"
spec=$specs/dgx-h100.json
for locality in cpus numa-node none; do
  python3 "$make_tree" --spec "$spec" --io-locality "$locality" "$work/io-$locality" >/dev/null ||
    fail "io-locality $locality: make_tree failed"
  HWLOC_FSROOT=$work/io-$locality "$gpubindctl" topology --topology live >"$work/io-$locality.topology" 2>&1
  HWLOC_FSROOT=$work/io-$locality "$gpubindctl" plan --topology live --ntasks 8 --json 2>&1 |
    normalized_plan >"$work/io-$locality.plan"
done
gpu0() { grep -m1 '^GPU 0:' "$work/io-$1.topology"; }
if [[ "$(gpu0 numa-node)" == *"locality from kernel's NUMA node 0 for 0000:1b:00.0 (sysfs numa_node"* ]] &&
  diff -q "$work/io-cpus.plan" "$work/io-numa-node.plan" >/dev/null; then
  echo "ok: numa_node alone: GPU 0's locality is the kernel's NUMA node 0, plans as full locality"
else
  fail "numa_node alone: $(gpu0 numa-node); plan diff: $(diff "$work/io-cpus.plan" "$work/io-numa-node.plan" | head -5)"
fi
if [[ "$(gpu0 none)" == *"no I/O locality reported"* ]] && grep -q "no CPU locality" "$work/io-none.plan"; then
  echo "ok: neither: GPU 0's locality is unknown and the plan says so"
else
  fail "no locality: $(gpu0 none); $(grep -m1 warning "$work/io-none.plan")"
fi

echo "$failures failure(s), $known known difference(s)"
((failures == 0))
