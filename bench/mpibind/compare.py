#!/usr/bin/env python3
"""gpubind's planner against LLNL mpibind's mapping, side by side on hwloc XML dumps.

Usage: compare.py --mbench PATH --gpubindctl PATH [--rounds N] [--repeats N] [--tasks LIST]
                  [--cpu N] DIR_OR_XML...

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
    parser.add_argument("inputs", nargs="+", metavar="DIR_OR_XML")
    args = parser.parse_args()
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
    rows, left_out = [], []
    print("| dump | tasks | mpibind µs | mpibind + variables µs | gpubind µs | ratio | ratio with "
          "variables |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for xml in dumps:
        name = os.path.splitext(os.path.basename(xml))[0]
        shape = runner.topology(xml)
        if shape is None:
            left_out.append(f"{name}: gpubind cannot load it")
            continue
        gpus, cores = shape
        for ntasks in task_counts(args.tasks, gpus, cores):
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
