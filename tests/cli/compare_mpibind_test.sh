#!/usr/bin/env bash
# bench/mpibind/compare.py, the comparison scripts/compare-mpibind runs: task counts, ratios,
# summaries, dumps mpibind cannot map, and bad input. gpubindctl is the real one, on the
# fixtures; mpibind is not a Debian package, so a stand-in answers as mbench does, with a crash on
# one dump and fixed times: 1 ns for one task, which gpubind cannot beat, else 0.1 s per task (0.12
# with --env), which any build of gpubind beats, sanitized or on a busy machine.
# --quality: the stand-in's mapping (mbench --map) is gpubind's own order=cpu plan on the
# fixtures, every task on CPU 0 without a GPU on workstation-mixed, scored by the real
# gpubind-quality.
# Usage: compare_mpibind_test.sh PATH/TO/gpubindctl SOURCE_DIR PATH/TO/gpubind-quality
set -uo pipefail
ctl=$1
source_dir=$2
quality=$3
compare=$source_dir/bench/mpibind/compare.py
fixtures=$source_dir/tests/fixtures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

cat >"$tmp/mbench" <<'EOF'
#!/usr/bin/env bash
env=0
[[ $1 == --env ]] && { env=1; shift; }
if [[ $1 == --map ]]; then
  case $2 in
    *lumi-g.xml) echo "error: mpibind crashed (signal 11: Segmentation fault)" >&2; exit 139 ;;
    *workstation-mixed.xml)
      python3 -c 'import json, sys; print(json.dumps({"tasks": [{"cpus": "0", "gpus": []}] * int(sys.argv[1])}))' "$3"
      exit 0 ;;
  esac
  "$GPUBINDCTL" plan --topology "$2" --ntasks "$3" --order cpu --json | python3 -c '
import json, sys
print(json.dumps({"tasks": [{"cpus": t["cpus"], "gpus": [g["pci"] for g in t["gpus"]],
                             "gpu_indices": [g["node_index"] for g in t["gpus"]]}
                            for t in json.load(sys.stdin)["tasks"]]}))'
  exit
fi
case $1 in
  *lumi-g.xml) echo "error: mpibind crashed (signal 11: Segmentation fault)" >&2; exit 139 ;;
  *workstation-mixed.xml) gpus=0 ;;
  *) gpus=1 ;;
esac
per_task=$((env ? 120000 : 100000))
median=$(($2 * per_task)).000
[[ $2 == 1 ]] && median=0.001
echo "gpus_total=$gpus"
echo "median_us=$median min_us=0.001 repeats=$3 ntasks=$2"
EOF
chmod +x "$tmp/mbench"
run() { python3 "$compare" --mbench "$tmp/mbench" --gpubindctl "$ctl" --rounds 1 --repeats 5 "$@"; }

# dgx-h100: 8 GPUs, 112 cores; workstation-mixed: 2 GPUs, 8 cores; lumi-g: mpibind crashes.
run "$fixtures/dgx-h100.xml" "$fixtures/workstation-mixed.xml" "$fixtures/lumi-g.xml" \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
check "the comparison runs (exit 0)" '[[ $rc -eq 0 ]]'
counts=$(awk -F'|' '$2 ~ /dgx-h100/ {gsub(/ /, "", $3); printf "%s ", $3}' "$tmp/out")
check "default task counts are 1, G/2, G, 2G, 3G, 8 and one per core (got: $counts)" \
  '[[ $counts == "1 4 8 16 24 112 " ]]'
counts=$(awk -F'|' '$2 ~ /workstation/ {gsub(/ /, "", $3); printf "%s ", $3}' "$tmp/out")
check "counts are distinct and sorted (got: $counts)" '[[ $counts == "1 2 4 6 8 " ]]'
# Every ratio is mpibind's time over gpubind's, both as printed (to rounding).
check "ratios are mpibind's time over gpubind's" "awk -F'|' '\$3 ~ /[0-9]/ {
  m = \$4; e = \$5; g = \$6; if (g <= 0) exit 1;
  if ((m / g - \$7) ^ 2 > 0.03 ^ 2 || (e / g - \$8) ^ 2 > 0.03 ^ 2) exit 1 }' '$tmp/out' &&
   [[ \$(grep -c '^| [a-z].* | [0-9]* | ' '$tmp/out') -eq 11 ]]"
check "the stand-in's times are in the table" \
  "grep -q '^| dgx-h100 | 8 | 800000.0 | 960000.0 |' '$tmp/out'"
check "a GPU node where mpibind maps no GPU is marked" \
  "grep -q '^| workstation-mixed (mpibind maps no GPU) | 8 |' '$tmp/out'"
check "a dump mpibind cannot map is left out, with mpibind's message" \
  "grep -q 'left out: lumi-g with 8 tasks: mpibind: error: mpibind crashed (signal 11' '$tmp/out' &&
   ! grep -q '^| lumi-g' '$tmp/out'"
check "8-task summary over the two dumps mpibind maps" "grep -q '^- 8 tasks (2 dumps)' '$tmp/out'"
check "one-task-per-core summary" "grep -q '^- one task per core (2 dumps)' '$tmp/out'"
check "the cases where gpubind is not faster are named" \
  "grep -q '^- gpubind faster than mpibind.s mapping alone in 9 of 11 cases; not in: dgx-h100 1 tasks (0.00), workstation-mixed 1 tasks (0.00)\$' '$tmp/out'"

# Bindings side by side: gpubind's order=gpu plan for 8 tasks on 12 MI300A TPX partitions gives
# the 4 tasks of two GPUs twice the cores, where its order=cpu plan (the stand-in's answer) gives
# every task 12: worse on the core spread, better on nothing.
export GPUBINDCTL=$ctl
python3 "$compare" --quality --mbench "$tmp/mbench" --gpubindctl "$ctl" --quality-tool "$quality" \
  --tasks 1,8,G "$fixtures/mi300a-tpx.xml" "$fixtures/workstation-mixed.xml" \
  "$fixtures/lumi-g.xml" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "a strictly worse case exits 1" '[[ $rc -eq 1 ]]'
check "the strictly worse case is listed with the metric that decides it" \
  "grep -qx '| mi300a-tpx | 8 | gpu | core_spread | core_spread=8 | core_spread=0 |' '$tmp/out'"
check "only that case is listed" "[[ \$(grep -c '^| [a-z]' '$tmp/out') -eq 2 ]]"
check "per order counts: the same plan is never worse, a task without a GPU always is" \
  "grep -qx -- '- order=gpu: strictly worse than mpibind in 1 of 6 cases, strictly better in 3' '$tmp/out' &&
   grep -qx -- '- order=cpu: strictly worse than mpibind in 0 of 6 cases, strictly better in 3' '$tmp/out'"
check "a dump mpibind cannot map is left out of the scores too" \
  "grep -q 'left out: lumi-g with 8 tasks: mpibind: error: mpibind crashed' '$tmp/out'"

run --tasks 8,x "$fixtures/dgx-h100.xml" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "a bad task count is refused (exit 2), named" \
  "[[ $rc -eq 2 ]] && grep -q \"'x' is not a task count\" '$tmp/err' && [[ ! -s '$tmp/out' ]]"
run "$tmp/absent.xml" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "a missing dump is refused (exit 2), named, before any table" \
  "[[ $rc -eq 2 ]] && grep -q 'absent.xml: no such file or folder' '$tmp/err' && [[ ! -s '$tmp/out' ]]"

finish
