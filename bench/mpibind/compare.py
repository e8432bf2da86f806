#!/usr/bin/env python3
"""gpubind's planner against LLNL mpibind's mapping, side by side on hwloc XML dumps.

Usage: compare.py --mbench PATH --gpubindctl PATH [--rounds N] [--repeats N] [--tasks LIST]
                  [--cpu N] DIR_OR_XML...
       compare.py --quality --mbench PATH --gpubindctl PATH --quality-tool PATH [--tasks LIST]
                  DIR_OR_XML...

For each dump and task count, mpibind's mapping alone, mpibind's mapping with its tasks' variables
(mpibind_set_env_vars, as its Slurm plugin runs it) and `gpubindctl plan --time` (gpubind's plan,
environments included) run one after the other, all pinned to one CPU; this repeats --rounds
times and each figure is the median of the rounds' medians. The machine's speed may drift
between rounds, so ratios are taken between figures of the same rounds.

Task counts (--tasks, comma-separated): numbers, or 1, half (G/2), G, 2G, 3G and cores (one task
per core), with G the node's GPUs as gpubind counts them. Default: 1,half,G,2G,3G,8,cores.

Prints a Markdown table, then per task count 8 and cores the median, geometric mean, total-time
ratio and lowest ratio over the dumps mpibind maps, and the cases where gpubind is not faster.
Dumps mpibind cannot load or map are listed and left out. Exit status: 0 when the comparison
ran, 1 when gpubindctl failed, 2 on bad input (times never decide it: the machine may be busy).

--quality compares what the two bind instead of how fast: for each dump and task count,
mpibind's mapping (mbench --map) and gpubind's plans under order=gpu and order=cpu (default
policy: no reserved cores, every GPU) are scored by gpubind-quality --score on the dump alone,
metric by metric (each lower is better: tasks far from their GPUs, tasks without a GPU,
unused GPUs, the most tasks on one GPU, L3 and NUMA straddles of tasks that fit one, the core-count spread, idle cores,
shared cores; the GPU metrics only where mpibind maps GPUs). A case is strictly worse when
gpubind is worse on a metric and better on none. Prints every strictly-worse case with the
metrics that decide it, then the counts per order; exit status 1 when there is one.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys

DEFAULT_TASKS = "1,half,G,2G,3G,8,cores"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mbench", required=True, help="the mbench binary (bench/mpibind/mbench.c)")
    parser.add_argument("--gpubindctl", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2000, help="mpibind mappings per median")
    parser.add_argument("--tasks", default=DEFAULT_TASKS)
    parser.add_argument("--cpu", type=int, default=min(os.sched_getaffinity(0)))
    parser.add_argument("--quality", action="store_true", help="compare bindings, not times")
    parser.add_argument("--quality-tool", help="gpubind-quality (needed by --quality)")
    parser.add_argument("inputs", nargs="+", metavar="DIR_OR_XML")
    args = parser.parse_args()
    if args.quality and not args.quality_tool:
        parser.error("--quality needs --quality-tool")
    if args.rounds < 1 or args.repeats < 1:
        parser.error("--rounds and --repeats must be at least 1")
    for token in args.tasks.split(","):
        if not re.fullmatch(r"[0-9]+|half|G|2G|3G|cores", token) or token == "0":
            parser.error(f"--tasks: '{token}' is not a task count (numbers, half, G, 2G, 3G, cores)")
    return args


def refuse(message):
    print(f"compare: {message}", file=sys.stderr)
    sys.exit(2)


def dumps_of(inputs):
    found = []
    for path in inputs:
        if os.path.isdir(path):
            found += sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".xml"))
        elif os.path.isfile(path):
            found.append(path)
        else:
            refuse(f"{path}: no such file or folder")
    if not found:
        refuse("no XML dumps in " + ", ".join(inputs))
    return found


class MpibindFailed(Exception):
    """mpibind could not map the dump (its last line of error output, or why there was none)."""


class Runner:
    def __init__(self, args):
        self.args = args
        self.pin = ["taskset", "-c", str(args.cpu)]

    def mpibind(self, xml, ntasks, env):
        """(median µs, the GPUs mpibind sees); MpibindFailed when it cannot map."""
        cmd = [self.args.mbench, *(["--env"] if env else []), xml, str(ntasks),
               str(self.args.repeats)]
        try:
            run = subprocess.run(self.pin + cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise MpibindFailed("no answer in 600 s")
        found = re.search(r"median_us=([0-9.]+)", run.stdout)
        if run.returncode != 0 or not found:
            raise MpibindFailed((run.stderr.strip().splitlines() or
                                 ["exit status %d" % run.returncode])[-1])
        gpus = re.search(r"gpus_total=([0-9]+)", run.stdout)
        return float(found.group(1)), int(gpus.group(1)) if gpus else 0

    def gpubind(self, xml, ntasks):
        cmd = [self.args.gpubindctl, "plan", "--topology", xml, "--ntasks", str(ntasks), "--time"]
        run = subprocess.run(self.pin + cmd, capture_output=True, text=True)
        found = re.search(r"planner: ([0-9.]+) us", run.stdout)
        if run.returncode != 0 or not found:
            sys.exit(f"compare: gpubindctl failed on {xml} with {ntasks} tasks: {run.stderr.strip()}")
        return float(found.group(1))

    def topology(self, xml):
        run = subprocess.run([self.args.gpubindctl, "topology", "--topology", xml, "--json"],
                             capture_output=True, text=True)
        if run.returncode != 0:
            return None
        topo = json.loads(run.stdout)
        return len(topo["gpus"]), topo["cores"]


METRICS = ["far", "gpuless", "unused_gpus", "most_per_gpu", "l3_straddles", "numa_straddles",
           "core_spread", "idle_cores", "shared_cores"]
GPU_METRICS = {"far", "gpuless", "unused_gpus", "most_per_gpu"}


class Quality:
    """Both binders' answers for one step, scored by gpubind-quality --score on the dump."""

    def __init__(self, args):
        self.args = args

    def mpibind_mapping(self, xml, ntasks):
        run = subprocess.run([self.args.mbench, "--map", xml, str(ntasks)], capture_output=True,
                             text=True, timeout=600)
        if run.returncode != 0:
            raise MpibindFailed((run.stderr.strip().splitlines() or
                                 ["exit status %d" % run.returncode])[-1])
        return json.loads(run.stdout)["tasks"]

    def gpubind_mapping(self, xml, ntasks, order):
        run = subprocess.run([self.args.gpubindctl, "plan", "--topology", xml, "--ntasks",
                              str(ntasks), "--order", order, "--json"], capture_output=True,
                             text=True)
        if run.returncode != 0:
            sys.exit(f"compare: gpubindctl failed on {xml} with {ntasks} tasks: "
                     f"{run.stderr.strip()}")
        return [{"cpus": t["cpus"], "gpus": [g["pci"] for g in t["gpus"]],
                 "gpu_indices": [g["node_index"] for g in t["gpus"]]}
                for t in json.loads(run.stdout)["tasks"]]

    def scores(self, xml, mappings, gpus_counted):
        lines = "".join(json.dumps({"gpus_counted": gpus_counted, "tasks": m}) + "\n"
                        for m in mappings)
        run = subprocess.run([self.args.quality_tool, "--score", xml], input=lines,
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"compare: gpubind-quality --score {xml}: {run.stderr.strip()}")
        out = [json.loads(line) for line in run.stdout.splitlines()]
        for o in out:
            if "error" in o:
                sys.exit(f"compare: scoring on {xml}: {o['error']}")
        return [o["metrics"] for o in out]


