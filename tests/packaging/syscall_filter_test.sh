#!/usr/bin/env bash
# The unit's system call filter holds what gpubindd really does: the daemon runs under strace
# with live topology discovery, serves gRPC (status, topology, plan, bench) and compact-protocol
# requests, reloads on SIGHUP and stops on SIGTERM; every system call it made must be allowed by
# gpubindd.service's SystemCallFilter lines (expanded by systemd-analyze).
# Usage: syscall_filter_test.sh UNIT_DIR PATH/TO/gpubindd PATH/TO/gpubindctl   (exit 77 = skipped)
set -uo pipefail
units=$1
daemon=$2
ctl=$3
for cmd in strace systemd-analyze python3; do
  command -v "$cmd" >/dev/null || { echo "skipped: $cmd is needed"; exit 77; }
done
tmp=$(mktemp -d)
pid=""
cleanup() { [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
socket=$tmp/gpubind.sock

strace -f -qq -o "$tmp/trace" "$daemon" --foreground --socket "$socket" --topology live \
  2>"$tmp/log" &
pid=$!
for _ in $(seq 400); do [[ -S "$socket" ]] && break; sleep 0.05; done
[[ -S "$socket" ]] || { echo "FAIL daemon did not start"; cat "$tmp/log"; exit 1; }
# Signals go to the daemon itself, not to strace.
daemon_pid=$(pgrep -P "$pid" -x gpubindd)
[[ -n "$daemon_pid" ]] || { echo "FAIL no gpubindd under strace"; exit 1; }
"$ctl" --socket "$socket" status >/dev/null &&
  "$ctl" --socket "$socket" topology >/dev/null &&
  "$ctl" --socket "$socket" plan --ntasks 2 --svg "$tmp/p.svg" >/dev/null &&
  "$ctl" --socket "$socket" bench --clients 4 --requests 200 >/dev/null ||
  { echo "FAIL gRPC calls"; exit 1; }
python3 - "$socket" <<'PY' || { echo "FAIL compact request"; exit 1; }
import socket, struct, sys
# binder.proto's PlanRequest: ntasks=1 (field 3), then an empty one (ntasks 0, refused).
for body in (b"\x18\x01", b""):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"GPUBIND\x02" + struct.pack("<I", len(body)) + body)
    status, size = struct.unpack("<BI", s.recv(5, socket.MSG_WAITALL))
    s.recv(size, socket.MSG_WAITALL)
PY
kill -HUP "$daemon_pid"
sleep 1
"$ctl" --socket "$socket" status >/dev/null || { echo "FAIL after SIGHUP"; exit 1; }
kill -TERM "$daemon_pid"
wait "$pid"
rc=$?
pid=""
[[ $rc -eq 0 ]] || { echo "FAIL gpubindd exit $rc under strace"; cat "$tmp/log"; exit 1; }
grep -q "reload" "$tmp/log" || { echo "FAIL no reload logged"; cat "$tmp/log"; exit 1; }

python3 - "$units/gpubindd.service" "$tmp/trace" <<'PY'
import re, subprocess, sys

def expand(name, seen=None):
    """The system calls of a filter group (recursively) or the call itself."""
    if not name.startswith("@"):
        return {name}
    out = subprocess.run(["systemd-analyze", "syscall-filter", name], capture_output=True,
                         text=True, check=True).stdout
    calls = set()
    for line in out.splitlines()[1:]:
        item = line.strip()
        if item and not item.startswith("#"):
            calls |= expand(item)
    return calls

allowed, denied = set(), set()
for line in open(sys.argv[1]):
    m = re.match(r"SystemCallFilter=(~?)(.*)", line.strip())
    if not m:
        continue
    names = set()
    for item in m.group(2).split():
        names |= expand(item)
    (denied if m.group(1) else allowed).update(names)
permitted = allowed - denied
made = set()
for line in open(sys.argv[2]):
    m = re.match(r"\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]", line)
    if m and not line.split(None, 1)[1].startswith("+++") and not line.split(None, 1)[1].startswith("---"):
        made.add(m.group(1))
made.discard("exit")  # strace's name for the thread exit it sees as exit, not a call to filter
outside = sorted(made - permitted)
print(f"gpubindd made {len(made)} distinct system calls; the unit permits {len(permitted)}")
if outside:
    print("FAIL calls outside the unit's SystemCallFilter: " + ", ".join(outside))
    sys.exit(1)
print("ok   every call is inside the filter: " + ", ".join(sorted(made)))
PY
