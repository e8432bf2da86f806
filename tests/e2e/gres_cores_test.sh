#!/usr/bin/env bash
# --gpu-bind=closest and single:1 on a node whose gres.conf gives each GPU its cores (Cores=,
# what AutoDetect finds), the node's cores presented as two sockets of a GPU domain each: Slurm
# gives each task the GPUs near its CPUs, and gpubind keeps them and binds what Slurm left: every
# task has its GPUBIND_* variables, a NIC and OpenMP threads, GPUBIND_GPU_PCI naming exactly the
# GPUs Slurm gave it, and CPUs inside their domain. Without and with ConstrainDevices, under which
# a narrowed task's SLURM_STEP_GPUS names the step's first GPUs, not its own (Slurm 22.05-26.05).
# Usage: gres_cores_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/lib.sh"
if (($(nproc) < 2)); then echo "needs 2 CPUs for 2 domains: skipped"; exit 77; fi
topology=$(mktemp /tmp/gpubind-gres-cores-XXXXXX.xml)
python3 "$(dirname "$0")/make_node_topology.py" "$topology" --split 2 || exit 1
# The GPUs' and NICs' bus ids and domains, as gpubind reads the node.
topology_json=$("$ctl" topology --topology "$topology" --json) || exit 1

# Each task prints what it got, its kernel affinity and the gres devices it may open (an open of
# a device without a driver fails with ENXIO where the cgroup allows it, EPERM where it does not).
probe() {
  echo 'a=$(sed -n "s/^Cpus_allowed_list:\s*//p" /proc/self/status); r="";
  for f in '"$dir"'/dev/n1-gpu*; do
    out=$( (exec 3<"$f") 2>&1 ); [[ "$out" == *"not permitted"* ]] || r+="${f##*gpu},";
  done
  echo "task=$SLURM_PROCID step_gpus=${SLURM_STEP_GPUS:-} bound=${GPUBIND_BOUND:-}" \
    "pci=${GPUBIND_GPU_PCI:-} cpus=${GPUBIND_CPUS:-} affinity=$a nic=${GPUBIND_NIC:-}" \
    "omp=${OMP_NUM_THREADS:-} open=$r map=${MPICH_OFI_NIC_MAPPING// /}"'
}