def cases(runner, args, dumps, left_out):
    """(xml, name, task count, GPUs, cores) for every dump gpubind loads and every task count asked;
    a dump gpubind cannot load goes to left_out."""
    for xml in dumps:
        name = os.path.splitext(os.path.basename(xml))[0]
        shape = runner.topology(xml)
        if shape is None:
            left_out.append(f"{name}: gpubind cannot load it")
            continue
        gpus, cores = shape
        for ntasks in task_counts(args.tasks, gpus, cores):
            yield xml, name, ntasks, gpus, cores


def compare_quality(args, dumps):
    quality = Quality(args)
    runner = Runner(args)
    worse, better, counted, left_out = [], {"gpu": 0, "cpu": 0}, 0, []
    print("| dump | tasks | order | metrics where gpubind is worse | gpubind | mpibind |")
    print("|---|---:|---|---|---|---|")
    for xml, name, ntasks, _, _ in cases(runner, args, dumps, left_out):
        try:
            theirs = quality.mpibind_mapping(xml, ntasks)
        except MpibindFailed as failure:
            left_out.append(f"{name} with {ntasks} tasks: mpibind: {failure}")
            continue
        gpus_counted = any(t["gpus"] for t in theirs)
        ours = {o: quality.gpubind_mapping(xml, ntasks, o) for o in ("gpu", "cpu")}
        scored = quality.scores(xml, [theirs, ours["gpu"], ours["cpu"]], gpus_counted)
        counted += 1
        for order, mine in zip(("gpu", "cpu"), scored[1:]):
            names = [m for m in METRICS if gpus_counted or m not in GPU_METRICS]
            lost = [m for m in names if mine[m] > scored[0][m]]
            won = [m for m in names if mine[m] < scored[0][m]]
            if won and not lost:
                better[order] += 1
            if lost and not won:
                worse.append((name, ntasks, order))
                print(f"| {name} | {ntasks} | {order} | {', '.join(lost)} | "
                      f"{', '.join(f'{m}={mine[m]}' for m in lost)} | "
                      f"{', '.join(f'{m}={scored[0][m]}' for m in lost)} |", flush=True)
    print()
    for order in ("gpu", "cpu"):
        n = sum(1 for w in worse if w[2] == order)
        print(f"- order={order}: strictly worse than mpibind in {n} of {counted} cases, strictly "
              f"better in {better[order]}")
    for line in left_out:
        print(f"- left out: {line}")
    return 1 if worse else 0


