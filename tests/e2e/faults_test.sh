#!/usr/bin/env bash
# Faults on a real Slurm cluster: gpubindd killed in the middle of a request, killed (stale
# socket), stopped (socket gone), hung (SIGSTOP), slow, its policy corrupted then SIGHUP, its
# topology XML gone. Every launch must end within its deadline; under on_error=fallback none may
# fail; the user sees one clear line; no node is drained. Prints a table of launches per fault.
# Usage: faults_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
e2e_start_cluster faults 1
socket=$dir/run/gpubind.sock
policy=$dir/etc/policy.conf
topology=$dir/etc/node.xml
cp "$policy" "$dir/policy.good"

timeout_ms=1000
# A launch hangs when it outlives this limit. The plugin's own deadline is timeout_ms; the slowest
# launch of each fault is reported, but only a launch that never ends on its own fails: on a busy
# machine a launch may be slow without hanging.
limit_s=60

daemon_pid() { cat "$dir/run/gpubindd.pid" 2>/dev/null; }
# Starts gpubindd (extra arguments go to it) and waits until it answers, not just until the
# socket file exists: a killed daemon leaves its socket file behind.
daemon_up() {
  "$cluster" daemon start "$dir" "$@" || return 1
  daemon_answers
}
daemon_answers() {
  for _ in $(seq 100); do "$ctl" --socket "$socket" --timeout 500 status >/dev/null 2>&1 && return 0; sleep 0.05; done
  return 1
}
daemon_kill() { kill -KILL "$(daemon_pid)" 2>/dev/null; rm -f "$dir/run/gpubindd.pid"; sleep 0.1; }

# Per fault: launches, and those that hung, failed, went wrong.
declare -A launches hung failures wrong slowest
faults=()
total=0

# launch FAULT EXPECT: one step of 2 tasks asking for binding. EXPECT is what must happen:
#   daemon    bound, planned by gpubindd, no gpubind message but the binding lines
#   fallback  bound, planned in-process, exactly one line saying why
#   kept      runs with Slurm's binding, exactly one line saying why
#   fail      the step fails, the error says why
launch() {
  local fault=$1 expect=$2 start_ns elapsed_ms out rc problem="" bound lines
  [[ -n "${launches[$fault]:-}" ]] || { faults+=("$fault"); launches[$fault]=0; hung[$fault]=0;
    failures[$fault]=0; wrong[$fault]=0; slowest[$fault]=0; }
  start_ns=$(date +%s%N)
  out=$(timeout "$limit_s" srun -N1 -n2 --gpus=2 --gpu-bind-auto=verbose "$check" --json 2>&1)
  rc=$?
  elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))
  launches[$fault]=$((launches[$fault] + 1))
  total=$((total + 1))
  ((elapsed_ms > slowest[$fault])) && slowest[$fault]=$elapsed_ms
  if ((rc == 124)); then
    hung[$fault]=$((hung[$fault] + 1))
    problem="took ${elapsed_ms} ms"
  fi
  bound=$(grep -c '"GPUBIND_BOUND":"1"' <<<"$out")
  # What the user reads from gpubind besides the per-task binding lines.
  lines=$(grep '^gpubind: ' <<<"$out" | grep -v ' rank [0-9]* (local [0-9]*): cpus ')
  case $expect in
    daemon)
      ((rc == 0)) || { failures[$fault]=$((failures[$fault] + 1)); problem+=" exit $rc"; }
      [[ $bound -eq 2 && $(grep -c '\[daemon\]' <<<"$out") -eq 2 && -z "$lines" ]] || problem+=" not bound by the daemon"
      ;;
    fallback)
      ((rc == 0)) || { failures[$fault]=$((failures[$fault] + 1)); problem+=" exit $rc"; }
      [[ $bound -eq 2 && $(grep -c '\[fallback\]' <<<"$out") -eq 2 ]] || problem+=" not bound in-process"
      [[ $(grep -c . <<<"$lines") -eq 1 && "$lines" == *"planned in-process instead"* ]] || problem+=" not one clear line"
      ;;
    kept)
      ((rc == 0)) || { failures[$fault]=$((failures[$fault] + 1)); problem+=" exit $rc"; }
      [[ $bound -eq 0 ]] || problem+=" bound"
      [[ $(grep -c . <<<"$lines") -eq 1 && "$lines" == *"Slurm's binding is kept"* ]] || problem+=" not one clear line"
      ;;
    fail)
      [[ $rc -ne 0 && $bound -eq 0 && "$out" == *"cannot bind task"* ]] || problem+=" did not fail clearly (exit $rc)"
      ;;
  esac
  if [[ -n "$problem" ]]; then
    wrong[$fault]=$((wrong[$fault] + 1))
    bad "$fault, launch ${launches[$fault]}: $problem" "$out"
  fi
  last_out=$out
}

