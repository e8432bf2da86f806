#!/usr/bin/env bash
# What administrators read cannot be forged or turned by a local user (root only: the attacker is
# uid 5001, as tools would drop to it).
#   log-text     the daemon's text log (stderr, --log-level debug: every refusal is logged) while
#                uid 5001 sends requests whose hardware names hold a newline, a journald priority
#                prefix and a fake gpubindd line: every line is one of the daemon's, none forged;
#                the requests are refused as malformed, and only the well-formed one that names a
#                bus id the node lacks counts as node_mismatch
#   log-journal  the same on a journal stream into a real systemd-journald (private mount
#                namespace, as the unit's StandardError=journal): no record of priority 0-3, none
#                whose message is the forged text
#   textfile     root's `gpubindctl metrics --textfile` against a folder another user can change
#                (theirs, group- or world-writable, behind a link or under a parent of theirs),
#                links and a FIFO planted beside the file: refused with the reason, the victim
#                (a root-owned 0600 file) untouched, nothing blocks; into a root-owned folder the
#                file is written whole, a link planted at its name replaced, not followed
# Usage: admin_views_test.sh BIN_DIR FIXTURES_DIR CASE
set -uo pipefail
bin=${1:?usage: admin_views_test.sh BIN_DIR FIXTURES_DIR CASE}
fixtures=${2:?}
case_name=${3:?}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../cli/lib.sh"
py=/usr/bin/python3
[[ -x $py ]] || py=python3
[[ $(id -u) -eq 0 ]] || { echo "SKIP: run as root: the attacker must be another uid"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
as_user() { setpriv --reuid 5001 --regid 5001 --clear-groups -- "$@"; }

if [[ $case_name == log-journal && "${GPUBIND_JOURNALD_INSIDE:-}" != 1 ]]; then
  journald=/lib/systemd/systemd-journald
  for tool in unshare journalctl systemd-cat "$journald"; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
  done
  unshare --mount --propagation private -- mount -t tmpfs tmpfs /run 2>/dev/null ||
    { echo "SKIP: cannot make a private /run here (no CAP_SYS_ADMIN?)"; exit 77; }
  GPUBIND_JOURNALD_INSIDE=1 exec unshare --mount --propagation private -- "$0" "$@"
fi

tmp=$(mktemp -d)
chmod 755 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
socket=$tmp/gpubind.sock

wait_for_socket() {
  for _ in $(seq 200); do [[ -S $socket ]] && return 0; sleep 0.05; done
  bad "the daemon did not start" "$(cat "$tmp"/daemon.* 2>/dev/null)"
  finish
  exit 1
}

forge() { as_user "$py" "$here/forge_request.py" "$socket" "$@" >"$tmp/asked.txt" 2>&1; }

counts() {  # refusals by cause, as gpubindctl metrics prints them
  "$bin/gpubindctl" --socket "$socket" metrics >"$tmp/metrics.txt" 2>&1
  grep '^gpubind_refusals_total' "$tmp/metrics.txt"
}

case $case_name in
  log-text)
    "$bin/gpubindd" --foreground --socket "$socket" --log-level debug \
      --topology "$fixtures/lumi-g.xml" --config "$fixtures/lumi-g.policy" 2>"$tmp/daemon.log" &
    pids+=($!)
    wait_for_socket
    forge
    check "every forged request was answered (refused)" \
      '[[ $(grep -c " [1-9][0-9]*$" "$tmp/asked.txt") -eq 6 ]]'
    kill "${pids[0]}"
    wait "${pids[0]}" 2>/dev/null
    pids=()
    check "no line of the log is the forged one" '! grep -q "^2026-11-28T00:00:00 gpubindd error: FORGED" "$tmp/daemon.log"'
    check "no line starts a journald record" '! grep -q "^<[0-7]>" "$tmp/daemon.log"'
    check "every line is the daemon's own (a timestamp, gpubindd, a level)" \
      '! grep -vqE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8} gpubindd (error|warning|info|debug): " "$tmp/daemon.log"'
    check "the refusals quote the forged text escaped" 'grep -q "x\\\\n<0>gpubindd: FORGED" "$tmp/daemon.log"'
    "$bin/gpubindd" --foreground --socket "$socket" --topology "$fixtures/lumi-g.xml" \
      --config "$fixtures/lumi-g.policy" 2>"$tmp/daemon2.log" &
    pids+=($!)
    wait_for_socket
    forge
    counted=$(counts)
    check "five malformed refusals, one node_mismatch: a forged request is no node fault" \
      '[[ "$counted" == *"cause=\"malformed\"} 5"* && "$counted" == *"cause=\"node_mismatch\"} 1"* ]]'
    ;;
  log-journal)
    mount -t tmpfs tmpfs /run || { echo "FAIL: cannot mount a private /run"; exit 1; }
    mkdir -p /run/log/journal
    /lib/systemd/systemd-journald >"$tmp/journald.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do [[ -S /run/systemd/journal/stdout ]] && break; sleep 0.05; done
    [[ -S /run/systemd/journal/stdout ]] || { echo "FAIL: journald did not start"; exit 1; }
    # As the unit runs it: stderr a journal stream taking "<N>" prefixes, JOURNAL_STREAM set.
    JOURNAL_STREAM=8:4242 systemd-cat -t gpubindd --level-prefix=true "$bin/gpubindd" --foreground \
      --socket "$socket" --log-level debug --topology "$fixtures/lumi-g.xml" \
      --config "$fixtures/lumi-g.policy" &
    pids+=($!)
    wait_for_socket
    forge
    sleep 1
    journalctl -D /run/log/journal --no-pager -o json SYSLOG_IDENTIFIER=gpubindd >"$tmp/records.json"
    "$py" - "$tmp/records.json" >"$tmp/records.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.strip():
        r = json.loads(line)
        print(r.get("PRIORITY"), repr(r.get("MESSAGE")))
