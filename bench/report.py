#!/usr/bin/env python3
"""Turns the results scripts/bench collected into Markdown tables, with the machine's description,
and puts them into docs/performance.md between the bench markers (the rest of the page is kept).

Usage: report.py RESULTS_DIR docs/performance.md
"""
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys

BEGIN = "<!-- scripts/bench: begin (generated, do not edit by hand) -->"
END = "<!-- scripts/bench: end -->"

PLANNER_WHAT = {
    "BM_PlanLumiG/8": "LUMI-G fixture, LUMI policy, 8 tasks (order=gpu), with environment",
    "BM_PlanLumiG/56": "LUMI-G, LUMI policy, 56 tasks (one per usable core)",
    "BM_PlanLumiGOrderCpu/8": "LUMI-G, LUMI policy, 8 tasks, order=cpu",
    "BM_PlanLumiGOrderCpu/56": "LUMI-G, LUMI policy, 56 tasks, order=cpu",
    "BM_PlanLumiGExplained/8": "LUMI-G, LUMI policy, 8 tasks, with explain's reasons recorded",
    "BM_PlanLumiGExplained/56": "LUMI-G, LUMI policy, 56 tasks, with explain's reasons recorded",
    "BM_Plan1024Pus/256": "synthetic 1024-PU node (2 packages, 32 L3s, 8 GPUs), 256 tasks",
    "BM_LoadLumiGXml": "hwloc XML load of the LUMI-G fixture and model building",
}


def read_json(path):
    with open(path) as f:
        return json.load(f)


