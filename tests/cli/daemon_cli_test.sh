#!/usr/bin/env bash
# gpubindctl against a running gpubindd: same answers as offline, status, bench, clean stop.
# Usage: daemon_cli_test.sh PATH/TO/gpubindd PATH/TO/gpubindctl FIXTURES_DIR
set -uo pipefail
daemon=$1
ctl=$2
fixtures=$3
tmp=$(mktemp -d)
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/lib.sh"

topology=$fixtures/lumi-g.xml
policy=$fixtures/lumi-g.policy
socket=$tmp/gpubind.sock
"$daemon" --foreground --socket "$socket" --config "$policy" --topology "$topology" 2>"$tmp/log" &
pid=$!
for _ in $(seq 200); do [[ -S "$socket" ]] && break; sleep 0.05; done
[[ -S "$socket" ]] && ok "daemon started" || { bad "daemon started"; cat "$tmp/log"; exit 1; }

same() {  # same NAME ARGS...: offline and daemon outputs must be identical
  local name=$1
  shift
  local offline online
  offline=$("$ctl" "$@" --topology "$topology" --policy "$policy" 2>&1)
  online=$("$ctl" --socket "$socket" "$@" 2>&1)
  if [[ "$offline" == "$online" && -n "$offline" ]]; then ok "$name"; else
    bad "$name"; diff <(echo "$offline") <(echo "$online") | head -5
  fi
}
same "topology json" topology --json
same "topology text" topology
same "plan 8 json" plan --ntasks 8 --json
same "plan 24 table" plan --ntasks 24
same "plan order cpu" plan --ntasks 8 --order cpu --json
same "plan subset" plan --ntasks 3 --gpus 2,5 --cpus 0-40 --cpus-per-task 4 --json
# explain on the daemon's node: its topology and policy file, its own plan.
same "explain 8" explain --ntasks 8
same "explain order cpu json" explain --ntasks 8 --order cpu --json
same "explain subset rank" explain --ntasks 3 --gpus 2,5 --cpus 0-40 --rank 1
# The picture from the daemon (plan, topology and reserved CPUs fetched) equals the offline one.
"$ctl" plan --ntasks 8 --topology "$topology" --policy "$policy" --svg "$tmp/offline.svg" >/dev/null
"$ctl" --socket "$socket" plan --ntasks 8 --svg "$tmp/online.svg" >/dev/null
if [[ -s "$tmp/online.svg" ]] && cmp -s "$tmp/offline.svg" "$tmp/online.svg"; then ok "plan svg"; else
  bad "plan svg"; diff "$tmp/offline.svg" "$tmp/online.svg" | head -5
fi
out=$("$ctl" --socket "$socket" plan --ntasks 1 --gpus 9 2>&1)
rc=$?
[[ $rc -eq 2 && "$out" == *"does not fit the daemon's topology: GPU 9 does not exist"* ]] && ok "plan refused" ||
  bad "plan refused: $rc $out"

status=$("$ctl" --socket "$socket" status --json)
if grep -q '"policy_generation":1' <<<"$status" && grep -q '"requests":' <<<"$status" &&
  grep -q "\"policy\":\"$policy\"" <<<"$status"; then ok "status json"; else bad "status json: $status"; fi
"$ctl" --socket "$socket" status | grep -q "^policy    $policy (generation 1)$" && ok "status text" || bad "status text"

bench=$("$ctl" --socket "$socket" bench --clients 2 --requests 400 --json)
if grep -qE '^\{"p50_us":[0-9.]+,"p99_us":[0-9.]+,"p999_us":[0-9.]+,"plans_per_s":[0-9.]+,"errors":0,' <<<"$bench"; then
  ok "bench json"
else
  bad "bench json: $bench"
fi
floor=$("$ctl" --socket "$socket" bench --clients 1 --requests 200 --floor --no-cache --json)
grep -q '"floor":{"p50_us":' <<<"$floor" && grep -q '"empty_rpc":{"p50_us":' <<<"$floor" &&
  grep -q '"cache":false' <<<"$floor" && ok "bench floors" || bad "bench floors: $floor"

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
[[ $rc -eq 0 ]] && ok "SIGTERM exits 0" || bad "SIGTERM exit $rc"
[[ ! -e "$socket" ]] && ok "socket removed" || bad "socket removed"

finish
