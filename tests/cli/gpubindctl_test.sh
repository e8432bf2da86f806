#!/usr/bin/env bash
# gpubindctl as a user runs it: output, JSON shape and exit codes on good and bad input.
# Usage: gpubindctl_test.sh PATH/TO/gpubindctl FIXTURES_DIR
set -uo pipefail
ctl=$1
fixtures=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

check() {  # check NAME EXPECTED_EXIT PATTERN -- COMMAND...
  local name=$1 want_rc=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want_rc ]]; then
    echo "FAIL $name: exit $rc, wanted $want_rc"; echo "$out" | head -5; failed=$((failed + 1)); return
  fi
  if ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | head -5; failed=$((failed + 1)); return
  fi
  echo "ok   $name"
  passed=$((passed + 1))
}

lumi=(--topology "$fixtures/lumi-g.xml" --policy "$fixtures/lumi-g.policy")

check "plan json rank 0" 0 '^\{"tasks":\[\{"rank":0,"cpus":"49-55","cpu_mask":"0xfe000000000000","ncores":7,"gpus":\[\{"step_index":0,"pci":"0000:c1:00.0"' \
  -- "$ctl" plan "${lumi[@]}" --ntasks 8 --json
check "plan json env" 0 '"nic_index":0,"nic_names":"hsn0","nic_indices":\[0\],"numa_node":3,"l3_index":6,"env":\{"ROCR_VISIBLE_DEVICES":"0"' \
  -- "$ctl" plan "${lumi[@]}" --ntasks 8 --json
check "plan table" 0 '^7 +41-47 +0xfe0000000000 +7 +5 +2 +7 \(0000:de:00.0\) +hsn3$' \
  -- "$ctl" plan "${lumi[@]}" --ntasks 8
check "plan order=cpu" 0 '^0 +1-7 +0xfe +7 +0 +0 +4 \(0000:d1:00.0\) +hsn2$' \
  -- "$ctl" plan "${lumi[@]}" --ntasks 8 --order cpu
# Two tasks on GPU 2 (CCD 2): each keeps part of its CCD and half of the cores no GPU is near.
check "plan gpu subset + cpus" 0 '^0 +[0-9,-]*17-20[0-9,-]* +0x[0-9a-f]+ +28 +2 +1 +2 ' \
  -- "$ctl" plan "${lumi[@]}" --ntasks 2 --gpus 2 --cpus 0-63
check "plan mask cpus" 0 '"cpus":"49-55"' \
  -- "$ctl" plan "${lumi[@]}" --ntasks 1 --gpus 0 --cpus 0xfe000000000000 --json
check "plan omp" 0 '"OMP_PLACES":"cores","OMP_PROC_BIND":"close"' \
  -- "$ctl" plan "${lumi[@]}" --ntasks 8 --omp --json
check "plan warning" 0 '^warning: .*share cores' \
  -- "$ctl" plan "${lumi[@]}" --ntasks 60
check "plan --flag=value" 0 '"cpus":"49-52"' \
  -- "$ctl" plan "${lumi[@]}" --ntasks=8 --cpus-per-task=4 --json
check "plan --time" 0 '^planner: [0-9]+\.[0-9] us median of [0-9]+ runs$' \
  -- "$ctl" plan "${lumi[@]}" --ntasks 8 --time
check "plan --json --time" 0 '^\{"tasks":\[.*\],"warnings":\[\],"planner_us":[0-9]+\.[0-9]\}$' \
  -- "$ctl" plan "${lumi[@]}" --ntasks 8 --json --time
check "topology text" 0 '^0 +0000:c1:00.0 +amd +rsmi0 +1/1 +0 +L3 6 +48-55,112-119$' \
  -- "$ctl" topology --topology "$fixtures/lumi-g.xml"
check "topology json" 0 '"gpus":\[\{"index":0,"pci":"0000:c1:00.0","vendor":"amd"' \
  -- "$ctl" topology --topology "$fixtures/lumi-g.xml" --json
check "topology live" 0 '^Node .* from live: ' -- "$ctl" topology --topology live
check "help" 0 '^usage: gpubindctl' -- "$ctl" --help

