#!/usr/bin/env python3
"""What `gpubindctl audit` costs on a busy node: a /proc test bed of STEPS job steps of TASKS
tasks each, every task a process of THREADS threads with a numa_maps of 60 mappings, its
environment as gpubind leaves it (half the steps bound by gpubind, half not), read through
HWLOC_FSROOT (the audit's /proc root) and judged on TOPOLOGY; each task under a cgroup v1
device controller (its cgroup and devices.list read). Runs the audit N times; reports
the median CPU time (user + system) and wall time of one run, and the files it reads.

Usage: audit_cost.py GPUBINDCTL TOPOLOGY [--steps 8] [--tasks 32] [--threads 64] [-n 9]
       > audit_cost.json
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time


def write(root, path, text):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def status(name, cpus):
    return f"Name:\t{name}\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t1000\t1000\t1000\n" \
           f"Gid:\t1000\t1000\t1000\t1000\nCpus_allowed_list:\t{cpus}\nMems_allowed_list:\t0-3\n"


def make_tree(root, steps, tasks, threads):
    # Steps under ConstrainDevices on cgroup v1: each task's device cgroup is read too.
    write(root, "/proc/mounts", "cgroup /sys/fs/cgroup/devices cgroup rw,nosuid,devices 0 0\n")
    files = 1
    pid = 1000
    for step in range(steps):
        stepd = pid
        pid += 1
        write(root, f"/proc/{stepd}/stat", f"{stepd} (slurmstepd) S 1 1 1 0")
        write(root, f"/proc/{stepd}/cmdline", f"slurmstepd: [{500 + step}.0]\0")
        files += 2
        for rank in range(tasks):
            task = pid
            pid += threads + 1
            cpus = f"{(rank % 8) * 8}-{(rank % 8) * 8 + 7}"
            env = [f"SLURM_PROCID={rank}", f"SLURM_LOCALID={rank}", "SLURM_STEP_GPUS=0,1,2,3,4,5,6,7",
                   f"ROCR_VISIBLE_DEVICES={rank % 8}", "HOME=/home/u", "PATH=/usr/bin:/bin"]
            env += [f"VAR_{i}=" + "x" * 40 for i in range(60)]  # a job's usual environment
            if step % 2 == 0:
                env += ["GPUBIND_BOUND=1", f"GPUBIND_CPUS={cpus}", f"GPUBIND_LOCAL_RANK={rank}"]
            write(root, f"/proc/{task}/stat", f"{task} (python3) S {stepd} 1 1 0")
            write(root, f"/proc/{task}/status", status("python3", cpus))
            write(root, f"/proc/{task}/environ", "\0".join(env) + "\0")
            maps = "".join(f"7f{i:04x}000 default file=/usr/lib/lib{i}.so mapped=40 N{i % 4}=40 "
                           "kernelpagesize_kB=4\n" for i in range(60))
            write(root, f"/proc/{task}/numa_maps", maps)
            cgroup = f"/slurm/uid_1000/job_{500 + step}/step_0/task_{rank}"
            write(root, f"/proc/{task}/cgroup", f"12:cpuset:{cgroup}\n5:devices:{cgroup}\n0::/\n")
            write(root, f"/sys/fs/cgroup/devices{cgroup}/devices.list",
                  f"c 226:{128 + rank % 8} rwm\nc 226:{rank % 8} rwm\nc 136:* rwm\n")
            files += 6
            for t in range(threads):
                write(root, f"/proc/{task}/task/{task + t}/status", status("pt_worker", cpus))
                files += 1
    return files


def run_once(argv, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, check=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("gpubindctl")
    ap.add_argument("topology")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=32)
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("-n", type=int, default=9)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="gpubind-audit-bench-")
    try:
        files = make_tree(root, args.steps, args.tasks, args.threads)
        env = dict(os.environ, HWLOC_FSROOT=root)
        argv = [args.gpubindctl, "audit", "--topology", args.topology, "--json"]
        cpus, walls = [], []
        for _ in range(args.n):
            cpu, wall, out = run_once(argv, env)
            cpus.append(cpu)
            walls.append(wall)
        judged = sum(s["tasks"] for s in json.loads(out)["steps"])
        print(json.dumps({
            "tasks": args.steps * args.tasks, "threads_per_task": args.threads,
            "tasks_judged": judged, "files": files, "runs": args.n,
            "median_cpu_s": round(statistics.median(cpus), 4),
            "median_wall_s": round(statistics.median(walls), 4),
            "max_cpu_s": round(max(cpus), 4),
        }, indent=1))
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
