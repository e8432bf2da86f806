#!/usr/bin/env bash
# Plan quality on the shared GPU-node dumps (tools/quality): fails on any hard violation.
# Usage: quality_test.sh PATH/TO/gpubind-quality SHARED_TOPOLOGIES_DIR   (exit 77 = skipped)
set -uo pipefail
quality=$1
shared=$2
if [[ ! -d $shared ]]; then
  echo "skipped: no hwloc dumps in '$shared': plan quality not checked"
  exit 77
fi
exec "$quality" --no-timing "$shared"
