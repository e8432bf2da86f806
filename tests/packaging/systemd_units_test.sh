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
cp "$units"/gpubindd.service "$units"/gpubindd.socket "$tmp"/
sed -i "s|/usr/sbin/gpubindd|$daemon|" "$tmp"/gpubindd.service
failed=0
out=$(cd "$tmp" && systemd-analyze verify --man=no gpubindd.socket gpubindd.service 2>&1)
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
grep -q '^SocketMode=0666$' "$units"/gpubindd.socket || { echo "FAIL SocketMode"; failed=1; }
grep -q '^ListenStream=/run/gpubind/gpubind.sock$' "$units"/gpubindd.socket || { echo "FAIL ListenStream"; failed=1; }
[[ $failed -eq 0 ]] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $failed