# Bad input: a clear message naming the fault, exit 2.
check "no command" 2 'no command given' -- "$ctl"
check "unknown command" 2 "unknown command 'frobnicate'" -- "$ctl" frobnicate
check "unknown option" 2 'unknown option --bogus' -- "$ctl" plan --bogus 1
check "missing value" 2 '--ntasks needs a value' -- "$ctl" plan "${lumi[@]}" --ntasks
check "missing ntasks" 2 '--ntasks N is required' -- "$ctl" plan "${lumi[@]}"
check "bad ntasks" 2 "--ntasks: expected a whole number from 1 to 4096, got 'x'" -- "$ctl" plan "${lumi[@]}" --ntasks x
check "zero ntasks" 2 "--ntasks: expected a whole number from 1 to 4096, got '0'" -- "$ctl" plan "${lumi[@]}" --ntasks 0
check "bad order" 2 "--order: expected 'gpu' or 'cpu', got 'rank'" -- "$ctl" plan "${lumi[@]}" --ntasks 1 --order rank
check "bad cpus" 2 "--cpus: invalid cpu list '1-x'" -- "$ctl" plan "${lumi[@]}" --ntasks 1 --cpus 1-x
check "reserved cpus only" 2 'cannot plan: no usable CPUs' -- "$ctl" plan "${lumi[@]}" --ntasks 1 --cpus 0,8
check "unknown gpu" 2 'cannot plan: GPU 9 does not exist' -- "$ctl" plan "${lumi[@]}" --ntasks 1 --gpus 9
check "missing topology" 2 "topology file '/nonexistent.xml': No such file or directory" \
  -- "$ctl" plan --topology /nonexistent.xml --ntasks 1
check "no daemon" 1 "gpubindd at $tmp/none.sock: daemon unavailable" -- "$ctl" --socket "$tmp/none.sock" topology
check "no daemon plan" 1 "gpubindd at $tmp/none.sock: daemon unavailable" -- "$ctl" plan --socket "$tmp/none.sock" --ntasks 1
check "time needs topology" 2 "--time applies offline only" -- "$ctl" plan --ntasks 1 --time
check "policy needs topology" 2 "--policy applies offline only" -- "$ctl" plan --policy x --ntasks 1
check "bad timeout" 2 "--timeout: expected a whole number" -- "$ctl" status --timeout 0
printf 'smt: 1\nreserved_cpus: "0-"\n' >"$tmp/bad.conf"
check "bad policy" 2 "$tmp/bad.conf:2: reserved_cpus: invalid cpu list" \
  -- "$ctl" plan --topology "$fixtures/lumi-g.xml" --policy "$tmp/bad.conf" --ntasks 1
printf 'gpu_order: "3"\n' >"$tmp/order.conf"
check "bad gpu_order" 2 "order.conf: gpu_order names 1 GPUs but the node has 8" \
  -- "$ctl" topology --topology "$fixtures/lumi-g.xml" --policy "$tmp/order.conf"
printf '<topology>' >"$tmp/broken.xml"
check "broken xml" 2 "topology file '$tmp/broken.xml'" -- "$ctl" topology --topology "$tmp/broken.xml"
check "--socket=PATH before the command" 1 "gpubindd at $tmp/none.sock" -- "$ctl" --socket="$tmp/none.sock" --timeout=300 status

# explain: the planner's reasons, for one task or all, and as JSON.
check "explain reserved" 0 '^  reserved 0,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120: the first core of each L3' \
  -- "$ctl" explain "${lumi[@]}" --ntasks 8
check "explain cites the policy line" 0 'reserve_first_core_per_l3 in the site policy \(.*/lumi-g.policy:[0-9]+\)$' \
  -- "$ctl" explain "${lumi[@]}" --ntasks 8
check "explain task heading" 0 '^local task 0: CPUs 49-55 \(7 cores\), GPU 0 \(0000:c1:00.0\), NIC hsn0$' \
  -- "$ctl" explain "${lumi[@]}" --ntasks 8 --rank 0
check "explain gpu domain" 0 "^  cores +49-55 +its GPU's own domain, L3 6 \(CPUs 48-55,112-119\)" \
  -- "$ctl" explain "${lumi[@]}" --ntasks 8 --rank 0
check "explain json" 0 '^\{"step":\{"ntasks":8,"order":"gpu","order_from":"policy"' \
  -- "$ctl" explain "${lumi[@]}" --ntasks 8 --json
