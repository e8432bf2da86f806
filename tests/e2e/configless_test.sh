#!/usr/bin/env bash
# Configless Slurm (slurmd --conf-server): slurmd reads the plugstack.conf slurmctld ships into
# its conf-cache. The layout docs/admin.md recommends (the shipped plugstack.conf includes the
# node's own /etc/slurm/plugstack.conf.d/*.conf by absolute path, where the package put
# gpubind.conf) binds every step on the compute nodes; a relative include of a folder beside
# slurm.conf (never shipped) loads nothing there, silently for the job, and check-node names it.
# Usage: configless_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
if [[ -n "${GPUBIND_E2E_SLURM:-}${GPUBIND_E2E_SLURM_DIR:-}" ]]; then
  echo "configless mode runs the host's Slurm only: skipped"
  exit 77
fi
e2e_start_cluster configless 2 --configless
cache=$dir/spool/n1/conf-cache

[[ -f $cache/plugstack.conf && -f $cache/slurm.conf ]] && ! grep -qi PlugStackConfig "$dir/etc/slurm.conf" &&
  ok "slurmd fetched slurm.conf and plugstack.conf into its conf-cache (no PlugStackConfig)" ||
  bad "configless set-up" "$(ls "$cache" 2>&1)"
run srun -N2 -n4 --gpus-per-node=2 --gpu-bind-auto "$check" --json
check_tasks "configless, the recommended layout: every task bound on both nodes" 4

# check-node as slurmd's health check runs it (SLURM_CONF: the conf-cache's slurm.conf).
node_check() {
  SLURM_CONF=$cache/slurm.conf "$ctl" check-node --policy "$dir/etc/policy.conf" --no-daemon --json |
    python3 -c 'import json,sys; print(" ".join(f["code"] + (": " + f["message"] if f["code"] == "plugin-not-loaded" else "") for f in json.load(sys.stdin)["faults"]))'
}
faults=$(node_check)
[[ "$faults" != *plugin-not-loaded* ]] && ok "check-node: the plugstack slurmd reads loads gpubind" ||
  bad "check-node on a good layout" "$faults"

# The layout that fails under configless Slurm: the include names a folder beside slurm.conf.
reconfigure_with() {  # reconfigure_with TEXT: the controller's plugstack.conf, shipped again
  echo "$1" >"$dir/etc/plugstack.conf"
  scontrol reconfigure
  for _ in $(seq 100); do [[ "$(cat "$cache/plugstack.conf")" == "$1" ]] && break; sleep 0.1; done
  [[ "$(cat "$cache/plugstack.conf")" == "$1" ]] || bad "slurmd did not fetch the new plugstack.conf"
}
mkdir -p "$dir/etc/plugstack.conf.d"
cp "$dir/node/plugstack.conf.d/gpubind.conf" "$dir/etc/plugstack.conf.d/"
reconfigure_with "include plugstack.conf.d/*.conf"
run srun -N1 -n1 --gpus=1 --gpu-bind-auto "$check" --json
[[ $rc -eq 0 && "$(field GPUBIND_BOUND "$(grep '^{' <<<"$out")")" == "" ]] &&
  ok "a relative include of a folder beside slurm.conf is not shipped: the step runs unbound" ||
  bad "relative include" "$out"
faults=$(node_check)
[[ "$faults" == *"plugin-not-loaded: slurmd's plugstack ($cache/plugstack.conf, from SLURM_CONF $cache/slurm.conf) loads no spank_gpubind.so"* &&
  "$faults" == *"include $cache/plugstack.conf.d/*.conf names no file here"* ]] &&
  ok "check-node names the plugstack slurmd reads and the include that names nothing" ||
  bad "check-node on a configless node without the plugin" "$faults"

reconfigure_with "include $dir/node/plugstack.conf.d/*.conf"
run srun -N2 -n2 --gpus-per-node=1 --gpu-bind-auto "$check" --json
check_tasks "the recommended layout again: bound" 2
e2e_no_node_drained
e2e_finish
