#!/usr/bin/env bash
# A node with NVIDIA and AMD GPUs in two domains (the machine's cores presented as 2 packages: two
# NVIDIA H100s near the first, two AMD GCDs near the second), whose step names the NVIDIA GPUs by
# UUID as Slurm 26.05 does with gres.conf Flags=env_uuid (a SPANK plugin listed before gpubind's
# stands in for it: tests/e2e/uuid_env_spank.c). Each task's vendor variables hold that vendor's
# own numbers or UUIDs, the other vendor's are emptied, the UUIDs are bound with their GPUs'
# locality, and a user's HIP_VISIBLE_DEVICES is kept where the policy leaves it alone.
# Usage: vendors_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
if (($(nproc) < 2)); then echo "needs 2 CPUs for 2 domains: skipped"; exit 77; fi
topology=$(mktemp /tmp/gpubind-vendors-XXXXXX.xml)
python3 "$(dirname "$0")/make_node_topology.py" "$topology" --split 2 --gpu-vendors nvidia,amd ||
  exit 1
e2e_start_cluster vendors 1 --topology "$topology"
trap 'e2e_cleanup; rm -f "$topology"' EXIT
# Built beside gpubind's plugin, against the Slurm the cluster runs.
uuid_env=$(dirname "$(cat "$dir/etc/plugin")")/gpubind_test_uuid_env.so
[[ -f "$uuid_env" ]] || { echo "no $uuid_env (built with the plugin): skipped"; exit 77; }

# The node's GPUs by Slurm's index (PCI order): two NVIDIA with UUIDs, then two AMD.
topo=$("$ctl" topology --topology "$topology" --json)
uuids=$(python3 -c '
import json, sys
gpus = json.loads(sys.argv[1])["gpus"]
print(",".join(g.get("uuid") or "-" for g in gpus))' "$topo")
[[ "$uuids" == GPU-*,GPU-*,-,- ]] || { bad "fake node's GPUs" "$uuids" "$topo"; e2e_finish; }
uuid0=${uuids%%,*}
rest=${uuids#*,}
uuid1=${rest%%,*}
# The stand-in for env_uuid runs first: gpubind plans from the UUIDs it leaves.
{
  echo "required $uuid_env uuids=$uuids"
  cat "$dir/etc/plugstack.conf"
} >"$dir/etc/plugstack.conf.new" && mv "$dir/etc/plugstack.conf.new" "$dir/etc/plugstack.conf"

task_line() { grep "^{" <<<"$out" | grep "\"local_rank\":\"$1\""; }
domain_cpus() {  # the CPUs of package $1 in the fake node
  python3 -c '
import sys, xml.etree.ElementTree as ET
pkgs = [o for o in ET.parse(sys.argv[1]).iter("object") if o.get("type") == "Package"]
print(",".join(p.get("os_index") for p in pkgs[int(sys.argv[2])].iter("object") if p.get("type") == "PU"))' \
    "$topology" "$1"
}

run srun -N1 -n2 --gpus=4 --gpu-bind-auto=verbose "$check" --json
nvidia=$(task_line 0)
amd=$(task_line 1)
[[ "$(field CUDA_VISIBLE_DEVICES "$nvidia")" == "$uuid0,$uuid1" &&
  "$(field GPUBIND_GPU_PCI "$nvidia")" == "0000:40:00.0,0000:42:00.0" &&
  "$(field GPUBIND_CPUS "$nvidia")" == "$(domain_cpus 0)" ]] &&
  ok "the NVIDIA GPUs named by UUID are bound with their locality" || bad "UUID task" "$out"
[[ "$nvidia" == *'"ROCR_VISIBLE_DEVICES":""'* ]] &&
  ok "the NVIDIA task's ROCR_VISIBLE_DEVICES is emptied: no AMD GPU leaks in" ||
  bad "ROCR on the NVIDIA task" "$nvidia"
[[ "$(field ROCR_VISIBLE_DEVICES "$amd")" == "0,1" && "$amd" == *'"CUDA_VISIBLE_DEVICES":""'* &&
  "$(field HIP_VISIBLE_DEVICES "$amd")" == "0,1" &&
  "$(field GPUBIND_CPUS "$amd")" == "$(domain_cpus 1)" ]] &&
  ok "the AMD task counts ROCm's own GPUs (0,1, not Slurm's 2,3), sees no NVIDIA GPU, HIP off NVIDIA's list" ||
  bad "AMD task" "$amd"

run env HIP_VISIBLE_DEVICES=1 srun -N1 -n2 --gpus=4 --gpu-bind-auto "$check" --json
[[ "$(field HIP_VISIBLE_DEVICES "$(task_line 1)")" == "1" ]] &&
  ok "a user's HIP_VISIBLE_DEVICES is kept where the policy leaves it alone" ||
  bad "user's HIP_VISIBLE_DEVICES" "$out"

# Slurm's own per-task choice across vendors: map_gpu:2,0 gives task 0 the first AMD GPU (Slurm's
# 2, ROCm's 0) and task 1 the first NVIDIA one. The plan numbers each vendor's GPUs from 0, so
# each task must find the planned task of its GPU by the GPU itself, not by that number.
run srun -N1 -n2 --gpus=4 --gpu-bind=map_gpu:2,0 --gpu-bind-auto=verbose "$check" --json
amd_pci=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["gpus"][2]["pci"])' "$topo")
[[ "$(field GPUBIND_GPU_PCI "$(task_line 0)")" == "$amd_pci" &&
  "$(field GPUBIND_CPUS "$(task_line 0)")" == "$(domain_cpus 1)" &&
  "$(field GPUBIND_GPU_PCI "$(task_line 1)")" == "0000:40:00.0" &&
  "$(field GPUBIND_CPUS "$(task_line 1)")" == "$(domain_cpus 0)" ]] &&
  ok "--gpu-bind=map_gpu:2,0: the AMD task is bound by the AMD GPU's cores, the NVIDIA task by the NVIDIA's" ||
  bad "map_gpu across vendors" "$out"

e2e_no_node_drained
e2e_finish