# check_step NAME SRUN_OPTIONS...: Slurm's GPUs for each task are the devices it may open under
# ConstrainDevices, else its SLURM_STEP_GPUS (node indices there).
check_step() {
  local name=$1 problems
  shift
  run srun -N1 -n2 --gpu-bind-auto=verbose "$@" bash -c "$(probe)"
  problems=$(TOPOLOGY="$topology_json" CGROUP=$cgroup python3 - "$out" <<'EOF'
import json, os, re, sys
def cpus(text):  # "0-2,5" -> {0, 1, 2, 5}
    out = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        out |= set(range(int(first), int(last or first) + 1))
    return out
topo = json.loads(os.environ["TOPOLOGY"])
pci_of = {g["index"]: g["pci"] for g in topo["gpus"]}
domain_of = {g["index"]: cpus(g["locality"]["cpus"]) for g in topo["gpus"]}
nic_domain = {n["name"]: cpus(n["locality"]["cpus"]) for n in topo["nics"]}
nic_index = {n["name"]: n["index"] for n in topo["nics"]}
out = sys.argv[1]
tasks = [dict(kv.split("=", 1) for kv in line.split()) for line in out.splitlines()
         if line.startswith("task=")]
problems = []
if len(tasks) != 2:
    problems.append("expected 2 task lines")
if re.search(r"cannot be told|keeps Slurm's CPU and GPU binding", out):
    problems.append("a task kept Slurm's whole binding")
if re.search(r"may share", out):
    problems.append("a 'may share' warning where no two tasks share a GPU")
if out.count("(GPUs chosen by Slurm)") != 2:
    problems.append("not 2 verbose lines with GPUs chosen by Slurm")
held = []
for t in tasks:
    source = t["open"] if os.environ["CGROUP"] == "1" else t["step_gpus"]
    gpus = sorted(int(k) for k in source.split(",") if k)
    held.append(gpus)
    want = ",".join(sorted(pci_of[g] for g in gpus))
    got = ",".join(sorted(p for p in t["pci"].split(",") if p))
    domain = set().union(*(domain_of[g] for g in gpus))
    about = f"task {t['task']} (Slurm's GPUs {gpus})"
    if t["bound"] != "1" or not t["omp"] or not t["nic"]:
        problems.append(f"{about}: GPUBIND_BOUND, OMP_NUM_THREADS or GPUBIND_NIC missing")
    if not gpus or got != want:
        problems.append(f"{about}: GPUBIND_GPU_PCI {got or '-'}, not {want}")
    if t["cpus"] != t["affinity"] or not t["cpus"] or not cpus(t["cpus"]) <= domain:
        problems.append(f"{about}: CPUs {t['cpus']} (kernel {t['affinity']}), not inside {domain}")
    if t["nic"] and not nic_domain.get(t["nic"], {-1}) <= domain:
        problems.append(f"{about}: NIC {t['nic']} outside the GPUs' domain")
    # Cray MPICH's NIC for each local rank is the NIC of the GPU the task really holds.
    owner = {}
    for part in filter(None, t.get("map", "").split(";")):
        nic, _, ranks = part.partition(":")
        for rank in cpus(ranks):
            owner[rank] = int(nic)
    if owner and owner.get(int(t["task"])) != nic_index.get(t["nic"]):
        problems.append(f"{about}: MPICH_OFI_NIC_MAPPING {t['map']} gives it NIC "
                        f"{owner.get(int(t['task']))}, not {t['nic']}'s")
if len(held) == 2 and (held[0] == held[1] or set(held[0]) & set(held[1])):
    problems.append(f"Slurm did not give the tasks GPUs of their own: {held}")
print("\n".join(problems))
EOF
  )
  if [[ $rc -eq 0 && -z "$problems" ]]; then
    ok "$name"
  else
    mapfile -t problems <<<"$problems"
    bad "$name" "rc=$rc" "${problems[@]}" "$out"
  fi
}

check_shapes() {  # check_shapes LABEL
  check_step "$1, --gpu-bind=closest, a GPU per domain: each task its own, bound next to it" \
    --sockets-per-node=2 --gpus-per-socket=1 --gpu-bind=closest
  check_step "$1, --gpu-bind=single:1, a GPU per domain: each task its own, bound next to it" \
    --sockets-per-node=2 --gpus-per-socket=1 --gpu-bind=single:1
  check_step "$1, --gpus=4 --gpu-bind=closest: each task its domain's two GPUs" \
    --gpus=4 --gpu-bind=closest
  # Slurm's choice in the request: each task's cores, NIC and Cray MPICH's NIC mapping follow
  # the GPU Slurm gave it, not the planned rank's.
  check_step "$1, --gpus=4 --gpu-bind=map_gpu:2,0: NIC variables follow Slurm's GPUs" \
    --gpus=4 --gpu-bind=map_gpu:2,0
  check_step "$1, LUMI's recipe --cpu-bind=mask_cpu:0x2,0x1 --gpu-bind=map_gpu:2,0" \
    --gpus=4 --cpu-bind=mask_cpu:0x2,0x1 --gpu-bind=map_gpu:2,0
}

cgroup=0
e2e_start_cluster gres-cores 1 --topology "$topology" --gres-cores
trap 'e2e_cleanup; rm -f "$topology"' EXIT
check_shapes "gres Cores="
e2e_no_node_drained
e2e_cleanup

if [[ -d /sys/fs/cgroup/devices ]]; then
  cgroup=1
  e2e_start_cluster gres-cores 1 --topology "$topology" --gres-cores --cgroup
  trap 'e2e_cleanup; rm -f "$topology"' EXIT
  check_shapes "gres Cores=, ConstrainDevices"
  e2e_no_node_drained
else
  echo "no cgroup v1 devices controller: the ConstrainDevices cases are skipped"
fi
e2e_finish
