#!/usr/bin/env bash
# Every man page renders with `man -l` without a warning, and has the sections a reader expects.
# Usage: man_pages_test.sh MAN_DIR   (exit 77 = skipped)
set -uo pipefail
dir=$1
command -v man >/dev/null || { echo "skipped: man (Debian package man-db) is needed"; exit 77; }
failed=0
for page in "$dir"/*.[1-8]; do
  warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
  text=$(MANWIDTH=80 man -l "$page" 2>/dev/null)
  missing=()
  for section in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
    grep -q "^$section" <<<"$text" || missing+=("$section")
  done
  if [[ -n "$warnings" || ${#missing[@]} -gt 0 ]]; then
    echo "FAIL $(basename "$page"): ${warnings:+warnings: $warnings }${missing[*]:+missing: ${missing[*]}}"
    failed=1
  else
    echo "ok   $(basename "$page") ($(wc -l <<<"$text") lines)"
  fi
done
exit $failed
