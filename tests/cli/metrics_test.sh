#!/usr/bin/env bash
# gpubindctl metrics against a running gpubindd: plans counted by source, a launch's fallback
# report counted, the text accepted by promtool, served by a real node_exporter's textfile
# collector over loopback, each plan of a job in a journal record, and gpubind_daemon_up 0 (exit
# 1) once the daemon is gone. The sample alert rules of docs/admin.md pass promtool.
# A launch that planned in-process (gpubind-run, the daemon gone) leaves a report the next
# daemon counts.
# Usage: metrics_test.sh PATH/TO/gpubindd PATH/TO/gpubindctl PATH/TO/gpubind-run FIXTURES_DIR DOCS_DIR
set -uo pipefail
daemon=$1
ctl=$2
runner=$3
fixtures=$4
docs=$5
tmp=$(mktemp -d)
pid=""
exporter=""
cleanup() {
  [[ -n "$pid" ]] && { kill -9 "$pid"; wait "$pid"; } 2>/dev/null
  [[ -n "$exporter" ]] && kill "$exporter" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/lib.sh"
py=/usr/bin/python3
[[ -x $py ]] || py=python3

socket=$tmp/gpubind.sock
journal=$tmp/journal.sock
start_daemon() {
  GPUBIND_JOURNAL_SOCKET=$journal "$daemon" --foreground --socket "$socket" \
    --config "$fixtures/lumi-g.policy" --topology "$fixtures/lumi-g.xml" 2>"$tmp/log" &
  pid=$!
  for _ in $(seq 200); do [[ -S "$socket" ]] && break; sleep 0.05; done
  [[ -S "$socket" ]] && ok "daemon started" || { bad "daemon started" "$(cat "$tmp/log")"; exit 1; }
}
start_daemon
spool=$tmp/fallback-reports
check "the daemon made the fallback spool, writable by its owner only" \
  '[[ -d $spool && $(stat -c %a "$spool") == 755 ]]'

ctl() { "$ctl" --socket "$socket" "$@"; }
value() {  # value SERIES: the sample's value in $tmp/metrics.txt
  awk -v s="$1" '$1 == s {print $2}' "$tmp/metrics.txt"
}

# Plans: 2 fresh (worker), 2 from the cache, one naming a GPU the node lacks.
for args in "--ntasks 8" "--ntasks 8" "--ntasks 8" "--ntasks 3 --gpus 2,5"; do
  ctl plan $args --json >/dev/null || bad "plan $args"
done
ctl plan --ntasks 2 --gpus 99 >/dev/null 2>&1 && bad "a GPU the node lacks is refused"

# A compact request of job 123 and a body that is no request (refused), as the plugin sends them;
# the journal's datagram for job 123 received where GPUBIND_JOURNAL_SOCKET points.
PYTHONPATH=$(dirname "$0") "$py" - "$socket" "$journal" >"$tmp/journal.txt" 2>&1 <<'PY'
import socket, sys
import compact_client
sock_path, journal_path = sys.argv[1], sys.argv[2]
journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
journal.bind(journal_path)
journal.settimeout(3)
print("plan status", compact_client.ask_plan(sock_path, job=123, step=5, ntasks=4))
print("garbage status", compact_client.ask(sock_path, b"\xff\xff\xff"))
data = journal.recv(65536).decode()
for line in data.splitlines():
    print(line)
PY
check "a compact plan of job 123 is answered" 'grep -qx "plan status 0" "$tmp/journal.txt"'
check "a body that is no request is refused" 'grep -qx "garbage status 1" "$tmp/journal.txt"'
for field in GPUBIND_JOB=123 GPUBIND_STEP=5 GPUBIND_TASKS=4 GPUBIND_SOURCE=worker \
  GPUBIND_WARNINGS=0 PRIORITY=6 SYSLOG_IDENTIFIER=gpubindd "GPUBIND_NODE=$(hostname)" \
  "MESSAGE=plan for job 123 step 5: 4 tasks (worker, 0 warnings)"; do
  check "journal record: $field" 'grep -qxF "$field" "$tmp/journal.txt"'
done

# A launch's fallback report, as the plugin leaves it.
echo "unavailable: gpubindd at $socket: daemon unavailable: not connected" >"$spool/9.0.1.abc"

ctl metrics >"$tmp/metrics.txt"
check "metrics exits 0" '[[ $? -eq 0 ]]'
check "gpubind_daemon_up 1" '[[ $(value gpubind_daemon_up) == 1 ]]'
check "plans from the cache" '[[ $(value "gpubind_plans_total{source=\"cache\"}") == 2 ]]'
check "plans made by workers" '[[ $(value "gpubind_plans_total{source=\"worker\"}") == 3 ]]'
check "plans refused" '[[ $(value "gpubind_plans_total{source=\"refused\"}") == 1 ]]'
check "plans not fitting the node" \
  '[[ $(value "gpubind_plans_total{source=\"node_mismatch\"}") == 1 ]]'
check "histogram +Inf bucket = count = answered plans" \
  '[[ $(value "gpubind_plan_duration_seconds_bucket{le=\"+Inf\"}") == 5 &&
     $(value gpubind_plan_duration_seconds_count) == 5 ]]'
check "the fallback report counted" \
  '[[ $(value "gpubind_fallbacks_total{reason=\"unavailable\"}") == 1 ]]'
