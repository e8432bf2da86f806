#!/usr/bin/env bash
# What one local user (or many) cannot do to gpubindd, whatever the machine's load: kill it, grow it
# past a bound well inside the unit's MemoryMax=256M, or keep another user's launch from being
# answered. Each case runs gpubind_attack against a fresh daemon (the LUMI-G fixture and policy,
# the unit's descriptor limit) while a job step's request is sent every 200 ms as uid 4000; it
# passes when the daemon lives, its peak resident memory since start (VmHWM) stays under 160 MiB,
# and every probe is answered within 5 s (answered, not fast: the machine may be busy).
#   nonread-cached  64 connections of one user ask for the largest cached answer (~4 MB), never read
#   nonread-big     12 connections of one user ask for the largest answer (~16 MB, planned afresh
#                   each time), never read
#   untrusted-h2    a user gRPC is not served to opens 40000 HTTP/2 streams, then sends Plan calls
#                   of the largest answer with a receive window of 0: every connection is closed
#                   before a byte of HTTP/2 (gRPC never sees the streams)
#   multiuser       65 users x 64 connections that sent half a compact frame fill the daemon's
#                   4096 connections; the probe, from a user with none, still gets in
#   queue-small     20, then 65 users each ask back to back for costly plans (1024 tasks, eight
#                   GPUs each, 128-byte tokens, never cached); an 8-task launch of a shape the
#                   daemon has not planned is answered within the plugin's 1 s, every time
#   queue-256       the same for a 256-task launch
# Usage: bounds_test.sh BUILD_BIN_DIR FIXTURES_DIR CASE   (root only; exit 77 otherwise)
set -uo pipefail
bin=${1:?usage: bounds_test.sh BUILD_BIN_DIR FIXTURES_DIR CASE}
fixtures=${2:?usage: bounds_test.sh BUILD_BIN_DIR FIXTURES_DIR CASE}
case_name=${3:?usage: bounds_test.sh BUILD_BIN_DIR FIXTURES_DIR CASE}
daemon=$bin/gpubindd
attack=$bin/gpubind_attack
seconds=${GPUBIND_ATTACK_SECONDS:-10}

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: run as root: the attackers and the probe must be other uids than the daemon's"
  exit 77
fi
for file in "$daemon" "$attack"; do
  [[ -x $file ]] || { echo "FAIL: $file is missing (build it first)"; exit 1; }
done
[[ -r $fixtures/lumi-g.xml ]] || { echo "FAIL: $fixtures/lumi-g.xml is missing"; exit 1; }

tmp=$(mktemp -d)
chmod 755 "$tmp"  # the attackers and the probe (other uids) reach the socket (mode 0666)
socket=$tmp/gpubind.sock
pid=""
cleanup() {
  if [[ -n $pid ]]; then
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The unit's LimitNOFILE gives the router its full 4096 connections; where the hard limit is
# lower the cap is lower and multiuser brings users enough to fill it.
nofile=$(ulimit -Hn)
[[ $nofile == unlimited || $nofile -gt 65536 ]] && nofile=65536
connection_cap=$(((nofile - 128) / 2))
((connection_cap > 4096)) && connection_cap=4096

start_daemon() {
  (
    ulimit -n "$nofile"
    exec "$daemon" --foreground --socket "$socket" --topology "$fixtures/lumi-g.xml" \
      --config "$fixtures/lumi-g.policy"
  ) 2>"$tmp/daemon.log" &
  pid=$!
  for _ in $(seq 200); do [[ -S $socket ]] && return 0; sleep 0.05; done
  echo "FAIL: the daemon did not start"
  cat "$tmp/daemon.log"
  exit 1
}

failed=0
# run MODE COUNT [gpubind_attack options]: one attack on a fresh daemon.
run() {
  local mode=$1 count=$2
  shift 2
  start_daemon
  "$attack" --socket "$socket" --daemon-pid "$pid" --mode "$mode" --count "$count" \
    --seconds "$seconds" --probe-uid 4000 --probe-timeout-ms 5000 --max-misses 0 \
    --max-hwm-mib 160 "$@"
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    failed=1
    [[ $rc -ne 1 ]] && echo "FAIL mode=$mode: gpubind_attack exited $rc"
    tail -n 5 "$tmp/daemon.log" | sed 's/^/  daemon: /'
  fi
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  pid=""
  rm -f "$socket"
}

case $case_name in
  nonread-cached) run nonread-cached 64 --attacker-uid 5001 ;;
  nonread-big) run nonread-big 12 --attacker-uid 5001 ;;
  untrusted-h2)
    run h2streams 40000 --attacker-uid 5001 --expect-grpc-refused
    run h2nonread 5 --attacker-uid 5001 --expect-grpc-refused
    ;;
  multiuser) run multiuser 64 --attacker-uid 5100 --users $((connection_cap / 64 + 1)) ;;
  queue-small | queue-256)
    tasks=8
    [[ $case_name == queue-256 ]] && tasks=256
    for users in 20 65; do
      run queuefill 1 --attacker-uid 5200 --users "$users" --probe-uncached --probe-tasks "$tasks" \
        --probe-timeout-ms 1000 --max-planned-while-waiting 8
    done
    ;;
  *)
    echo "FAIL: unknown case '$case_name'"
    exit 2
    ;;
esac
[[ $failed -eq 0 ]] && echo "ok   $case_name: the daemon lived, stayed under 160 MiB and answered every probe"
exit $failed
