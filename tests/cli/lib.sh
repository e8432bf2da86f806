# Shared by the CLI tests (sourced): pass/fail counting and the summary that sets the exit status.
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
# bad NAME [DETAIL...]: the details (a command's output, say) follow, first 20 lines.
bad() {
  echo "FAIL $1"
  shift
  (($#)) && printf '     %s\n' "$@" | head -20
  failed=$((failed + 1))
}
# check NAME CONDITION: CONDITION is evaluated by the shell.
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
finish() {
  echo "$passed passed, $failed failed"
  ((failed == 0))
}
