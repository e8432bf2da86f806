#!/usr/bin/env python3
"""Write an hwloc XML of THIS machine's CPUs plus fake GPUs and NICs.

The end-to-end tests run a real Slurm cluster on the test machine, so task affinity must use
CPUs that exist; the GPUs and NICs are fakes (AMD MI250X GCDs with rsmiN devices, Slingshot
hsnN NICs), spread over the packages and placed under each package's L3. --gpu-vendors makes
them NVIDIA H100s (with the UUID hwloc reads from the driver) and AMD GCDs in turn.

Usage: make_node_topology.py OUTPUT.xml [--gpus N] [--nics N] [--hostname NAME]
                             [--threads-per-core N] [--split N] [--l3-per-package N]
                             [--gpu-vendors amd,nvidia,...]
"""
import argparse
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import generate as g  # noqa: E402


def live_packages():
    """[(vendor, model, [[pu, ...] per core])] for each package of this machine."""
    xml = subprocess.run(["lstopo-no-graphics", "--of", "xml", "--no-io"], check=True,
                         capture_output=True, text=True).stdout
    root = ET.fromstring(xml)

    def objects(node, type_):
        return [o for o in node.iter("object") if o.get("type") == type_]

    def info(node, name):
        for i in node.findall("info"):
            if i.get("name") == name:
                return i.get("value")
        return ""

    packages = objects(root, "Package") or [root.find("object")]
    result = []
    for package in packages:
        cores = objects(package, "Core")
        if cores:
            core_pus = [[int(pu.get("os_index")) for pu in objects(c, "PU")] for c in cores]
        else:
            core_pus = [[int(pu.get("os_index"))] for pu in objects(package, "PU")]
        result.append((info(package, "CPUVendor") or "unknown", info(package, "CPUModel") or "cpu",
                       core_pus))
    return result


def as_threads(core_pus, threads_per_core):
    """The package's PUs regrouped into cores of `threads_per_core` hardware threads each."""
    pus = [pu for pus in core_pus for pu in pus]
    return [pus[i:i + threads_per_core] for i in range(0, len(pus), threads_per_core)]


def split_into(packages, count):
    """All the machine's cores regrouped into `count` packages of consecutive cores (each its own
    NUMA node and L3), as on a node with several GPU domains."""
    vendor, model, _ = packages[0]
    cores = [pus for _, _, core_pus in packages for pus in core_pus]
    if count < 1 or count > len(cores):
        sys.exit(f"--split {count}: this machine has {len(cores)} cores")
    size = len(cores) // count
    groups = [cores[i * size:(i + 1) * size] for i in range(count)]
    groups[-1] += cores[count * size:]
    return [(vendor, model, group) for group in groups]


def uuid_of(gpu):
    """The fake NVIDIA GPU's UUID, as the driver prints it."""
    return "GPU-e2e00000-0000-4000-8000-%012x" % gpu


def fake_gpu(package, gpu, vendor):
    if vendor == "nvidia":
        osdev = g.osdev("cuda%d" % gpu, g.OSDEV_COPROC, "CUDA",
                        [("Backend", "CUDA"), ("GPUVendor", "NVIDIA Corporation"),
                         ("GPUModel", "NVIDIA H100 (fake)"), ("NVIDIAUUID", uuid_of(gpu))])
        return g.pcidev(g.busid(package, 0x40 + gpu), g.H100, g.link(5, 16), [osdev])
    return g.pcidev(g.busid(package, 0x40 + gpu), g.MI250X, g.link(4, 16),
                    [g.rsmi(gpu, "AMD Instinct MI250X (fake)")])


def build(gpus, nics, hostname, threads_per_core=0, split=0, vendors=("amd",), l3_per_package=1):
    packages = live_packages()
    if threads_per_core:
        packages = [(v, m, as_threads(c, threads_per_core)) for v, m, c in packages]
    if split:
        packages = split_into(packages, split)
    # Each package's cores in `l3_per_package` L3s of consecutive cores (CCDs); GPUs and NICs are
    # dealt over the L3s in turn, each under its L3.
    domains = []  # (package, [[pu, ...] per core]) per L3
    for p, (_, _, core_pus) in enumerate(packages):
        if l3_per_package < 1 or l3_per_package > len(core_pus):
            sys.exit(f"--l3-per-package {l3_per_package}: a package has {len(core_pus)} cores")
        size = len(core_pus) // l3_per_package
        groups = [core_pus[i * size:(i + 1) * size] for i in range(l3_per_package)]
        groups[-1] += core_pus[l3_per_package * size:]
        domains += [(p, group) for group in groups]
    gpu_of_domain = [[] for _ in domains]
    for gpu in range(gpus):
        gpu_of_domain[gpu % len(domains)].append(gpu)
    nic_of_domain = [[] for _ in domains]
    for nic in range(nics):
        nic_of_domain[nic % len(domains)].append(nic)
    l3s_of_package = [[] for _ in packages]
    for d, (p, core_pus) in enumerate(domains):
        # Core numbers count within the package, as Linux's core_id does.
        first = sum(len(c) for q, c in domains[:d] if q == p)
        cores = [g.Obj("Core", first + i, children=[g.Obj("PU", pu) for pu in pus])
                 for i, pus in enumerate(core_pus)]
        endpoints = [g.slingshot(d, 0x10 + n, n) for n in nic_of_domain[d]]
        endpoints += [fake_gpu(d, gpu, vendors[gpu % len(vendors)]) for gpu in gpu_of_domain[d]]
        l3 = g.l3cache(d, 32 * g.MiB, cores)
        if endpoints:
            l3.add(g.root_complex(d, 0x0f, endpoints))
        l3s_of_package[p].append(l3)
    objs = [g.package(p, vendor, model, [g.numanode(p, 4 * g.GiB)] + l3s_of_package[p])
            for p, (vendor, model, _) in enumerate(packages)]
    return g.machine(hostname, "gpubind e2e node", objs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--nics", type=int, default=2)
    parser.add_argument("--hostname", default=os.uname().nodename)
    parser.add_argument("--threads-per-core", type=int, default=0,
                        help="present the PUs as cores of N hardware threads (0: as they are)")
    parser.add_argument("--split", type=int, default=0,
                        help="present the cores as N packages (NUMA node + L3 each), GPUs and "
                             "NICs dealt over them in turn (0: the machine's own packages)")
    parser.add_argument("--l3-per-package", type=int, default=1,
                        help="present each package's cores as N L3s (CCDs), GPUs and NICs dealt "
                             "over the L3s in turn")
    parser.add_argument("--gpu-vendors", default="amd",
                        help="GPU vendors in turn, amd or nvidia (e.g. nvidia,amd)")
    args = parser.parse_args()
    vendors = args.gpu_vendors.split(",")
    if any(v not in ("amd", "nvidia") for v in vendors):
        sys.exit(f"--gpu-vendors {args.gpu_vendors}: each must be amd or nvidia")
    text = g.render(build(args.gpus, args.nics, args.hostname, args.threads_per_core, args.split,
                          vendors, args.l3_per_package))
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
