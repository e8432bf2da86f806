#!/usr/bin/env bash
# gpubindd under load: CLIENTS concurrent clients send PER_CLIENT Plan calls each (gpubindctl
# bench). No call may fail, and the daemon's resident memory after the load must be within 10% of
# what it was before it (measured after a warm-up that opens as many connections).
# Usage: load_test.sh PATH/TO/gpubindd PATH/TO/gpubindctl FIXTURES_DIR [CLIENTS] [PER_CLIENT]
# Prints the bench report; the last line is a JSON summary.
set -uo pipefail
daemon=$1
ctl=$2
fixtures=$3
clients=${4:-64}
per_client=${5:-200}
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null  # reaped here, so the shell does not report it killed
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
socket=$tmp/gpubind.sock
"$daemon" --foreground --socket "$socket" --config "$fixtures/lumi-g.policy" \
  --topology "$fixtures/lumi-g.xml" 2>"$tmp/log" &
pid=$!
for _ in $(seq 200); do [[ -S "$socket" ]] && break; sleep 0.05; done
[[ -S "$socket" ]] || { echo "FAIL daemon did not start"; cat "$tmp/log"; exit 1; }

rss_mb() { "$ctl" --socket "$socket" status --json | sed -nE 's/.*"rss_bytes":([0-9]+).*/\1/p' | awk '{printf "%.1f", $1 / 1e6}'; }
# Warm-up: as many connections, a tenth of the calls.
"$ctl" --socket "$socket" bench --clients "$clients" --requests $((clients * (per_client / 10 + 1))) >/dev/null ||
  { echo "FAIL warm-up"; exit 1; }
before=$(rss_mb)
"$ctl" --socket "$socket" --timeout 30000 bench --clients "$clients" --requests $((clients * per_client)) \
  --json >"$tmp/bench.json"
rc=$?
after=$(rss_mb)
cat "$tmp/bench.json"
kill -0 "$pid" 2>/dev/null || { echo "FAIL the daemon died under load"; cat "$tmp/log"; exit 1; }
errors=$(sed -nE 's/.*"errors":([0-9]+).*/\1/p' "$tmp/bench.json")
p99=$(sed -nE 's/^\{"p50_us":[0-9.]+,"p99_us":([0-9.]+).*/\1/p' "$tmp/bench.json")
growth=$(awk -v b="$before" -v a="$after" 'BEGIN {printf "%.1f", (a - b) * 100 / b}')
echo "{\"clients\":$clients,\"requests\":$((clients * per_client)),\"errors\":${errors:-null},\"p99_us\":${p99:-null},\"rss_before_mb\":$before,\"rss_after_mb\":$after,\"rss_growth_pct\":$growth}"
failed=0
[[ $rc -eq 0 && "$errors" == 0 ]] && echo "ok   $((clients * per_client)) calls from $clients clients, 0 errors" ||
  { echo "FAIL bench exit $rc, errors ${errors:-?}"; failed=1; }
awk -v g="$growth" 'BEGIN {exit !(g <= 10 && g >= -10)}' &&
  echo "ok   resident memory $before MB -> $after MB ($growth%)" ||
  { echo "FAIL resident memory $before MB -> $after MB ($growth%)"; failed=1; }
exit $failed
