#!/usr/bin/env bash
# `gpubindctl plan --svg`: the picture is well-formed SVG that renders to PNG on every fixture,
# the one in docs/ is current, and a failed write leaves nothing behind.
# Usage: plan_svg_test.sh PATH/TO/gpubindctl SOURCE_DIR [SHARED_TOPOLOGIES_DIR]   (exit 77 = skipped)
set -uo pipefail
ctl=$1
source_dir=$2
shared=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

if ! command -v rsvg-convert >/dev/null || ! command -v python3 >/dev/null; then
  echo "skipped: rsvg-convert (Debian package librsvg2-bin) and python3 are needed to render"
  exit 77
fi
cd "$source_dir"

# PNG width and height from its header; the XML must parse.
png_size() { python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); print(*struct.unpack(">II", d[16:24]))' "$1"; }
well_formed() { python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$1"; }

dumps=(tests/fixtures/*.xml)
if [[ -n "$shared" && -d "$shared" ]]; then dumps+=("$shared"/*.xml); else
  echo "note: no shared topologies at '${shared:-unset}': drawing the project's fixtures only"; fi
for xml in "${dumps[@]}"; do
  name=$(basename "$xml" .xml)
  svg=$tmp/$name.svg
  if ! "$ctl" plan --topology "$xml" --ntasks 8 --svg "$svg" >/dev/null 2>"$tmp/err"; then
    bad "$name: plan --svg failed: $(cat "$tmp/err")"; continue
  fi
  well_formed "$svg" || { bad "$name: not well-formed XML"; continue; }
  if ! rsvg-convert "$svg" -o "$tmp/$name.png" 2>"$tmp/err"; then
    bad "$name: rsvg-convert: $(cat "$tmp/err")"; continue
  fi
  read -r width height < <(png_size "$tmp/$name.png")
  if ((width > 400 && height > 200)); then ok "$name renders (${width}x${height})"; else
    bad "$name: rendered ${width}x${height}"; fi
done

# The LUMI-G picture shown in docs/ is what gpubindctl draws today.
"$ctl" plan --topology tests/fixtures/lumi-g.xml --policy packaging/policies/lumi-g.conf --ntasks 8 \
  --svg "$tmp/lumi-g.svg" >/dev/null
if cmp -s "$tmp/lumi-g.svg" docs/images/lumi-g-plan.svg; then ok "docs picture is current"; else
  bad "docs/images/lumi-g-plan.svg is stale; regenerate it with: gpubindctl plan --topology" \
    "tests/fixtures/lumi-g.xml --policy packaging/policies/lumi-g.conf --ntasks 8 --svg docs/images/lumi-g-plan.svg"
fi

# A target that cannot be written (missing folder; a folder, so the final rename fails) fails
# with the path named and leaves no temporary file behind.
mkdir -p "$tmp/out/taken/inside"
for target in "$tmp/missing/x.svg" "$tmp/out/taken"; do
  out=$("$ctl" plan --topology tests/fixtures/lumi-g.xml --ntasks 8 --svg "$target" 2>&1)
  rc=$?
  if [[ $rc -eq 1 && $out == *"--svg: cannot write '$target'"* ]] &&
    ! compgen -G "$target.tmp.*" >/dev/null; then
    ok "unwritable $target"
  else
    bad "unwritable $target: exit $rc: $out"
  fi
done
out=$("$ctl" plan --topology tests/fixtures/lumi-g.xml --ntasks 8 --svg "" 2>&1)
[[ $? -eq 2 && $out == *"--svg: empty path"* ]] && ok "empty path" || bad "empty path: $out"

finish