def machine():
    cpuinfo = open("/proc/cpuinfo").read()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    mhz = re.search(r"^cpu MHz\s*:\s*([\d.]+)$", cpuinfo, re.M)
    hypervisor = " hypervisor " in (re.search(r"^flags\s*:(.*)$", cpuinfo, re.M) or [""," "])[1] + " "
    virt = ""
    try:
        virt = subprocess.run(["systemd-detect-virt"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    if not virt or virt == "none":
        virt = "virtual machine" if hypervisor else "bare metal"
    mem = re.search(r"^MemTotal:\s*(\d+) kB", open("/proc/meminfo").read(), re.M)
    commit = ""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        pass
    build_type = ""
    try:
        cache = open("build/CMakeCache.txt").read()
        found = re.search(r"^CMAKE_BUILD_TYPE:\w+=(\w+)$", cache, re.M)
        build_type = found.group(1) if found else ""
    except OSError:
        pass
    load = os.getloadavg()[0]
    return [
        f"- CPU: {model.group(1) if model else platform.processor()}"
        + (f" at {float(mhz.group(1)) / 1000:.2f} GHz" if mhz else "")
        + f", {os.cpu_count()} CPUs, {virt}",
        f"- memory: {int(mem.group(1)) / 1024 / 1024:.1f} GiB; kernel {platform.release()}",
        f"- build: {build_type or 'default'}" + (f", commit {commit}" if commit else ""),
        f"- run on {datetime.date.today().isoformat()}; load average at the end {load:.2f}"
        " (the machine is shared: compare rows measured in the same run, not across runs)",
    ]


def fmt_time(value, unit):
    scale = {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}[unit]
    us = value * scale
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"


def planner_table(results):
    data = read_json(os.path.join(results, "planner.json"))
    rows = ["| benchmark | what | median |", "|---|---|---|"]
    for bench in data["benchmarks"]:
        if bench.get("aggregate_name") != "median":
            continue
        name = bench["run_name"]
        what = PLANNER_WHAT.get(name)
        if what is None and name.startswith("BM_Plan/"):
            _, fixture, tasks = name.split("/")
            what = f"fixture `{fixture}`, default policy, {tasks} task{'s' if tasks != '1' else ''}"
        rows.append(f"| `{name}` | {what or ''} | {fmt_time(bench['real_time'], bench['time_unit'])} |")
    medians = {b["run_name"]: b for b in data["benchmarks"] if b.get("aggregate_name") == "median"}
    lumi = medians.get("BM_PlanLumiG/8")
    verdict = []
    if lumi:
        us = lumi["real_time"] * {"ns": 1e-3, "us": 1, "ms": 1e3}[lumi["time_unit"]]
        verdict.append(f"Target ≤ 20 µs for 8 tasks on LUMI-G: {us:.1f} µs, "
                       + ("met." if us <= 20 else "missed."))
    reps = data["benchmarks"][0].get("repetitions", "")
    return ([f"Medians of {reps} repetitions "
             "(`build/bin/gpubind_bench --benchmark_repetitions=N --benchmark_report_aggregates_only=true`).",
             ""] + rows + [""] + verdict)


def rpc_rows(label, run, nocache=None):
    rows = []

    def row(call, r):
        rows.append(f"| {label} | {call} | {r['p50_us']:.1f} µs | {r['p99_us']:.1f} µs | "
                    f"{r['plans_per_s']:,.0f} |")

    row("Plan, cache allowed", run)
    if "compact" in run:
        row("Plan over the compact protocol (the plugin's path; a connection per call)",
            run["compact"])
    if "empty_rpc" in run:
        row("GetStatus (a gRPC call doing no work)", run["empty_rpc"])
    if "floor" in run:
        row("raw Unix-socket echo of the same bytes (floor)", run["floor"])
    if nocache:
        row("Plan, planned afresh (`--no-cache`)", nocache)
    return rows


def rpc_table(results):
    one = read_json(os.path.join(results, "rpc1.json"))
    nocache = read_json(os.path.join(results, "rpc1-nocache.json"))
    eight = read_json(os.path.join(results, "rpc8.json"))
    rows = ["| clients | call | p50 | p99 | calls/s |", "|---|---|---|---|---|"]
    rows += rpc_rows("1", one, nocache) + rpc_rows("8", eight)
    lines = [
        f"`gpubindd` serving the LUMI-G fixture with the LUMI policy (8-task plans, "
        f"{one['response_bytes']:,}-byte answers); `gpubindctl bench --clients 1 --requests "
        f"{one['requests']} --floor`, `--no-cache`, and `--clients 8 --requests {eight['requests']} "
        "--floor`; each block measured side by side in one invocation.",
        "",
    ] + rows + [""]
    ratio = one["p50_us"] / one["floor"]["p50_us"]
    lines.append(
        f"Plan p50 is {ratio:.1f}× the raw socket floor with 1 client. The daemon spent "
        f"{1e6 / one['plans_per_daemon_cpu_s']:.0f} µs of its own CPU per call "
        f"({one['plans_per_daemon_cpu_s']:,.0f} plans per daemon CPU second) and held "
        f"{one['daemon_rss_bytes'] / 1e6:.1f} MB resident.")
    targets = [("p50 ≤ 80 µs (1 client)", one["p50_us"] <= 80, f"{one['p50_us']:.1f} µs"),
               ("p99 ≤ 250 µs (1 client)", one["p99_us"] <= 250, f"{one['p99_us']:.1f} µs"),
               ("≥ 15,000 plans/s (8 clients)", eight["plans_per_s"] >= 15000,
                f"{eight['plans_per_s']:,.0f}/s"),
               ("resident memory ≤ 30 MB", eight["daemon_rss_bytes"] <= 30e6,
                f"{eight['daemon_rss_bytes'] / 1e6:.1f} MB")]
    lines.append("Targets: " + "; ".join(f"{name}: {value}, {'met' if met else 'missed'}"
                                         for name, met, value in targets) + ".")
    if "compact" in one and "empty_rpc" in one:
        lines.append(
            f"The plugin's path (compact protocol, a new connection per step) answered in "
            f"{one['compact']['p50_us']:.1f} µs p50 with 1 client, against "
            f"{one['empty_rpc']['p50_us']:.1f} µs for a gRPC call doing no work.")
    return lines


def load_table(results):
    text = open(os.path.join(results, "load.txt")).read().splitlines()
    bench = json.loads(next(l for l in text if l.startswith('{"p50_us"')))
    summary = json.loads(next(l for l in reversed(text) if l.startswith('{"clients"')))
    return [
        f"`tests/cli/load_test.sh` (64 clients, {summary['requests'] // 64:,} calls each after a "
        "warm-up opening as many connections):",
        "",
        "| calls | errors | p50 | p99 | p99.9 | plans/s | RSS before | RSS after | growth |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {summary['requests']:,} | {summary['errors']} | {bench['p50_us'] / 1000:.2f} ms | "
        f"{bench['p99_us'] / 1000:.2f} ms | {bench['p999_us'] / 1000:.2f} ms | "
        f"{bench['plans_per_s']:,.0f} | {summary['rss_before_mb']} MB | {summary['rss_after_mb']} MB | "
        f"{summary['rss_growth_pct']}% |",
        "",
        "With 64 clients on 2 CPUs, latency is queueing: 64 calls are outstanding at all times.",
    ]


def launch_table(results):
    path = os.path.join(results, "launch.jsonl")
    if not os.path.exists(path):
        return ["Not measured in this run: it needs root and Slurm (the test cluster)."]
    pairs = [json.loads(l) for l in open(path) if l.strip()]
    rows = ["| command | median | against | median | ratio |", "|---|---|---|---|---|"]
    for p in pairs:
        rows.append(f"| `{p['a']}` | {p['a_ms']:.1f} ms | `{p['b']}` | {p['b_ms']:.1f} ms | "
                    f"{p['a_ms'] / p['b_ms']:.3f} |")
    lines = [f"`tests/e2e/launch_overhead.sh build {pairs[0]['rounds']}` on the test cluster "
             "(1 node on this machine): alternating rounds of each pair, medians.", ""] + rows + [""]
    bind = next((p for p in pairs if p["pair"] == "bind"), None)
    if bind:
        ratio = bind["a_ms"] / bind["b_ms"]
        lines.append(f"Step launch ratio with `--gpu-bind-auto`: {ratio:.3f} (target ≤ 1.05, "
                     + ("met" if ratio <= 1.05 else "missed") + ").")
    dl = os.path.join(results, "dlopen.txt")
    if os.path.exists(dl):
        times = [float(l) for l in open(dl) if l.strip()]
        median = statistics.median(times)
        lines.append(f"Loading the plugin (`dlopen`, RTLD_LAZY, fresh process, median of {len(times)}): "
                     f"{median:.2f} ms (target ≤ 1 ms, " + ("met" if median <= 1 else "missed") + ").")
    return lines


def worker_start_table(results):
    path = os.path.join(results, "worker_start.json")
    if not os.path.exists(path):
        return ["Not measured in this run."]
    r = read_json(path)
    return [
        f"`bench/worker_start.py` (median of {r['n']} starts each, alternating, one process "
        "started per run as a launcher does): `gpubind-run true` as local rank 3 of 8 against "
        "`env true`, the plainest wrapper that also execs its command.",
        "",
        "| wrapper | median start to exit | added per worker |",
        "|---|---|---|",
        f"| `env true` | {r['env']:.2f} ms | — |",
        f"| `gpubind-run true`, plan from gpubindd (cached) | {r['daemon']:.2f} ms | "
        f"{r['daemon'] - r['env']:.2f} ms |",
        f"| `gpubind-run --topology lumi-g.xml true` (in-process, as the fallback) | "
        f"{r['in_process']:.2f} ms | {r['in_process'] - r['env']:.2f} ms |",
    ]


def main():
    results, page = sys.argv[1], sys.argv[2]
    section = [BEGIN, "## Latest `scripts/bench` run", "", "The machine:", ""] + machine()
    section += ["", "### Planner", ""] + planner_table(results)
    section += ["", "### Plan RPC against the raw socket floor", ""] + rpc_table(results)
    section += ["", "### Load: 64 concurrent clients", ""] + load_table(results)
    section += ["", "### Plugin load and step launch", ""] + launch_table(results)
    section += ["", "### gpubind-run", ""] + worker_start_table(results)
    section += [END]
    text = open(page).read()
    if BEGIN not in text or END not in text:
        sys.exit(f"report.py: {page} lacks the markers {BEGIN!r} ... {END!r}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(page + ".new", "w") as f:
        f.write(head + "\n".join(section) + tail)
    os.replace(page + ".new", page)
    print(f"report.py: wrote the tables into {page}")


if __name__ == "__main__":
    main()
