#!/usr/bin/env bash
# The systemd units parse, reference a real daemon, and keep the sandbox tight.
# Usage: systemd_units_test.sh UNITS_DIR PATH/TO/gpubindd
set -uo pipefail
units=$1
daemon=$2
if ! command -v systemd-analyze >/dev/null; then
  echo "systemd-analyze not installed: unit checks skipped"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$units"/gpubindd.service "$units"/gpubindd.socket "$units"/gpubind-metrics.service \
  "$units"/gpubind-metrics.timer "$tmp"/
sed -i "s|/usr/sbin/gpubindd|$daemon|" "$tmp"/gpubindd.service
# The metrics service's gpubindctl: the built one beside the daemon.
sed -i "s|/usr/bin/gpubindctl|$(dirname "$daemon")/gpubindctl|" "$tmp"/gpubind-metrics.service
failed=0
out=$(cd "$tmp" && systemd-analyze verify --man=no gpubindd.socket gpubindd.service \
  gpubind-metrics.service gpubind-metrics.timer 2>&1)
if [[ $? -ne 0 || -n "$out" ]]; then echo "FAIL verify: $out"; failed=1; else echo "ok   verify"; fi
# Exposure is scored 0 (best) to 10; the threshold is in tenths.
report=$(systemd-analyze security --offline=true --threshold=15 "$tmp"/gpubindd.service 2>&1)
if [[ $? -ne 0 ]]; then echo "FAIL security: $(tail -1 <<<"$report")"; failed=1; else
  echo "ok   security: $(grep 'Overall exposure' <<<"$report")"
fi
for setting in 'Type=notify' 'User=gpubind' 'NoNewPrivileges=yes' 'ProtectSystem=strict' \
  'RestrictAddressFamilies=AF_UNIX' 'WatchdogSec=' 'ExecReload=/bin/kill -HUP $MAINPID' \
  'MemoryMax=' 'LimitNOFILE=' 'CPUQuota=' 'TasksMax='; do
  grep -qF -- "$setting" "$units"/gpubindd.service || { echo "FAIL missing $setting"; failed=1; }
done
# The value of KEY in [SECTION] of a unit file, the last one set, as systemd reads it.
setting() { # setting FILE SECTION KEY
  awk -v section="[$2]" -v key="$3" '/^\[/ { inside = ($0 == section) }
    inside && index($0, key "=") == 1 { value = substr($0, length(key) + 2) } END { print value }' "$1"
}
# Restarts that a kill loop cannot exhaust: restarted whatever ended it, soon, and never given up on
# (a unit past its start limit takes the socket down with it).
service=$units/gpubindd.service
[[ $(setting "$service" Service Restart) == always ]] || { echo "FAIL Restart is not always"; failed=1; }
[[ $(setting "$service" Unit StartLimitIntervalSec) == 0 ]] ||
  { echo "FAIL [Unit] StartLimitIntervalSec is not 0: a kill loop could exhaust the start limit"; failed=1; }
restart_sec=$(setting "$service" Service RestartSec)
restart_us=$(systemd-analyze timespan "$restart_sec" 2>/dev/null | sed -nE 's/^ *(μs|us): ([0-9]+)$/\2/p')
# Well within a launch's 1 s, and never under 100 ms: restarts closer than that could reach the
# socket's trigger limit (20 in 2 s), which stops it listening.
[[ -n $restart_sec && -n $restart_us ]] && ((restart_us >= 100000 && restart_us <= 500000)) ||
  { echo "FAIL RestartSec='$restart_sec': not within 100 to 500 ms"; failed=1; }
[[ $(setting "$units"/gpubindd.socket Socket Accept) == no ]] || { echo "FAIL Accept"; failed=1; }
grep -q '^SocketMode=0666$' "$units"/gpubindd.socket || { echo "FAIL SocketMode"; failed=1; }
grep -q '^ListenStream=/run/gpubind/gpubind.sock$' "$units"/gpubindd.socket || { echo "FAIL ListenStream"; failed=1; }
# The fallback reports' spool beside the socket: the daemon's, writable by it alone.
[[ $(setting "$service" Service RuntimeDirectory) == gpubind/fallback-reports &&
  $(setting "$service" Service RuntimeDirectoryMode) == 0755 ]] ||
  { echo "FAIL RuntimeDirectory: the fallback spool must be gpubind/fallback-reports, 0755"; failed=1; }
# The metrics timer runs the metrics service every minute, into a folder root owns all the way up
# (the service makes it), sandboxed, and a hung run is stopped.
metrics=$units/gpubind-metrics.service
grep -q '^OnUnitActiveSec=1min$' "$units"/gpubind-metrics.timer || { echo "FAIL timer period"; failed=1; }
grep -q 'metrics --audit --textfile /var/lib/gpubind-metrics/gpubind.prom --record /run/gpubind-audit$' "$metrics" ||
  { echo "FAIL metrics textfile"; failed=1; }
# The records of running jobs (every user's): root's alone, kept between the runs.
[[ $(setting "$metrics" Service RuntimeDirectory) == gpubind-audit &&
  $(setting "$metrics" Service RuntimeDirectoryMode) == 0700 &&
  $(setting "$metrics" Service RuntimeDirectoryPreserve) == yes ]] ||
  { echo "FAIL the audit records' folder: gpubind-audit, 0700, preserved"; failed=1; }
[[ $(setting "$metrics" Service StateDirectory) == gpubind-metrics &&
  $(setting "$metrics" Service StateDirectoryMode) == 0755 ]] ||
  { echo "FAIL the metrics folder: StateDirectory=gpubind-metrics, 0755"; failed=1; }
[[ -n $(setting "$metrics" Service TimeoutStartSec) ]] ||
  { echo "FAIL the metrics service has no TimeoutStartSec (a oneshot waits forever)"; failed=1; }
report=$(systemd-analyze security --offline=true --threshold=20 "$tmp"/gpubind-metrics.service 2>&1)
if [[ $? -ne 0 ]]; then echo "FAIL metrics service security: $(tail -1 <<<"$report")"; failed=1; else
  echo "ok   metrics service security: $(grep 'Overall exposure' <<<"$report")"
fi
[[ $failed -eq 0 ]] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $failed
