#!/usr/bin/env bash
# Denial of service: the real gpubindd under each of gpubind_attack's attacks, made by another
# user (nobody, uid 65534) while a job step's ordinary request is timed every 200 ms. The launch
# must not notice: every probe answered within its 1000 ms deadline (0 misses) and p99 <= 50 ms;
# cachemem: 400 distinct 4096-task plans answered, the daemon's memory <= 64 MiB, probes held to the
# same thresholds while they are planned (400: long enough for probes to run). Each attack gets
# a fresh daemon (stderr to a file), and one more runs idle with the daemon's stderr a pipe that
# nobody reads (a daemon that logs per connection would block on it).
# Usage: security_test.sh BUILD_BIN_DIR FIXTURES_DIR   (root only; exit 77 otherwise)
set -uo pipefail
bin=${1:?usage: security_test.sh BUILD_BIN_DIR FIXTURES_DIR}
fixtures=${2:?usage: security_test.sh BUILD_BIN_DIR FIXTURES_DIR}
daemon=$bin/gpubindd
attack=$bin/gpubind_attack
attacker_uid=65534
seconds=${GPUBIND_ATTACK_SECONDS:-6}

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: run as root: the attacks must come from another uid ($attacker_uid) than the probe"
  exit 77
fi
for file in "$daemon" "$attack"; do
  [[ -x $file ]] || { echo "FAIL: $file is missing (build it first)"; exit 1; }
done
[[ -r $fixtures/dgx-h100.xml ]] || { echo "FAIL: $fixtures/dgx-h100.xml is missing"; exit 1; }

# As on a cluster, the hostile job runs on CPUs of its own (Slurm's task/cgroup confines it to its
# allocation): the last CPU here; the daemon and the job step being launched run on the others.
# On a one-CPU machine everything shares it.
cpus=$(nproc)
pin=()
confine=()
if ((cpus >= 2)); then
  pin=(taskset -c "0-$((cpus - 2))")
  confine=(--attacker-cpus "$((cpus - 1))")
fi

tmp=$(mktemp -d)
# The attacker (nobody) must reach the socket; the daemon's default socket mode is 0666.
chmod 755 "$tmp"
socket=$tmp/gpubind.sock
pid=""
holder=""
stop_daemon() {
  if [[ -n $pid ]]; then
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null  # reaped here, so the shell does not report it killed
    pid=""
  fi
  rm -f "$socket"
}
cleanup() {
  stop_daemon
  if [[ -n $holder ]]; then
    kill "$holder" 2>/dev/null
    wait "$holder" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# start_daemon STDERR [OPTIONS]: a fresh daemon on the DGX H100 fixture, its stderr to STDERR.
start_daemon() {
  local stderr=$1
  shift
  stop_daemon
  "${pin[@]}" "$daemon" --foreground --socket "$socket" --topology "$fixtures/dgx-h100.xml" \
    "$@" 2>"$stderr" &
  pid=$!
  for _ in $(seq 200); do [[ -S $socket ]] && return 0; sleep 0.05; done
  echo "FAIL: the daemon did not start"
  cat "$tmp/daemon.log" 2>/dev/null
  exit 1
}

failed=0
# run_mode MODE COUNT [gpubind_attack options]: one attack on a fresh daemon.
run_mode() {
  local mode=$1 count=$2
  shift 2
  start_daemon "$tmp/daemon.log" "${daemon_args[@]}"
  run_attack "$mode" "$count" "$@"
}
daemon_args=()
# gRPC is served to --grpc-group members only (anyone else's HTTP/2 is closed at once: see
# bounds_test.sh); the gRPC attacks come from a member, to hold gRPC's own side to its limits.
grpc_group=$(getent group "$(id -g "$attacker_uid" 2>/dev/null || echo "$attacker_uid")" | cut -d: -f1)
run_attack() {
  local mode=$1 count=$2
  shift 2
  "${pin[@]}" "$attack" --socket "$socket" --daemon-pid "$pid" --mode "$mode" --count "$count" \
    --attacker-uid "$attacker_uid" "${confine[@]}" "$@"
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    failed=1
    if [[ $rc -ne 1 ]]; then
      echo "FAIL mode=$mode: gpubind_attack exited $rc"
    fi
    [[ -s $tmp/daemon.log ]] && tail -n 5 "$tmp/daemon.log" | sed 's/^/  daemon: /'
  fi
}

launch=(--seconds "$seconds" --max-p99-ms 50 --max-misses 0)
run_mode none 1 "${launch[@]}"
run_mode idle 1000 "${launch[@]}"
run_mode fresh 5 "${launch[@]}"
run_mode slowloris 8 "${launch[@]}"
run_mode flood 16 "${launch[@]}"
[[ -n $grpc_group ]] && daemon_args=(--grpc-group "$grpc_group")
run_mode h2idle 1100 "${launch[@]}"
run_mode grpcheavy 4 "${launch[@]}"
daemon_args=()
run_mode heavy 4 "${launch[@]}"
run_mode cachemem 400 --seconds 60 --max-rss-mib 64 --max-p99-ms 50 --max-misses 0

# The daemon's stderr a pipe nobody reads (a reader that holds it open and never reads), logging
# at debug level: a line per plan fills the pipe within a second, and serving must go on.
echo "--- the daemon's stderr to a pipe nobody reads, at debug level:"
mkfifo "$tmp/stderr.fifo"
# shellcheck disable=SC2217  # sleep holds the pipe's read end open and never reads: the point
sleep 300 <"$tmp/stderr.fifo" &
holder=$!
start_daemon "$tmp/stderr.fifo" --log-level debug
rm -f "$tmp/daemon.log"
run_attack idle 1000 "${launch[@]}"
run_attack heavy 4 "${launch[@]}"

if [[ $failed -eq 0 ]]; then
  echo "ok   every attack left the launch's request within its thresholds"
fi
exit $failed
