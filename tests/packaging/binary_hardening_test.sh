#!/usr/bin/env bash
# The SPANK plugin exports only what Slurm looks up (no C++ runtime symbol, none GNU_UNIQUE, so it
# can unload), and every program and library is linked with full RELRO and immediate binding.
# Usage: binary_hardening_test.sh PLUGIN FILE...
set -uo pipefail
command -v readelf >/dev/null || { echo "readelf not installed: skipped"; exit 77; }
plugin=$1
failed=0
exports=$(readelf --dyn-syms -W "$plugin" | awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $5 != "LOCAL" && $8 != "" {print $8}' |
  sed 's/@.*//' | sort -u | tr '\n' ' ')
# slurm_spank_init_failure_mode only where the Slurm built against reads it (25.05 and later).
exports=${exports/slurm_spank_init_failure_mode /}
want="plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_init_post_opt slurm_spank_job_epilog slurm_spank_job_prolog slurm_spank_local_user_init slurm_spank_task_init slurm_spank_task_post_fork slurm_spank_user_init "
if [[ "$exports" == "$want" ]]; then echo "ok   the plugin exports only Slurm's names"; else
  echo "FAIL the plugin exports: $exports"; failed=1; fi
if readelf --dyn-syms -W "$plugin" | grep -q UNIQUE; then
  echo "FAIL the plugin has GNU_UNIQUE symbols"; failed=1
else echo "ok   no GNU_UNIQUE symbol in the plugin"; fi
for file in "$@"; do
  relro=$(readelf -lW "$file" | grep -c GNU_RELRO)
  now=$(readelf -dW "$file" | grep -cE 'BIND_NOW|FLAGS_1.*NOW')
  if ((relro > 0 && now > 0)); then echo "ok   $(basename "$file"): full RELRO"; else
    echo "FAIL $(basename "$file"): RELRO $relro, BIND_NOW $now"; failed=1; fi
done
exit $failed
