#!/usr/bin/env python3
"""What gpubind-run adds to a worker's start: `gpubind-run true` against `env true` (the plainest
wrapper that also execs its command), each started the same way, alternating, N times; medians.

Usage: worker_start.py BUILD_DIR SOCKET TOPOLOGY POLICY [N] > worker_start.json
The daemon on SOCKET serves TOPOLOGY; every worker asks for the same 8-worker plan (local rank 3),
so all but the first request are answered from the daemon's cache, as for a launcher's n workers.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(argv, env):
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1e3


def main():
    build, socket, topology, policy = sys.argv[1:5]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 50
    runner = os.path.join(build, "bin", "gpubind-run")
    env = dict(os.environ, LOCAL_RANK="3", LOCAL_WORLD_SIZE="8")
    for name in ("SLURM_CONF", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"):
        env.pop(name, None)
    with tempfile.NamedTemporaryFile("w", suffix=".conf") as plugstack:
        plugstack.write(f"required spank_gpubind.so socket={socket} policy={policy}\n")
        plugstack.flush()
        common = ["--plugstack", plugstack.name]
        cases = {
            "env": ["env", "true"],
            "daemon": [runner] + common + ["true"],
            "in_process": [runner] + common + ["--topology", topology, "true"],
        }
        timed(cases["daemon"], env)  # the plan is in the daemon's cache from here on
        samples = {name: [] for name in cases}
        for _ in range(n):
            for name, argv in cases.items():
                samples[name].append(timed(argv, env))
    result = {name: statistics.median(values) for name, values in samples.items()}
    result["n"] = n
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