check "the report removed once counted" '[[ -z $(ls -A "$spool") ]]'
check "generations and reloads" \
  '[[ $(value gpubind_policy_generation) == 1 && $(value "gpubind_reloads_total{result=\"succeeded\"}") == 0 ]]'

kill -HUP "$pid"
for _ in $(seq 100); do grep -q "reloaded" "$tmp/log" && break; sleep 0.05; done
ctl metrics >"$tmp/metrics.txt"
check "a reload counted" '[[ $(value "gpubind_reloads_total{result=\"succeeded\"}") == 1 &&
  $(value gpubind_policy_generation) == 2 ]]'
check "a report is counted once" \
  '[[ $(value "gpubind_fallbacks_total{reason=\"unavailable\"}") == 1 ]]'

promtool=$(command -v promtool || true)
if [[ -n "$promtool" ]]; then
  out=$("$promtool" check metrics <"$tmp/metrics.txt" 2>&1)
  check "promtool check metrics says nothing" '[[ $? -eq 0 && -z "$out" ]]' || echo "$out"
  # The sample alert rules in admin.md, as an admin would copy them.
  awk '/^```yaml$/ {on = 1; next} /^```$/ {on = 0} on' "$docs/admin.md" >"$tmp/rules.yml"
  out=$("$promtool" check rules "$tmp/rules.yml" 2>&1)
  check "admin.md's alert rules pass promtool" '[[ $? -eq 0 && -s $tmp/rules.yml ]]' ||
    echo "$out"
else
  echo "skip promtool checks: promtool not installed (Debian package prometheus)"
fi

# --textfile for node_exporter, and node_exporter serving it.
mkdir "$tmp/textfile"
ctl metrics --textfile "$tmp/textfile/gpubind.prom"
check "--textfile exits 0" '[[ $? -eq 0 ]]'
check "--textfile leaves the file alone" \
  '[[ $(ls "$tmp/textfile") == gpubind.prom ]] && grep -qx "gpubind_daemon_up 1" "$tmp/textfile/gpubind.prom"'
ctl metrics --textfile "$tmp/textfile/gpubind.txt" 2>/dev/null
check "--textfile refuses a name node_exporter would skip" '[[ $? -eq 2 ]]'

node_exporter=$(command -v prometheus-node-exporter || command -v node_exporter || true)
if [[ -n "$node_exporter" ]]; then
  port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$node_exporter" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults \
    --collector.textfile --collector.textfile.directory="$tmp/textfile" 2>"$tmp/exporter.log" &
  exporter=$!
  scraped=""
  for _ in $(seq 100); do
    scraped=$(curl -sf "http://127.0.0.1:$port/metrics") && break
    sleep 0.1
  done
  check "node_exporter serves gpubind_daemon_up" 'grep -qx "gpubind_daemon_up 1" <<<"$scraped"'
  check "node_exporter serves the plan counts" \
    'grep -qx "gpubind_plans_total{source=\"cache\"} 2" <<<"$scraped"'
  check "node_exporter serves the histogram" \
    'grep -q "^gpubind_plan_duration_seconds_bucket{le=\"+Inf\"} 5$" <<<"$scraped"'
  check "node_exporter read the file without error" \
    'grep -q "^node_textfile_scrape_error 0$" <<<"$scraped"'
else
  echo "skip node_exporter: not installed (Debian package prometheus-node-exporter)"
fi

# The daemon gone: the file still written, saying so, and exit 1.
kill "$pid"
wait "$pid" 2>/dev/null
pid=""
"$ctl" --socket "$socket" --timeout 500 metrics --textfile "$tmp/textfile/gpubind.prom" 2>"$tmp/err"
check "daemon gone: exit 1" '[[ $? -eq 1 ]]'
check "daemon gone: gpubind_daemon_up 0 written" \
  'grep -qx "gpubind_daemon_up 0" "$tmp/textfile/gpubind.prom"'
if [[ -n "$promtool" ]]; then
  check "daemon gone: promtool accepts it" \
    '[[ -z $("$promtool" check metrics <"$tmp/textfile/gpubind.prom" 2>&1) ]]'
fi
if [[ -n "$exporter" ]]; then
  check "node_exporter serves gpubind_daemon_up 0" \
    'curl -sf "http://127.0.0.1:$port/metrics" | grep -qx "gpubind_daemon_up 0"'
fi

# A launch while the daemon is gone plans in-process and leaves its report; the next daemon
# counts it.
echo "optional spank_gpubind.so socket=$socket on_error=fallback" >"$tmp/plugstack.conf"
out=$(env -u SLURM_LOCALID -u SLURM_JOB_ID -u SLURM_STEP_GPUS -u CUDA_VISIBLE_DEVICES \
  -u ROCR_VISIBLE_DEVICES -u GPUBIND_BOUND LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
  "$runner" --plugstack "$tmp/plugstack.conf" true 2>&1)
check "gpubind-run planned in-process" '[[ $? -eq 0 && "$out" == *"planned in-process instead"* ]]' ||
  echo "$out"
check "its fallback report left in the spool" \
  '[[ $(ls "$spool" | wc -l) == 1 ]] && grep -q "^unavailable: " "$spool"/*'
start_daemon
ctl metrics >"$tmp/metrics.txt"
check "the next daemon counts the launch's fallback" \
  '[[ $(value "gpubind_fallbacks_total{reason=\"unavailable\"}") == 1 ]]'
finish