def task_counts(spec, gpus, cores):
    named = {"half": gpus // 2, "G": gpus, "2G": 2 * gpus, "3G": 3 * gpus, "cores": cores}
    counts = {named[t] if t in named else int(t) for t in spec.split(",")}
    return sorted(n for n in counts if 1 <= n <= 4096)  # gpubind's limit per node (kMaxTasks)


def summary(rows, label):
    ratios = [r["mpibind"] / r["gpubind"] for r in rows]
    with_env = [r["mpibind_env"] / r["gpubind"] for r in rows]
    total = sum(r["mpibind"] for r in rows) / sum(r["gpubind"] for r in rows)
    geo = math.exp(statistics.mean(math.log(x) for x in ratios))
    print(f"- {label} ({len(rows)} dumps): mpibind's time / gpubind's: median "
          f"{statistics.median(ratios):.2f}, geometric mean {geo:.2f}, total time {total:.2f}, "
          f"lowest {min(ratios):.2f}; with mpibind's variables: median "
          f"{statistics.median(with_env):.2f}, lowest {min(with_env):.2f}")


def main():
    args = parse_args()
    runner = Runner(args)
    dumps = dumps_of(args.inputs)
    if args.quality:
        return compare_quality(args, dumps)
    rows, left_out = [], []
    print("| dump | tasks | mpibind µs | mpibind + variables µs | gpubind µs | ratio | ratio with "
          "variables |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for xml, name, ntasks, gpus, cores in cases(runner, args, dumps, left_out):
        samples = {"mpibind": [], "mpibind_env": [], "gpubind": []}
        try:
            for _ in range(args.rounds):
                median, mpibind_gpus = runner.mpibind(xml, ntasks, env=False)
                samples["mpibind"].append(median)
                samples["gpubind"].append(runner.gpubind(xml, ntasks))
                samples["mpibind_env"].append(runner.mpibind(xml, ntasks, env=True)[0])
        except MpibindFailed as failure:
            left_out.append(f"{name} with {ntasks} tasks: mpibind: {failure}")
            continue
        row = {k: statistics.median(v) for k, v in samples.items()}
        row.update(dump=name, ntasks=ntasks, cores=cores, no_gpu=gpus > 0 and mpibind_gpus == 0)
        rows.append(row)
        note = " (mpibind maps no GPU)" if row["no_gpu"] else ""
        print(f"| {name}{note} | {ntasks} | {row['mpibind']:.1f} | {row['mpibind_env']:.1f} | "
              f"{row['gpubind']:.1f} | {row['mpibind'] / row['gpubind']:.2f} | "
              f"{row['mpibind_env'] / row['gpubind']:.2f} |", flush=True)
    print()
    for label, pick in [("8 tasks", lambda r: r["ntasks"] == 8),
                        ("one task per core", lambda r: r["ntasks"] == r["cores"])]:
        chosen = [r for r in rows if pick(r)]
        if chosen:
            summary(chosen, label)
    slower = [r for r in rows if r["gpubind"] >= r["mpibind"]]
    print(f"- gpubind faster than mpibind's mapping alone in {len(rows) - len(slower)} of "
          f"{len(rows)} cases" + ("" if not slower else "; not in: " + ", ".join(
              f"{r['dump']} {r['ntasks']} tasks ({r['mpibind'] / r['gpubind']:.2f})"
              for r in slower)))
    slower_env = [r for r in rows if r["gpubind"] >= r["mpibind_env"]]
    print(f"- gpubind faster than mpibind's mapping with its variables in "
          f"{len(rows) - len(slower_env)} of {len(rows)} cases")
    for line in left_out:
        print(f"- left out: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
