#!/usr/bin/env bash
# A SPANK plugin built for another Slurm release, in this release's plugstack.conf: Slurm refuses
# it, the step fails at once, and the plugin's own line names both releases and what to install.
# The other plugin is the host build's (when this cluster runs another release) or one built here
# against the headers of a release whose root scripts/test --slurm made; without one, skipped.
# Usage: release_mismatch_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
e2e_start_cluster mismatch 1

other_plugin=""
if [[ -n "${GPUBIND_E2E_SLURM:-}" ]]; then
  other_plugin=$build/lib/spank_gpubind.so
  other_release=$(cat "$build/slurm-release")
else
  # Built here, on this system, against another release's headers from its cached root (a plugin
  # built inside that newer root would need its newer glibc and fail before any gpubind code).
  for release in $("$here/slurm-root" releases); do
    root=$("$here/slurm-root" path "$release")
    [[ -f "$root/.gpubind-root" ]] || continue
    other_build=$dir/plugin-$release
    mkdir -p "$other_build"
    if cmake -S "$here/../.." -B "$other_build" -DGPUBIND_PLUGIN_ONLY=ON -DSLURM_ROOT="$root/usr" \
      -DGPUBIND_BUILD_TESTS=OFF >"$other_build/log" 2>&1 &&
      cmake --build "$other_build" --target spank_gpubind >>"$other_build/log" 2>&1; then
      other_plugin=$other_build/lib/spank_gpubind.so
      other_release=$(cat "$other_build/slurm-release")
    else
      bad "building the plugin against Slurm $release's headers" "$(tail -20 "$other_build/log")"
      e2e_finish
      exit
    fi
    break
  done
  [[ -n "$other_plugin" ]] ||
    { echo "no other Slurm release's root (scripts/test --slurm 24.11 makes one): skipped"; exit 77; }
fi
this_version=$(sinfo -V | sed -E 's/^slurm[^ ]* //')
this_release=${this_version%.*}
[[ "$other_release" != "$this_release" ]] || { bad "the other plugin is for $other_release too"; e2e_finish; exit; }

# The matching plugin first: the step runs.
out=$(timeout 60 srun -N1 -n1 --gpus=1 --gpu-bind-auto "$check" --json 2>&1)
[[ $? -eq 0 && "$out" == *'"GPUBIND_BOUND":"1"'* ]] && ok "the plugin built for Slurm $this_release binds" ||
  bad "matching plugin" "$out"

own_plugin=$(cat "$dir/etc/plugin")
echo "$other_plugin" >"$dir/etc/plugin"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback
for launcher in srun sbatch; do
  if [[ $launcher == srun ]]; then
    out=$(timeout 60 srun -N1 -n1 --gpus=1 --gpu-bind-auto true 2>&1)
  else
    out=$(timeout 60 sbatch --wait -N1 -n1 -o /dev/null --wrap true 2>&1)
  fi
  rc=$?
  line=$(grep 'gpubind: ' <<<"$out")
  [[ $rc -ne 0 && $rc -ne 124 ]] && ok "$launcher with the Slurm $other_release plugin fails at once (exit $rc)" ||
    bad "$launcher exit $rc" "$out"
  [[ "$line" == *"built for Slurm $other_release"* && "$line" == *"runs in Slurm $this_version"* &&
     "$line" == *"Install gpubind built for Slurm $this_release"* ]] &&
    ok "$launcher: the line names both releases ($other_release, $this_version) and what to install" ||
    bad "$launcher: mismatch line" "$out"
done
echo "$own_plugin" >"$dir/etc/plugin"
"$cluster" plugstack "$dir" timeout_ms=1000 on_error=fallback
e2e_no_node_drained
e2e_finish