check "explain rank out of range" 2 "--rank: expected a whole number from 0 to 7" \
  -- "$ctl" explain "${lumi[@]}" --ntasks 8 --rank 8
# explained NAME: counts the command list just run (plan, explain, a Python check of their JSON):
# ok, or FAIL with the start of explain's JSON.
explained() {
  if (($? == 0)); then
    echo "ok   $1"; passed=$((passed + 1))
  else
    echo "FAIL $1"; head -c 600 "$tmp/explain.json"; echo; failed=$((failed + 1))
  fi
}
# Slurm's per-task GPU binding is a fact of the request: each task keeps Slurm's GPUs, the
# planner places its cores and NIC next to them and renders every variable from what each task
# really runs on; closest and single cannot be told offline.
check "explain slurm map_gpu line" 0 "^  GPU +7 \(0000:de:00.0\) +given to the task before planning \(Slurm's per-task GPU binding\): kept as given$" \
  -- "$ctl" explain "${lumi[@]}" --ntasks 8 --rank 0 --slurm-gpu-bind map_gpu:7,6,5,4,3,2,1,0
check "explain slurm closest" 2 "--slurm-gpu-bind closest: Slurm chooses by the CPUs it binds each task to" \
  -- "$ctl" explain "${lumi[@]}" --ntasks 8 --slurm-gpu-bind closest
check "explain slurm unreadable" 2 "--slurm-gpu-bind: cannot read 'map_gpu:x'" \
  -- "$ctl" explain "${lumi[@]}" --ntasks 8 --slurm-gpu-bind map_gpu:x
# Every variable naming CPUs, NICs or ranks agrees with the task's own CPUs, GPUs and NIC:
# GPUBIND_*, OMP_NUM_THREADS, MPICH_OFI_NIC_MAPPING (local rank -> its NIC), CCL_WORKER_AFFINITY
# (entry r inside local task r's CPUs); tasks given one GPU split its domain's cores.
slurm_facts_check() {  # slurm_facts_check TOPOLOGY_JSON EXPLAIN_JSON WANTED_GPUS_JSON
  python3 - "$@" <<'PY'
import json, sys
node = json.load(open(sys.argv[1]))
tasks = json.load(open(sys.argv[2]))["tasks"]
wanted = json.loads(sys.argv[3])
nic_index = {n["name"]: n["index"] for n in node["nics"]}
def cpus(text):
    out = set()
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out
seen = {}
for t in tasks:
    r, env = t["rank"], {e["name"]: e["value"] for e in t["env"]}
    gpus = sorted({g["node_index"] for g in t["gpus"]})
    assert gpus == sorted(wanted[r % len(wanted)]), (r, gpus, wanted[r % len(wanted)])
    assert all(g["reason"] == "fixed" for g in t["gpus"]), (r, t["gpus"])
    mine = cpus(t["cpus"])
    assert env["GPUBIND_CPUS"] == t["cpus"] and env["GPUBIND_LOCAL_RANK"] == str(r), (r, env)
    assert env["GPUBIND_GPU_PCI"] == ",".join(node["gpus"][g]["pci"] for g in
                                              [g["node_index"] for g in t["gpus"]]), (r, env)
    nics = [n["name"] for n in t["nics"]]
    if nics:
        assert env["GPUBIND_NIC"] == ",".join(dict.fromkeys(nics)), (r, env, nics)
    if "MPICH_OFI_NIC_MAPPING" in env:
        owner = {}
        for part in env["MPICH_OFI_NIC_MAPPING"].split(";"):
            nic, _, ranks = part.strip().partition(":")
            for rank in cpus(ranks):
                owner[rank] = int(nic)
        assert owner[r] == nic_index[nics[0]], (r, env["MPICH_OFI_NIC_MAPPING"], nics)
    if "CCL_WORKER_AFFINITY" in env:
        entry = int(env["CCL_WORKER_AFFINITY"].split(",")[r])
        assert entry in mine, (r, env["CCL_WORKER_AFFINITY"], t["cpus"])
    for other, theirs in seen.items():
        assert not (theirs & mine), ("tasks share cores", other, r)
    seen[r] = mine
    assert not any(e["name"].endswith("VISIBLE_DEVICES") or e["name"] == "ZE_AFFINITY_MASK"
                   for e in t["env"]), (r, "the plan names Slurm's GPUs")
PY
}
"$ctl" topology "${lumi[@]}" --json >"$tmp/topology.json"
for case in "8 map_gpu:7,6,5,4,3,2,1,0 [[7],[6],[5],[4],[3],[2],[1],[0]]" \
  "4 per_task:2 [[0,1],[2,3],[4,5],[6,7]]" "8 mask_gpu:0x3 [[0,1]]" "16 map_gpu:3 [[3]]" \
  "2 map_gpu:0,0 [[0]]"; do
  read -r ntasks binding wanted <<<"$case"
  name="explain slurm $binding, $ntasks tasks: every variable names what each task runs on"
  "$ctl" explain "${lumi[@]}" --ntasks "$ntasks" --slurm-gpu-bind "$binding" --json \
    >"$tmp/explain.json" 2>&1 &&
    slurm_facts_check "$tmp/topology.json" "$tmp/explain.json" "$wanted"
  explained "$name"
