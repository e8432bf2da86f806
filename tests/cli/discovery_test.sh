#!/usr/bin/env bash
# Live discovery leaves hwloc's GPU runtime plugins out unless the policy asks for them: with a
# stand-in OpenCL plugin on HWLOC_PLUGINS_PATH, its phantom GPU appears only with
# gpu_runtime_discovery: true.
# Usage: discovery_test.sh GPUBINDCTL PLUGIN_DIR
set -uo pipefail
ctl=$1
export HWLOC_PLUGINS_PATH=$2
failures=0
check() {  # NAME EXPECTED(yes|no) [gpubindctl args...]
  local name=$1 expected=$2
  shift 2
  local out
  out=$("$ctl" topology --topology live "$@" 2>&1)
  local seen=no
  [[ "$out" == *opencl9d9* ]] && seen=yes
  if [[ $seen == "$expected" ]]; then
    echo "ok   $name"
  else
    echo "FAIL $name: phantom GPU listed: $seen, expected $expected"
    echo "$out"
    failures=$((failures + 1))
  fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'gpu_runtime_discovery: true\n' >"$tmp/runtimes.conf"
check "default: GPU runtime plugins left out" no
check "gpu_runtime_discovery: true lets them run" yes --policy "$tmp/runtimes.conf"
exit $((failures > 0))