# SIGHUP, then the daemon's status once it reports the refused reload ($status).
reload_refused() {
  kill -HUP "$(daemon_pid)"
  for _ in $(seq 50); do
    "$ctl" --socket "$socket" status | grep -q "last reload refused" && break
    sleep 0.1
  done
  status=$("$ctl" --socket "$socket" status)
}

repeat() { # repeat N FAULT EXPECT
  local n=$1 i
  for ((i = 0; i < n; i++)); do launch "$2" "$3"; done
}

# kill_after SECONDS: kills the daemon from the background while a launch runs in the foreground.
kill_after() {
  local pid
  pid=$(daemon_pid)
  (sleep "$1"; kill -KILL "$pid" 2>/dev/null) &
  killer=$!
}

# kill_when_held: kills the daemon from the background once its log shows that it holds a new
# request (--delay-answers, --log-level debug): evidence, not a guess at how long a launch takes.
# Gives up after limit_s, leaving the daemon alive (the launch is then answered and counted wrong).
kill_when_held() {
  local pid held
  pid=$(daemon_pid)
  held=$(grep -c 'holding the answer' "$dir/log/gpubindd.log")
  (
    for _ in $(seq $((limit_s * 50))); do
      if (($(grep -c 'holding the answer' "$dir/log/gpubindd.log") > held)); then
        kill -KILL "$pid" 2>/dev/null
        break
      fi
      sleep 0.02
    done
  ) &
  killer=$!
}

# --- the daemon killed in the middle of a request -------------------------------------------------
# While it answers (killed as soon as it holds the request; each answer held 4 s, below the 6 s
# timeout_ms of these launches, so a killer slowed by a busy machine still comes first) or while
# the request waits in its accept queue (daemon stopped): the plugin sees the connection drop and
# plans in-process.
"$cluster" plugstack "$dir" timeout_ms=6000 on_error=fallback
held_before=$(grep -c 'holding the answer' "$dir/log/gpubindd.log")
for ((i = 0; i < 10; i++)); do
  daemon_kill
  daemon_up --delay-answers 4000 --log-level debug || bad "daemon restart"
  kill_when_held
  launch "killed mid-request" fallback
  wait "$killer"
done
"$cluster" plugstack "$dir" timeout_ms=$timeout_ms on_error=fallback
held=$(($(grep -c 'holding the answer' "$dir/log/gpubindd.log") - held_before))
((held == 10)) && ok "killed mid-request: each of the 10 requests was held by the daemon when it was killed" ||
  bad "killed mid-request: $held of 10 requests reached the daemon" "$(tail -5 "$dir/log/gpubindd.log")"
for ((i = 0; i < 5; i++)); do
  daemon_kill
  daemon_up || bad "daemon restart"
  kill -STOP "$(daemon_pid)"
  kill_after 0.5
  launch "killed, request queued" fallback
  wait "$killer"
done