PY
    check "the daemon's records reached the journal" '[[ $(grep -c . "$tmp/records.txt") -ge 5 ]]'
    check "no record of priority emerg..err (0-3)" '! grep -qE "^[0-3] " "$tmp/records.txt"'
    check "no record is the forged text" '! grep -q "FORGED-JOURNAL emergency'"'"'$" "$tmp/records.txt" && ! grep -q "^[0-9] '"'"'gpubindd: FORGED" "$tmp/records.txt"'
    check "the refusals are one record each, the forged text escaped in them" \
      'grep -q "x\\\\\\\\n<0>gpubindd: FORGED" "$tmp/records.txt"'
    ;;
  textfile)
    "$bin/gpubindd" --foreground --socket "$socket" --topology "$fixtures/lumi-g.xml" \
      --config "$fixtures/lumi-g.policy" 2>"$tmp/daemon.log" &
    pids+=($!)
    wait_for_socket
    victim=$tmp/victim
    echo "root's secret" >"$victim"
    chmod 600 "$victim"
    metrics() { timeout 20 "$bin/gpubindctl" --socket "$socket" metrics --textfile "$1" 2>&1; }
    untouched() { [[ $(cat "$victim") == "root's secret" && $(stat -c %a "$victim") == 600 ]]; }
    # A folder of theirs, with a link to the victim at the file's name and links and a FIFO at
    # every name a writer might use beside it.
    mkdir "$tmp/theirs" && chown 5001:5001 "$tmp/theirs"
    as_user ln -s "$victim" "$tmp/theirs/gpubind.prom"
    for pid in $(seq 1 400); do as_user ln -s "$victim" "$tmp/theirs/gpubind.prom.tmp.$pid"; done
    as_user mkfifo "$tmp/theirs/.gpubind.prom.tmp"
    out=$(metrics "$tmp/theirs/gpubind.prom")
    rc=$?
    check "a folder another user owns: refused, saying whose it is" \
      '[[ $rc -ne 0 && $rc -ne 124 && "$out" == *"belongs to uid 5001"* ]]'
    check "the victim is untouched" untouched
    for mode in 775 777 1777; do
      mkdir -p "$tmp/open$mode" && chmod "$mode" "$tmp/open$mode"
      out=$(metrics "$tmp/open$mode/gpubind.prom")
      check "a folder of mode $mode: refused, others could change it" \
        '[[ $? -ne 0 && "$out" == *"writable by others"* && ! -e $tmp/open$mode/gpubind.prom ]]'
    done
    mkdir -p "$tmp/parent/textfile" && chown 5001 "$tmp/parent"
    out=$(metrics "$tmp/parent/textfile/gpubind.prom")
    check "a root-owned folder under one of theirs: refused (they could swap it)" \
      '[[ $? -ne 0 && "$out" == *"belongs to uid 5001"* ]]'
    mkdir "$tmp/safe" && ln -s "$tmp/safe" "$tmp/link"
    out=$(metrics "$tmp/link/gpubind.prom")
    check "a folder reached through a link: refused" \
      '[[ $? -ne 0 && "$out" == *"is a symbolic link"* && ! -e $tmp/safe/gpubind.prom ]]'
    ln -s "$victim" "$tmp/safe/gpubind.prom"
    mkfifo "$tmp/safe/gpubind.prom.tmp.$$"
    out=$(metrics "$tmp/safe/gpubind.prom")
    rc=$?
    check "a root-owned folder: written, nothing blocked" '[[ $rc -eq 0 ]]'
    check "the link at the file's name was replaced, not followed" \
      '[[ ! -L $tmp/safe/gpubind.prom && -f $tmp/safe/gpubind.prom ]] && grep -q "^gpubind_daemon_up 1" "$tmp/safe/gpubind.prom" && untouched'
    check "the file is readable by node_exporter (0644) and no temporary file is left" \
      '[[ $(stat -c %a "$tmp/safe/gpubind.prom") == 644 && -z $(ls -A "$tmp/safe" | grep -v "^gpubind.prom" ) ]]'
    ;;
  *)
    echo "FAIL: unknown case '$case_name'"
    exit 2
    ;;
esac
finish
