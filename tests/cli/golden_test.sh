#!/usr/bin/env bash
# The plans gpubindctl makes on the fixtures are the reviewed snapshots in tests/golden/.
# Usage: golden_test.sh PATH/TO/gpubindctl SOURCE_DIR
set -uo pipefail
ctl=$1
source_dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/plans"
if ! "$source_dir/scripts/update-golden" --gpubindctl "$ctl" --out "$tmp/plans" >"$tmp/log" 2>&1; then
  cat "$tmp/log"
  echo "FAIL: the plans could not be made"
  exit 1
fi
if diff -ru "$source_dir/tests/golden" "$tmp/plans"; then
  echo "ok: $(find "$tmp/plans" -name '*.txt' | wc -l) plans match tests/golden"
  exit 0
fi
echo "plans changed: review and run scripts/update-golden"
exit 1