# --- killed and not restarted: its socket file is left, connections are refused -------------------
daemon_kill
repeat 15 "killed, stale socket" fallback
[[ "$last_out" == *"Connection refused"* ]] && ok "stale socket: the line says the connection was refused" ||
  bad "stale socket message" "$last_out"

# --- stopped: the socket is gone ------------------------------------------------------------------
daemon_up || bad "daemon restart"
"$cluster" daemon stop "$dir"
repeat 15 "stopped, socket gone" fallback
[[ "$last_out" == *"No such file or directory"* ]] && ok "socket gone: the line says so" || bad "socket gone message" "$last_out"

# --- hung: accepts, never answers ------------------------------------------------------------------
daemon_up || bad "daemon restart"
kill -STOP "$(daemon_pid)"
repeat 15 "hung (SIGSTOP)" fallback
[[ "$last_out" == *"did not answer in time"* ]] && ok "hung: the line says it timed out" || bad "hung message" "$last_out"
"$cluster" plugstack "$dir" timeout_ms=$timeout_ms on_error=skip
repeat 5 "hung, on_error=skip" kept
"$cluster" plugstack "$dir" timeout_ms=$timeout_ms on_error=fail
repeat 5 "hung, on_error=fail" fail
"$cluster" plugstack "$dir" timeout_ms=$timeout_ms on_error=fallback
kill -CONT "$(daemon_pid)"

# --- slow: answers after the deadline, then within it ----------------------------------------------
"$cluster" daemon stop "$dir"
daemon_up --delay-answers 1500 || bad "daemon restart"
repeat 10 "slow (1.5 s > timeout)" fallback
"$cluster" daemon stop "$dir"
daemon_up --delay-answers 200 || bad "daemon restart"
repeat 5 "slow (0.2 s < timeout)" daemon
"$cluster" daemon stop "$dir"
daemon_up || bad "daemon restart"

# --- policy corrupted, then SIGHUP: the reload is refused, the old policy keeps serving ------------
generation() { "$ctl" --socket "$socket" status --json | sed -nE 's/.*"policy_generation":([0-9]+).*/\1/p'; }
before=$(generation)
printf 'reserved_cpus: "0-x"\n' >"$policy"
reload_refused
[[ "$status" == *"last reload refused: $policy:"* && $(generation) == "$before" ]] &&
  ok "corrupt policy: reload refused, status names the file, generation $before kept" || bad "corrupt policy status" "$status"
repeat 10 "policy corrupted + SIGHUP" daemon
# If the daemon is also gone, in-process planning cannot read the policy either: the job runs with
# Slurm's binding and the line names the file and line.
"$cluster" daemon stop "$dir"
repeat 5 "policy corrupted, daemon gone" kept
[[ "$last_out" == *"$policy:1"* ]] && ok "corrupt policy: the line names file and line" || bad "corrupt policy line" "$last_out"
cp "$dir/policy.good" "$policy"
daemon_up || bad "daemon restart"

# --- topology XML gone ---------------------------------------------------------------------------
mv "$topology" "$topology.away"
reload_refused
[[ "$status" == *"last reload refused"*"$topology"* ]] &&
  ok "topology gone: reload refused, the old topology keeps serving" || bad "topology gone status" "$status"
repeat 10 "topology XML gone + SIGHUP" daemon
"$cluster" daemon stop "$dir"
out=$(timeout 10 "$gpubindd" --foreground --socket "$dir/run/other.sock" --config "$policy" 2>&1)
rc=$?
[[ $rc -eq 1 && "$out" == *"$topology"* ]] && ok "topology gone: gpubindd refuses to start, naming the file" ||
  bad "start without topology: exit $rc" "$out"
repeat 5 "topology XML gone, daemon gone" kept
[[ "$last_out" == *"$topology"* ]] && ok "topology gone: the line names the file" || bad "topology gone line" "$last_out"
mv "$topology.away" "$topology"
daemon_up || bad "daemon restart"
launch "recovered" daemon

