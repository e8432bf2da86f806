#!/usr/bin/env bash
# Live discovery loads no GPU runtime, so it never sees Level Zero's tiles. Each Intel PVC dump
# is planned with its Level Zero objects (zeN, zeN.M) removed, for 6, 12 and 24 tasks (one task
# per card, per tile, two per tile):
# - under FLAT every task gets tiles of one card (ZE_AFFINITY_MASK = flat tile indices) whose
#   CPUs hold the task's, no tile is shared before every tile is used, and COMPOSITE names a
#   tile "card.tile" (a whole card "card");
# - where the dump recorded tiles as sub-devices (zeN.M), the plans equal the dump's own;
# - the topology says where its tile count came from (a warning).
# Usage: without_runtimes_test.sh GPUBINDCTL FIXTURES_DIR [SHARED_TOPOLOGIES_DIR]
set -uo pipefail
ctl=$1
fixtures=$2
shared=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

dumps=("$fixtures/aurora-pvc.xml")
for name in SYNTHETIC-aurora-pvc-4gpu-flat.xml SYNTHETIC-aurora-pvc-4gpu-composite.xml; do
  [[ -f $shared/$name ]] && dumps+=("$shared/$name")
done

strip_level_zero() {  # prints "subdevices" when the dump had zeN.M objects
  python3 - "$1" "$2" <<'PY'
import sys
import xml.etree.ElementTree as ET
tree = ET.parse(sys.argv[1])
names = [o.get("name") or "" for o in tree.iter("object") if o.get("type") == "OSDev"]
for parent in list(tree.iter()):
    for child in list(parent):
        if child.get("type") == "OSDev" and (child.get("name") or "").startswith("ze"):
            parent.remove(child)
tree.write(sys.argv[2], encoding="UTF-8", xml_declaration=True)
print("subdevices" if any(n.startswith("ze") and "." in n for n in names) else "flat")
PY
}

tasks_of() {
  python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["tasks"], sort_keys=True))'
}

# Checks a plan of a stripped dump: TOPOLOGY_JSON PLAN_JSON HIERARCHY DUMP_TOPOLOGY_JSON
check_tiles() {
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, sys
topology = json.load(open(sys.argv[1]))
tasks = json.load(open(sys.argv[2]))["tasks"]
hierarchy = sys.argv[3]
# The truth is the dump's own Level Zero view: tiles as sub-devices, or (a dump taken under FLAT)
# as devices of their own on one PCI device.
truth = json.load(open(sys.argv[4]))["gpus"]
tiles_of = {}
for gpu in truth:
    tiles_of[gpu["pci"]] = max(gpu["tiles"], gpu["partitions"], 1)
def cpus(text):
    out = set()
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out |= set(range(int(a), int(b or a) + 1))
    return out
cards = topology["gpus"]
if [c["pci"] for c in cards] != list(dict.fromkeys(g["pci"] for g in truth)):
    sys.exit("the cards differ from the dump's")
for card in cards:
    if max(card["tiles"], 1) != tiles_of[card["pci"]]:
        sys.exit(f"card {card['pci']}: {card['tiles']} tiles, the dump has {tiles_of[card['pci']]}")
first_tile, flat = [], 0
for card in cards:
    first_tile.append(flat)
    flat += tiles_of[card["pci"]]
errors, used = [], []
for task in tasks:
    mask = task["env"].get("ZE_AFFINITY_MASK", "")
    for token in mask.split(","):
        if hierarchy == "composite" and "." in token:  # "card.tile"
            card, tile = map(int, token.split("."))
            indexes = [first_tile[card] + tile]
        elif hierarchy == "composite":  # a whole card
            card = int(token)
            indexes = list(range(first_tile[card], first_tile[card] + tiles_of[cards[card]["pci"]]))
        else:
            indexes = [int(token)]
            card = max(i for i, start in enumerate(first_tile) if start <= indexes[0])
        used += indexes
        if not cpus(task["cpus"]) <= cpus(cards[card]["locality"]["cpus"]):
            errors.append(f"rank {task['rank']}: CPUs {task['cpus']} not near card {card} "
                          f"({cards[card]['locality']['cpus']})")
if len(used) <= flat and len(set(used)) != len(used):
    errors.append(f"a tile is shared while {flat - len(set(used))} are unused: {used}")
if len(used) >= flat and len(set(used)) != flat:
    errors.append(f"tiles unused while others are shared: {sorted(set(range(flat)) - set(used))}")
print("\n".join(errors))
sys.exit(1 if errors else 0)
PY
}

failures=0
cases=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
for dump in "${dumps[@]}"; do
  name=$(basename "$dump" .xml)
  bare=$work/$name-no-level-zero.xml
  recorded=$(strip_level_zero "$dump" "$bare") || { echo "FAIL: cannot strip $dump"; exit 1; }
  grep -q 'name="ze' "$bare" && { echo "FAIL: Level Zero objects left in $bare"; exit 1; }
  "$ctl" topology --topology "$bare" --json >"$work/topology.json"
  "$ctl" topology --topology "$dump" --json >"$work/dump-topology.json"
  grep -q 'PCI device id' "$work/topology.json" ||
    fail "$name without Level Zero: no warning saying where the tile count came from"
  for ntasks in 6 12 24; do
    for hierarchy in flat composite; do
      cases=$((cases + 1))
      args=(plan --ntasks "$ntasks" --ze-hierarchy "$hierarchy" --json)
      "$ctl" "${args[@]}" --topology "$bare" >"$work/plan.json" ||
        { fail "$name ntasks=$ntasks $hierarchy: no plan without Level Zero"; continue; }
      problems=$(check_tiles "$work/topology.json" "$work/plan.json" "$hierarchy" \
        "$work/dump-topology.json") ||
        fail "$name ntasks=$ntasks $hierarchy without Level Zero: $problems"
      [[ $recorded == subdevices ]] || continue
      want=$("$ctl" "${args[@]}" --topology "$dump" | tasks_of)
      got=$(tasks_of <"$work/plan.json")
      [[ -n $want && $want == "$got" ]] ||
        fail "$name ntasks=$ntasks $hierarchy: the plan without Level Zero differs from the dump's"
    done
  done
done
echo "$cases cases on ${#dumps[@]} dump(s), $failures failure(s)"
[[ $failures -eq 0 ]]
