#!/usr/bin/env bash
# A socket nobody should trust, on a real Slurm cluster: a stand-in for gpubindd
# (fake_daemon.py) answers every request with wider CPUs, another GPU, LD_PRELOAD, BASH_ENV and a
# forged job id, first served as nobody (who serves the socket is checked), then as root (what it
# answers is checked). The plugin applies nothing of it, falls back, and says why in slurmd's log.
# Usage: hostile_daemon_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
e2e_start_cluster hostile 1

"$cluster" daemon stop "$dir"
fake_pid=""
start_fake() {
  python3 "$here/fake_daemon.py" "$dir/run/gpubind.sock" "$@" &
  fake_pid=$!
  for _ in $(seq 50); do [[ -S "$dir/run/gpubind.sock" ]] && break; sleep 0.1; done
  sleep 0.2
}
stop_fake() { kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null; rm -f "$dir/run/gpubind.sock"; }
for served_by in "--as-user 65534" ""; do
  # shellcheck disable=SC2086
  start_fake $served_by
  run srun -N1 -n2 --gpus=2 --gpu-bind-auto=verbose "$check" --json
  stop_fake
  what=${served_by:+served as nobody}
  what=${what:-served as root}
  check_tasks "fake daemon $what: the fallback binds" 2
  [[ "$out" == *"[fallback]"* && "$out" != *"[daemon]"* ]] && ok "fake daemon $what: its plan is not applied" ||
    bad "fake daemon $what: plan applied" "$out"
  [[ "$out" != *999999* && "$out" != *gpubind-evil* && "$out" != *'"ROCR_VISIBLE_DEVICES":"3"'* ]] &&
    ok "fake daemon $what: none of its variables reach the tasks" || bad "fake daemon $what: variables" "$out"
done
[[ $(cat "$dir"/log/slurmd-n*.log | grep -c "gpubind: .*not trusted: served by uid 65534") -ge 1 ]] &&
  ok "a server of another user is logged, named" || bad "untrusted server not logged" "$(tail -5 "$dir"/log/slurmd-n1.log)"
[[ $(cat "$dir"/log/slurmd-n*.log | grep -c "gpubind: .*answer refused: task 0: ") -ge 1 ]] &&
  ok "a hostile answer is logged, naming the check" || bad "hostile answer not logged" "$(tail -5 "$dir"/log/slurmd-n1.log)"
"$cluster" daemon start "$dir"


e2e_no_node_drained
e2e_finish
