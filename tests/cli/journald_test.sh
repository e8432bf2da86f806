#!/usr/bin/env bash
# gpubindd's plan records in a real systemd-journald: in a private mount namespace with its own
# /run, journald runs standalone (it makes /run/systemd/journal/socket itself), gpubindd runs as
# a systemd service would (JOURNAL_STREAM set, so it journals to the default socket), and
# `journalctl GPUBIND_JOB=123` finds job 123's plan with its fields, and only that job's.
# Skipped without root, unshare or systemd-journald.
# Usage: journald_test.sh PATH/TO/gpubindd FIXTURES_DIR
set -uo pipefail
daemon=$1
fixtures=$2
journald=/lib/systemd/systemd-journald
if [[ "${GPUBIND_JOURNALD_INSIDE:-}" != 1 ]]; then
  [[ $(id -u) -eq 0 ]] || { echo "needs root (a private /run for journald): skipped"; exit 77; }
  for tool in unshare journalctl "$journald"; do
    command -v "$tool" >/dev/null || { echo "$tool not installed: skipped"; exit 77; }
  done
  unshare --mount --propagation private -- mount -t tmpfs tmpfs /run 2>/dev/null ||
    { echo "cannot make a private /run here (no CAP_SYS_ADMIN?): skipped"; exit 77; }
  GPUBIND_JOURNALD_INSIDE=1 exec unshare --mount --propagation private -- "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
py=/usr/bin/python3
[[ -x $py ]] || py=python3

tmp=$(mktemp -d)
journald_pid=""
daemon_pid=""
cleanup() {
  [[ -n "$daemon_pid" ]] && kill "$daemon_pid" 2>/dev/null
  [[ -n "$journald_pid" ]] && kill "$journald_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

mount -t tmpfs tmpfs /run || { echo "cannot mount a private /run"; exit 1; }
mkdir -p /run/log/journal
"$journald" >"$tmp/journald.log" 2>&1 &
journald_pid=$!
for _ in $(seq 100); do [[ -S /run/systemd/journal/socket ]] && break; sleep 0.05; done
[[ -S /run/systemd/journal/socket ]] && ok "systemd-journald serves /run/systemd/journal/socket" ||
  { bad "journald did not start" "$(cat "$tmp/journald.log")"; finish; exit 1; }

socket=$tmp/gpubind.sock
env -u GPUBIND_JOURNAL_SOCKET JOURNAL_STREAM=8:4242 "$daemon" --foreground --socket "$socket" \
  --config "$fixtures/lumi-g.policy" --topology "$fixtures/lumi-g.xml" 2>"$tmp/daemon.log" &
daemon_pid=$!
for _ in $(seq 200); do [[ -S "$socket" ]] && break; sleep 0.05; done
[[ -S "$socket" ]] && ok "gpubindd started as a service would" ||
  { bad "gpubindd did not start" "$(cat "$tmp/daemon.log")"; finish; exit 1; }

# Compact plan requests as the plugin sends them: job 123 step 5 (4 tasks), job 456 step 0.
PYTHONPATH=$(dirname "$0") "$py" - "$socket" >"$tmp/asked.txt" 2>&1 <<'PY'
import sys
import compact_client
for job, step, ntasks in ((123, 5, 4), (456, 0, 8)):
    print(f"job {job} status {compact_client.ask_plan(sys.argv[1], job, step, ntasks)}")
PY
check "both plans answered" '[[ $(grep -c "status 0" "$tmp/asked.txt") -eq 2 ]]'

# journald writes what it received; journalctl reads the runtime journal it keeps under /run.
records() { journalctl -D /run/log/journal --no-pager -o json "$@" 2>/dev/null; }
for _ in $(seq 50); do [[ -n "$(records GPUBIND_JOB=456)" ]] && break; sleep 0.1; done
records GPUBIND_JOB=123 >"$tmp/job123.json"
"$py" - "$tmp/job123.json" "$daemon_pid" "$(hostname)" >"$tmp/fields.txt" 2>&1 <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
print("records", len(records))
for r in records:
    for key in ("GPUBIND_JOB", "GPUBIND_STEP", "GPUBIND_TASKS", "GPUBIND_SOURCE", "GPUBIND_WARNINGS",
                "GPUBIND_NODE", "PRIORITY", "SYSLOG_IDENTIFIER", "MESSAGE", "_TRANSPORT", "_PID"):
        print(f"{key}={r.get(key)}")
PY
check "journalctl GPUBIND_JOB=123 finds one record" 'grep -qx "records 1" "$tmp/fields.txt"'
for field in GPUBIND_JOB=123 GPUBIND_STEP=5 GPUBIND_TASKS=4 GPUBIND_SOURCE=worker GPUBIND_WARNINGS=0 \
  "GPUBIND_NODE=$(hostname)" PRIORITY=6 SYSLOG_IDENTIFIER=gpubindd _TRANSPORT=journal \
  "_PID=$daemon_pid" "MESSAGE=plan for job 123 step 5: 4 tasks (worker, 0 warnings)"; do
  check "journald's record: $field" 'grep -qxF "$field" "$tmp/fields.txt"'
done
check "job 456's plan is its own record" \
  '[[ $(records GPUBIND_JOB=456 | grep -c "\"GPUBIND_TASKS\":\"8\"") -eq 1 ]]'
finish