done
# Aurora's own policy (oneCCL's worker CPUs) with Slurm's map_gpu reversed.
aurora=(--topology "$fixtures/aurora-pvc.xml" --policy "$(dirname "$0")/../../packaging/policies/aurora.conf")
"$ctl" topology "${aurora[@]}" --json >"$tmp/topology.json" &&
  "$ctl" explain "${aurora[@]}" --ntasks 6 --slurm-gpu-bind map_gpu:5,4,3,2,1,0 --json \
    >"$tmp/explain.json" 2>&1 &&
  grep -q CCL_WORKER_AFFINITY "$tmp/explain.json" &&
  slurm_facts_check "$tmp/topology.json" "$tmp/explain.json" "[[5],[4],[3],[2],[1],[0]]"
explained "explain slurm map_gpu:5,4,3,2,1,0 under aurora.conf: oneCCL's worker CPUs are each task's own"
# Every fixture, one task per GPU and Slurm's map_gpu in reverse order, by node index (mixed
# vendors number their tokens per vendor; PVC cards hold tiles).
for xml in "$fixtures"/*.xml; do
  gpus=$("$ctl" topology --topology "$xml" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["gpus"]))')
  ((gpus >= 2)) || continue
  reverse=$(seq $((gpus - 1)) -1 0 | paste -sd, -)
  wanted=$(seq $((gpus - 1)) -1 0 | sed 's/.*/[&]/' | paste -sd, - | sed 's/.*/[&]/')
  name="explain slurm map_gpu:$reverse on $(basename "$xml"): every variable names what each task runs on"
  "$ctl" topology --topology "$xml" --json >"$tmp/topology.json" &&
    "$ctl" explain --topology "$xml" --ntasks "$gpus" --slurm-gpu-bind "map_gpu:$reverse" --json \
      >"$tmp/explain.json" 2>&1 &&
    slurm_facts_check "$tmp/topology.json" "$tmp/explain.json" "$wanted"
  explained "$name"
done
# Each fixture and shape: explain's cores, GPUs and NICs are the plan's, task by task.
for xml in "$fixtures"/*.xml; do
  for shape in "--ntasks 1" "--ntasks 8" "--ntasks 8 --order cpu" "--ntasks 30 --cpus 0-40" "--ntasks 300"; do
    name="explain = plan: $(basename "$xml") $shape"
    # shellcheck disable=SC2086
    "$ctl" plan --topology "$xml" $shape --json >"$tmp/plan.json" 2>/dev/null &&
      "$ctl" explain --topology "$xml" $shape --json >"$tmp/explain.json" 2>&1 &&
      python3 - "$tmp/plan.json" "$tmp/explain.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
explained = json.load(open(sys.argv[2]))
assert len(plan["tasks"]) == len(explained["tasks"])
for p, e in zip(plan["tasks"], explained["tasks"]):
    assert p["cpus"] == e["cpus"], (p["rank"], p["cpus"], e["cpus"])
    assert [g["pci"] for g in p["gpus"]] == [g["pci"] for g in e["gpus"]], p["rank"]
    assert [g["token"] for g in p["gpus"]] == [g["token"] for g in e["gpus"]], p["rank"]
    assert (p.get("nic_names") or "") == ",".join(n["name"] for n in e["nics"]), p["rank"]
    assert all(c["text"] for c in e["cores"]) and all(g["text"] for g in e["gpus"])
PY
    explained "$name"
  done
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