# --- killed and restarted by a supervisor while launches run under on_error=fail -------------------
# The unit's Restart=always, RestartSec=100ms, emulated (no systemd here) by a supervisor that
# restarts the daemon 100 ms after each death. Each launch's request is held by the daemon when it
# is killed (evidence in its log, as above), so every launch meets a restart; the next daemon
# answers it within the launch's timeout_ms, and the step binds. Twice: with a socket the
# supervisor holds and hands to each daemon, as gpubindd.socket does (connections wait in its
# queue), and with the daemon's own socket, refused between two lives. Answers are held 1 s so
# that the killer, however slow the machine, comes first; the 8 s timeout_ms leaves the same room.
supervised_launches=8
"$cluster" daemon stop "$dir"
"$cluster" plugstack "$dir" timeout_ms=8000 on_error=fail
for mode in held own; do
  fault="restarts, on_error=fail, $mode"
  hold=()
  [[ $mode == held ]] && hold=(--hold-socket "$socket")
  held_before=$(grep -c 'holding the answer' "$dir/log/gpubindd.log")
  python3 "$(dirname "$0")/supervise_daemon.py" "${hold[@]}" --restart-sec 0.1 "$dir/run/gpubindd.pid" \
    "$dir/log/gpubindd.log" -- "$gpubindd" --foreground --socket "$socket" --config "$policy" \
    --delay-answers 1000 --log-level debug </dev/null 2>"$dir/log/supervisor.log" &
  supervisor=$!
  for ((i = 0; i < supervised_launches; i++)); do
    daemon_answers || bad "$fault: the supervised daemon does not answer"
    kill_when_held
    launch "$fault" daemon
    wait "$killer"
  done
  kill -TERM "$supervisor"
  wait "$supervisor"
  # Each launch: the request the killed daemon held, then the same request the next one answered.
  held=$(($(grep -c 'holding the answer' "$dir/log/gpubindd.log") - held_before))
  starts=$(sed -nE 's/^supervisor: ([0-9]+) daemons started$/\1/p' "$dir/log/supervisor.log")
  ((held >= 2 * supervised_launches && starts == supervised_launches + 1)) &&
    ok "$fault: each of the $supervised_launches launches met a restart (daemons started: $starts, requests held: $held)" ||
    bad "$fault: daemons started: ${starts:-?}, requests held: $held (want $((supervised_launches + 1)) and $((2 * supervised_launches)))" \
      "$(cat "$dir/log/supervisor.log")"
done
"$cluster" plugstack "$dir" timeout_ms=$timeout_ms on_error=fallback
daemon_up || bad "daemon restart"
launch "recovered" daemon

# --- the account -----------------------------------------------------------------------------------
printf '\n%-32s %8s %5s %7s %6s %12s\n' fault launches hung failed wrong "slowest ms"
fallback_launches=0 fallback_failed=0 all_hung=0
for fault in "${faults[@]}"; do
  printf '%-32s %8d %5d %7d %6d %12d\n' "$fault" "${launches[$fault]}" "${hung[$fault]}" \
    "${failures[$fault]}" "${wrong[$fault]}" "${slowest[$fault]}"
  all_hung=$((all_hung + hung[$fault]))
  [[ $fault == *on_error=* || $fault == recovered ]] && continue
  fallback_launches=$((fallback_launches + launches[$fault]))
  fallback_failed=$((fallback_failed + failures[$fault]))
done
faulted=$((total - launches[recovered]))
echo "faulted launches: $faulted ($fallback_launches under on_error=fallback: $fallback_failed failed); hung: $all_hung"
((faulted >= 100 && all_hung == 0 && fallback_failed == 0)) &&
  ok "$faulted faulted launches, 0 hung, 0 failed under fallback" ||
  bad "faulted launches: $faulted, hung $all_hung, failed under fallback $fallback_failed"

e2e_no_node_drained
e2e_finish
