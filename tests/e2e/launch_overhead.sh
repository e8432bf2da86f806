#!/usr/bin/env bash
# What gpubind adds to a step launch, measured side by side on the test cluster: alternating
# rounds of each pair of commands, medians and their ratio.
#   srun -n8 -O --gpu-bind-auto true   vs   srun -n8 -O true        (binding, with the daemon)
#   srun -n1 true with the plugin in plugstack.conf  vs  without     (loading the plugin)
# Usage: launch_overhead.sh BUILD_DIR [ROUNDS]   ($LAUNCH_JSON, if set, gets one JSON line a pair)
set -euo pipefail
build=$(cd "$1" && pwd)
rounds=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/slurm-cluster
dir=$(mktemp -d /tmp/gpubind-launch-XXXXXX)
trap '"$cluster" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
eval "$("$cluster" start "$dir" --nodes 1 --build "$build")"

ms() { # ms COMMAND...: wall time of one run in milliseconds
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m/1000}'; }

pair() {  # pair NAME SETUP_A "CMD A" SETUP_B "CMD B"
  local name=$1 setup_a=$2 cmd_a=$3 setup_b=$4 cmd_b=$5 a=() b=()
  eval "$setup_a"; eval "$cmd_a" >/dev/null 2>&1  # warm-up
  eval "$setup_b"; eval "$cmd_b" >/dev/null 2>&1
  for _ in $(seq "$rounds"); do
    eval "$setup_a"; a+=("$(ms bash -c "$cmd_a")")
    eval "$setup_b"; b+=("$(ms bash -c "$cmd_b")")
  done
  local ma mb
  ma=$(printf '%s\n' "${a[@]}" | median)
  mb=$(printf '%s\n' "${b[@]}" | median)
  printf '%-40s %8s ms   %-40s %8s ms   ratio %.3f\n' "$cmd_a" "$ma" "$cmd_b" "$mb" \
    "$(echo "$ma / $mb" | bc -l)"
  printf '{"pair":"%s","a":"%s","a_ms":%s,"b":"%s","b_ms":%s,"rounds":%d}\n' "$name" "$cmd_a" "$ma" \
    "$cmd_b" "$mb" "$rounds" >>"${LAUNCH_JSON:-/dev/null}"
}

echo "$rounds alternating rounds, medians"
pair bind ":" "srun -n8 -O --gpu-bind-auto true" ":" "srun -n8 -O true"
pair load "\"$cluster\" plugstack \"$dir\" timeout_ms=1000" "srun -n1 true # plugin loaded" \
  "printf '' > \"$dir/etc/plugstack.conf\"" "srun -n1 true # no plugin"
