#!/usr/bin/env python3
"""Writes a Linux sysfs/procfs tree that hwloc's Linux backend (HWLOC_FSROOT) and gpubind's
live discovery read as a given node.

  make_tree.py --from-xml DUMP.xml OUT_DIR [--intel-driver i915|xe]
      the node of an hwloc XML dump: CPUs, caches, NUMA nodes and distances, the PCI tree with
      its locality, network and InfiniBand devices, and the GPU drivers' files for the runtime
      devices the dump carries (rsmi partitions, Level Zero tiles, CUDA/NVML devices)
  make_tree.py --spec SPEC.json OUT_DIR [--intel-driver i915|xe]
      a node kind described in a spec file (tests/fsroot/specs, format in README.md)
  make_tree.py --canonical TOPOLOGY.xml
      the parts of an hwloc XML that a tree must reproduce, one line each, for comparing
      lstopo's view of a tree with its dump

Every file's format and its source are in README.md. Only the files hwloc and the readers use
are written; a cache is described under the first CPU that shares it (the only one hwloc reads).
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------
# The node model both front ends fill and the writer writes.


@dataclass
class Cache:
    level: int
    kind: str  # Data, Instruction, Unified
    size_kb: int
    line: int
    ways: int
    cpus: frozenset


@dataclass
class Numa:
    os_index: int
    cpus: frozenset
    memory: int  # bytes
    hugepages: dict = field(default_factory=dict)  # size kB -> count


@dataclass
class Net:
    name: str
    address: str
    port: int = 0  # InfiniBand port of an IPoIB device, 0 if none


# ib_port_state numbers and the names the kernel's ports/N/state prints after them.
PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}


@dataclass
class Rdma:
    name: str
    node_guid: str
    port_states: list = field(default_factory=lambda: [4])  # of ports 1..N


@dataclass
class Gpu:
    vendor: str  # amd, intel, nvidia
    partitions: int = 1  # AMD compute partitions
    compute_mode: str = ""  # SPX...CPX
    memory_mode: str = ""  # NPS1...
    available_modes: str = ""
    tiles: int = 1  # Intel
    uuid: str = ""  # NVIDIA
    model: str = ""
    simd_per_partition: int = 0
    numa_status_node: int = -1  # NVIDIA coherent memory (Grace): the GPU memory's NUMA node
    mig: list = field(default_factory=list)  # NVIDIA MIG: (GPU instance, compute instance) pairs


@dataclass
class Pci:
    bdf: str  # dddd:bb:dd.f
    vendor: int
    device: int
    class_id: int  # 24 bits: class, subclass, prog-if
    subvendor: int = 0
    subdevice: int = 0
    revision: int = 0
    link_gen: int = 0
    link_width: int = 0
    bridge_buses: tuple = None  # (secondary, subordinate) for a PCI-to-PCI bridge
    children: list = field(default_factory=list)
    nets: list = field(default_factory=list)
    rdmas: list = field(default_factory=list)
    drm: list = field(default_factory=list)  # DRM class names the dump shows (card0, renderD128)
    gpu: Gpu = None


@dataclass
class HostBridge:
    cpus: frozenset  # local_cpus of everything below
    numa: int  # numa_node of everything below, -1 if none
    devices: list = field(default_factory=list)


@dataclass
class Node:
    pus: list = field(default_factory=list)  # OS indexes
    core_of: dict = field(default_factory=dict)  # pu -> (package, core_id, frozenset of core)
    package_cpus: dict = field(default_factory=dict)  # package id -> frozenset
    die_of: dict = field(default_factory=dict)  # pu -> (die id, frozenset)
    caches: list = field(default_factory=list)
    numas: list = field(default_factory=list)
    distances: list = None  # matrix over numas, in order
    host_bridges: list = field(default_factory=list)
    cpu_model: str = "Generic CPU"
    hostname: str = "node"
    dmi: dict = field(default_factory=dict)  # /sys/class/dmi/id/<name>: board_name, ...


# ---------------------------------------------------------------------------------------------
# Bitmaps in hwloc's XML ("0x00ff,,0xffff") and in the kernel's masks ("0000ffff,00000000").


def parse_hwloc_set(text):
    if not text:
        return frozenset()
    if text.startswith("0xf...f"):
        raise ValueError("infinite set")
    words = text.split(",")
    value = 0
    for w in words:
        w = w[2:] if w.startswith("0x") else w
        value = (value << 32) | (int(w, 16) if w else 0)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def kernel_mask(cpus, nbits):
    """A cpumask as sysfs prints it (bitmap_print_to_pagebuf, list=false): 32-bit words."""
    value = sum(1 << c for c in cpus)
    words = max(1, (nbits + 31) // 32)
    return ",".join("%08x" % (value >> (32 * i) & 0xFFFFFFFF) for i in reversed(range(words)))


def cpu_list(cpus):
    """A cpulist as sysfs prints it (bitmap_print_to_pagebuf, list=true): 0-3,8."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
        run = [c]
    if run:
        out.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
    return ",".join(out)


# PCIe data rate per lane in GB/s by generation, as hwloc computes it (pci-common.c).
LANE_GBPS = {1: 0.25, 2: 0.5, 3: 8 * 128 / 130 / 8, 4: 16 * 128 / 130 / 8, 5: 32 * 128 / 130 / 8,
             6: 64 * 242 / 256 / 8}
GT_PER_S = {1: "2.5", 2: "5.0", 3: "8.0", 4: "16.0", 5: "32.0", 6: "64.0"}


def link_from_speed(gbps):
    if gbps <= 0:
        return 0, 0
    for width in (16, 8, 4, 2, 1, 32, 12):
        for gen, lane in LANE_GBPS.items():
            if abs(lane * width - gbps) < 0.01:
                return gen, width
    return 0, 0


# ---------------------------------------------------------------------------------------------
# Front end 1: an hwloc XML dump, first normalised by hwloc 2.9 itself (hwloc 1.x dumps become
# 2.x objects: typed caches, distances2).

MI300_DEVICES = {0x74A0: ("MI300A", 6), 0x74A1: ("MI300X", 8), 0x74A5: ("MI325X", 8),
                 0x74A9: ("MI300X-HF", 8), 0x74BD: ("MI300X-HF", 8)}
AMD_PARTITION_NAMES = {1: "SPX", 2: "DPX", 3: "TPX", 4: "QPX", 6: "CPX", 8: "CPX"}


def normalized_xml(path):
    out = subprocess.run(["lstopo-no-graphics", "-i", path, "--whole-io", "--of", "xml", "-"],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, HWLOC_XML_VERBOSE="0"))
    return ET.fromstring(out.stdout)


def infos(obj):
    return {i.get("name"): i.get("value") for i in obj.findall("info")}


def port_states_of(info):
    """An OpenFabrics device's port states, ports 1..N, from hwloc's Port<i>State infos."""
    states = []
    while "Port%dState" % (len(states) + 1) in info:
        states.append(int(info["Port%dState" % (len(states) + 1)]))
    return states


def amd_modes(device_id, partitions):
    xcds = MI300_DEVICES.get(device_id, ("", 0))[1]
    if not xcds:
        return "", ""
    if partitions == xcds:
        mode = "CPX"
    else:
        mode = {1: "SPX", 2: "DPX", 3: "TPX", 4: "QPX"}.get(partitions, "SPX")
    available = "SPX, TPX, CPX" if xcds == 6 else "SPX, DPX, QPX, CPX"
    return mode, available


def gpu_from_osdevs(pci, osdevs):
    names = [o.get("name", "") for o in osdevs]
    rsmi = [o for o in osdevs if o.get("name", "").startswith("rsmi")]
    ze = [n for n in names if n.startswith("ze") and "." not in n]
    nvidia = [o for o in osdevs if o.get("name", "")[:4] in ("cuda", "nvml")]
    if rsmi:
        gpu = Gpu("amd", partitions=len(rsmi))
        gpu.compute_mode, gpu.available_modes = amd_modes(pci.device, len(rsmi))
        gpu.memory_mode = "NPS1" if gpu.compute_mode else ""
        gpu.model = infos(rsmi[0]).get("GPUModel", "")
        return gpu
    if ze:
        tiles = sum(1 for n in names if n.startswith(ze[0] + "."))
        return Gpu("intel", tiles=max(1, tiles))
    if nvidia:
        uuid = ""
        model = ""
        for o in nvidia:
            uuid = uuid or infos(o).get("NVIDIAUUID", "")
            model = model or infos(o).get("GPUModel", "")
        return Gpu("nvidia", uuid=uuid, model=model)
    return None


def non_io_ancestor(obj, parents):
    while obj is not None and obj.get("type") in ("Bridge", "PCIDev", "OSDev", "Misc"):
        obj = parents.get(obj)
    return obj


def parse_pci(obj, parents):
    busid = obj.get("pci_busid")
    ptype = obj.get("pci_type", "0000 [0000:0000] [0000:0000] 00").split()
    cls = int(ptype[0], 16)
    vendor, device = (int(x, 16) for x in ptype[1].strip("[]").split(":"))
    subvendor, subdevice = (int(x, 16) for x in ptype[2].strip("[]").split(":"))
    gen, width = link_from_speed(float(obj.get("pci_link_speed", "0")))
    pci = Pci(busid, vendor, device, cls << 8, subvendor, subdevice, int(ptype[3], 16), gen, width)
    if obj.get("type") == "Bridge":
        span = obj.get("bridge_pci").split(":")[1].strip("[]").split("-")
        pci.bridge_buses = (int(span[0], 16), int(span[1], 16))
    osdevs = []
    for child in obj.findall("object"):
        t = child.get("type")
        if t in ("Bridge", "PCIDev"):
            pci.children.append(parse_pci(child, parents))
        elif t == "OSDev":
            osdevs.append(child)
            for sub in child.findall("object"):  # zeN.M below zeN
                if sub.get("type") == "OSDev":
                    osdevs.append(sub)
    for o in osdevs:
        name, kind, info = o.get("name", ""), o.get("osdev_type"), infos(o)
        if kind == "2":
            pci.nets.append(Net(name, info.get("Address", "00:00:00:00:00:00"),
                                int(info.get("Port", "0"))))
        elif kind == "3":
            pci.rdmas.append(Rdma(name, info.get("NodeGUID", guid_for(name)),
                                  port_states_of(info) or [4]))
        elif kind == "1" and name.startswith(("card", "renderD", "controlD")):
            pci.drm.append(name)
    pci.gpu = gpu_from_osdevs(pci, osdevs)
    return pci


def guid_for(name):
    h = hashlib.sha256(name.encode()).hexdigest()
    return ":".join(h[i:i + 4] for i in range(0, 16, 4))


def node_from_xml(path):
    root = normalized_xml(path)
    parents = {c: p for p in root.iter("object") for c in p.findall("object")}
    node = Node()
    machine = root.find("object")
    node.hostname = infos(machine).get("HostName", "node")
    pus = [o for o in root.iter("object") if o.get("type") == "PU"]
    node.pus = sorted(int(o.get("os_index")) for o in pus)
    packages = {}
    for o in root.iter("object"):
        t = o.get("type")
        if t == "Package":
            pid = int(o.get("os_index", len(packages)))
            packages[pid] = parse_hwloc_set(o.get("cpuset"))
            node.cpu_model = infos(o).get("CPUModel", node.cpu_model)
        elif t == "Die":
            cpus = parse_hwloc_set(o.get("cpuset"))
            for pu in cpus:
                node.die_of[pu] = (int(o.get("os_index", 0)), cpus)
        elif t in ("L1Cache", "L2Cache", "L3Cache", "L1iCache", "L4Cache"):
            kind = {"0": "Unified", "1": "Data", "2": "Instruction"}[o.get("cache_type", "0")]
            node.caches.append(Cache(int(o.get("depth")), kind, int(o.get("cache_size")) // 1024,
                                     int(o.get("cache_linesize", "64")),
                                     int(o.get("cache_associativity", "0")),
                                     parse_hwloc_set(o.get("cpuset"))))
        elif t == "NUMANode":
            numa = Numa(int(o.get("os_index")), parse_hwloc_set(o.get("cpuset")),
                        int(o.get("local_memory", "0")))
            for page in o.findall("page_type"):
                size_kb = int(page.get("size")) // 1024
                if size_kb > 4 and int(page.get("count", "0")) >= 0:
                    numa.hugepages[size_kb] = int(page.get("count", "0"))
            node.numas.append(numa)
    if not packages:
        packages[0] = frozenset(node.pus)
    node.package_cpus = packages
    cores = [o for o in root.iter("object") if o.get("type") == "Core"]
    for core in cores:
        cpus = parse_hwloc_set(core.get("cpuset"))
        pkg = next((p for p, s in packages.items() if cpus <= s), 0)
        for pu in cpus:
            node.core_of[pu] = (pkg, int(core.get("os_index", min(cpus))), cpus)
    for pu in node.pus:  # dumps without cores: each PU its own core
        if pu not in node.core_of:
            pkg = next((p for p, s in packages.items() if pu in s), 0)
            node.core_of[pu] = (pkg, pu, frozenset([pu]))
    # Disallowed CPU-less nodes hwloc drops do not matter; CPU-less nodes stay (cpuset empty).
    node.numas.sort(key=lambda n: n.os_index)
    node.distances = numa_distances(root, node.numas)
    for obj in root.iter("object"):
        if obj.get("type") == "Bridge" and obj.get("bridge_type", "").startswith("0-"):
            node.host_bridges.append(host_bridge(obj, parents, node))
        elif obj.get("type") in ("PCIDev", "Bridge") and parents.get(obj) is not None and \
                parents[obj].get("type") not in ("Bridge", "PCIDev"):
            # a PCI object attached without a host bridge (bridges filtered): its own bus root
            node.host_bridges.append(host_bridge(obj, parents, node, bare=True))
    return node


def host_bridge(obj, parents, node, bare=False):
    attach = non_io_ancestor(parents.get(obj), parents)
    cpus = parse_hwloc_set(attach.get("cpuset")) if attach is not None else frozenset(node.pus)
    numa = -1
    for n in node.numas:
        if n.cpus and cpus and cpus <= n.cpus:
            numa = n.os_index
            break
    devices = [parse_pci(obj, parents)] if bare else \
        [parse_pci(c, parents) for c in obj.findall("object") if c.get("type") in ("Bridge", "PCIDev")]
    return HostBridge(cpus, numa, devices)


def numa_distances(root, numas):
    for d in root.iter("distances2"):
        if d.get("type") != "NUMANode" or d.get("name", "NUMALatency") != "NUMALatency":
            continue
        n = int(d.get("nbobjs"))
        indexes = [int(x) for i in d.findall("indexes") for x in i.text.split()]
        values = [int(x) for v in d.findall("u64values") for x in v.text.split()]
        if len(indexes) != n or len(values) != n * n:
            continue
        pos = {os_index: k for k, os_index in enumerate(indexes)}
        if sorted(pos) != [m.os_index for m in numas]:
            continue
        return [[values[pos[a.os_index] * n + pos[b.os_index]] for b in numas] for a in numas]
    return None


# ---------------------------------------------------------------------------------------------
# Front end 2: a spec file describing a node kind from its vendors' published layout.

VENDOR_IDS = {"amd": 0x1002, "nvidia": 0x10DE, "intel": 0x8086}


def node_from_spec(path):
    spec = json.load(open(path))
    node = Node(hostname=spec.get("hostname", os.path.basename(path).split(".")[0]),
                cpu_model=spec["cpu"].get("model", "Generic CPU"), dmi=spec.get("dmi", {}))
    cpu = spec["cpu"]
    packages, cores_per_pkg = cpu["packages"], cpu["cores_per_package"]
    threads = cpu.get("threads_per_core", 1)
    ncores = packages * cores_per_pkg
    cores_per_l3 = cpu.get("cores_per_l3", cores_per_pkg)
    numa_per_pkg = cpu.get("numa_per_package", 1)
    # Linux numbers the first thread of every core first, then the second threads (x86 SMT).
    pu_of = lambda core, thread: core + thread * ncores  # noqa: E731
    for p in range(packages):
        node.package_cpus[p] = frozenset(pu_of(c, t) for c in range(p * cores_per_pkg,
                                                                      (p + 1) * cores_per_pkg)
                                         for t in range(threads))
    for c in range(ncores):
        cpus = frozenset(pu_of(c, t) for t in range(threads))
        for pu in cpus:
            node.core_of[pu] = (c // cores_per_pkg, c % cores_per_pkg, cpus)
        node.caches.append(Cache(1, "Data", cpu.get("l1d_kb", 32), 64, 8, cpus))
        node.caches.append(Cache(1, "Instruction", cpu.get("l1i_kb", 32), 64, 8, cpus))
        node.caches.append(Cache(2, "Unified", cpu.get("l2_kb", 1024), 64, 8, cpus))
    for first in range(0, ncores, cores_per_l3):
        cpus = frozenset(pu_of(c, t) for c in range(first, first + cores_per_l3) for t in range(threads))
        node.caches.append(Cache(3, "Unified", cpu.get("l3_kb", 32768), 64, 16, cpus))
    node.pus = sorted(node.core_of)
    cores_per_numa = cores_per_pkg // numa_per_pkg
    mem = spec.get("memory_per_numa_gb", 64) << 30
    for n in range(packages * numa_per_pkg):
        cpus = frozenset(pu_of(c, t) for c in range(n * cores_per_numa, (n + 1) * cores_per_numa)
                         for t in range(threads))
        node.numas.append(Numa(n, cpus, mem))
    for extra in spec.get("cpuless_numa", []):
        node.numas.append(Numa(extra["node"], frozenset(), int(extra.get("memory_gb", 0)) << 30))
    node.numas.sort(key=lambda n: n.os_index)
    node.distances = spec_distances(spec, node)
    numa_cpus = {n.os_index: n.cpus for n in node.numas}
    roots = {}
    for dev in spec["pci"]:
        domain_bus = dev["bdf"][:7] if not dev.get("path") else dev["path"][0][:7]
        numa = dev.get("numa", 0)
        key = (domain_bus, numa)
        if key not in roots:
            roots[key] = HostBridge(numa_cpus[numa], numa)
            node.host_bridges.append(roots[key])
        add_spec_device(roots[key], dev)
    for hb in node.host_bridges:
        assign_bridge_buses(hb.devices)
    return node


def spec_distances(spec, node):
    d = spec.get("distances")
    if isinstance(d, list):
        return d
    local, remote = 10, spec.get("remote_distance", 32)
    same_pkg = spec.get("same_package_distance", 12)
    pkg_of = {}
    for n in node.numas:
        pkg_of[n.os_index] = next((p for p, s in node.package_cpus.items() if n.cpus and n.cpus <= s),
                                  None)
    cpuless = {e["node"]: e for e in spec.get("cpuless_numa", [])}
    out = []
    for a in node.numas:
        row = []
        for b in node.numas:
            if a.os_index == b.os_index:
                row.append(local)
            elif a.os_index in cpuless or b.os_index in cpuless:
                e = cpuless.get(a.os_index) or cpuless.get(b.os_index)
                other = b.os_index if a.os_index in cpuless else a.os_index
                row.append(e.get("near_distance", 40) if other == e.get("near")
                           else e.get("far_distance", 80))
            else:
                row.append(same_pkg if pkg_of[a.os_index] == pkg_of[b.os_index] else remote)
        out.append(row)
    return out


def add_spec_device(hb, dev):
    level = hb.devices
    for bdf in dev.get("path", []):
        bridge = next((b for b in level if b.bdf == bdf), None)
        if bridge is None:
            bridge = Pci(bdf, int(dev.get("bridge_vendor", "0x1022"), 16),
                         int(dev.get("bridge_device", "1483"), 16),
                         0x060400, link_gen=dev.get("link_gen", 4), link_width=16,
                         bridge_buses=(0, 0))
            level.append(bridge)
        level = bridge.children
    vendor = dev.get("vendor")
    vendor = VENDOR_IDS.get(vendor, None) if isinstance(vendor, str) and not vendor.startswith("0x") \
        else int(str(vendor), 16)
    pci = Pci(dev["bdf"], vendor, int(dev["device"], 16), int(dev["class"], 16),
              int(dev.get("subvendor", hex(vendor)), 16), int(dev.get("subdevice", dev["device"]), 16),
              int(dev.get("revision", "0"), 16), dev.get("link_gen", 4), dev.get("link_width", 16))
    for net in dev.get("net", []):  # a name, or {"name": N, "port": P} for IPoIB on port P
        if isinstance(net, str):
            net = {"name": net}
        pci.nets.append(Net(net["name"], mac_for(net["name"]), net.get("port", 0)))
    for rdma in dev.get("rdma", []):  # a name, or {"name": N, "ports": ["DOWN", "ACTIVE"]}
        if isinstance(rdma, str):
            rdma = {"name": rdma}
        states = {name: number for number, name in PORT_STATES.items()}
        pci.rdmas.append(Rdma(rdma["name"], guid_for(rdma["name"]),
                              [states[s] for s in rdma.get("ports", ["ACTIVE"])]))
    g = dev.get("gpu")
    if g:
        gpu = Gpu(g["vendor"], partitions=g.get("partitions", 1), tiles=g.get("tiles", 1),
                  model=g.get("model", ""), uuid=g.get("uuid", ""),
                  simd_per_partition=g.get("simd_per_partition", 0),
                  numa_status_node=g.get("numa_status_node", -1),
                  mig=[tuple(pair) for pair in g.get("mig", [])])
        if gpu.vendor == "amd":
            gpu.compute_mode, gpu.available_modes = amd_modes(pci.device, gpu.partitions)
            gpu.memory_mode = g.get("memory_partition", "NPS1" if gpu.compute_mode else "")
        pci.gpu = gpu
    level.append(pci)


def mac_for(name):
    h = hashlib.sha256(name.encode()).digest()
    return "02:" + ":".join("%02x" % b for b in h[:5])


def assign_bridge_buses(devices):
    """Bridges of a spec get the bus range their children use, as firmware enumeration would."""
    lo_hi = None
    for pci in devices:
        bus = int(pci.bdf[5:7], 16)
        span = (bus, bus)
        if pci.bridge_buses is not None:
            below = assign_bridge_buses(pci.children)
            pci.bridge_buses = below if below else (bus + 1, bus + 1)
            span = (bus, pci.bridge_buses[1])
        lo_hi = span if lo_hi is None else (min(lo_hi[0], span[0]), max(lo_hi[1], span[1]))
    return lo_hi


# ---------------------------------------------------------------------------------------------
# The writer.


class Tree:
    def __init__(self, root):
        self.root = root
        self.files = 0

    def path(self, rel):
        return os.path.join(self.root, rel.lstrip("/"))

    def write(self, rel, content, mode="w"):
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, mode) as f:
            f.write(content)
        self.files += 1

    def mkdir(self, rel):
        os.makedirs(self.path(rel), exist_ok=True)

    def link(self, rel, target_rel):
        """A relative symlink at rel pointing to target_rel (both absolute in the tree)."""
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        target = os.path.relpath(self.path(target_rel), os.path.dirname(p))
        if os.path.lexists(p):
            os.remove(p)
        os.symlink(target, p)


def write_cpus(tree, node):
    nbits = max(node.pus) + 1
    base = "/sys/devices/system/cpu"
    tree.write(base + "/online", cpu_list(node.pus) + "\n")
    tree.write(base + "/possible", cpu_list(range(nbits)) + "\n")
    tree.write(base + "/present", cpu_list(node.pus) + "\n")
    for pu in node.pus:
        pkg, core_id, core_cpus = node.core_of[pu]
        t = "%s/cpu%d/topology" % (base, pu)
        tree.write(t + "/core_id", "%d\n" % core_id)
        tree.write(t + "/core_cpus", kernel_mask(core_cpus, nbits) + "\n")
        tree.write(t + "/core_cpus_list", cpu_list(core_cpus) + "\n")
        tree.write(t + "/thread_siblings", kernel_mask(core_cpus, nbits) + "\n")
        tree.write(t + "/physical_package_id", "%d\n" % pkg)
        tree.write(t + "/package_cpus", kernel_mask(node.package_cpus[pkg], nbits) + "\n")
        tree.write(t + "/core_siblings", kernel_mask(node.package_cpus[pkg], nbits) + "\n")
        if pu in node.die_of:
            die_id, die_cpus = node.die_of[pu]
            tree.write(t + "/die_id", "%d\n" % die_id)
            tree.write(t + "/die_cpus", kernel_mask(die_cpus, nbits) + "\n")
    # Each cache under the first CPU sharing it, indexed as the kernel does (L1d, L1i, L2, L3).
    order = {("Data", 1): 0, ("Instruction", 1): 1}
    per_cpu = {}
    for c in sorted(node.caches, key=lambda c: (c.level, order.get((c.kind, c.level), 2))):
        per_cpu.setdefault(min(c.cpus), []).append(c)
    for cpu, caches in per_cpu.items():
        index = 0
        for c in caches:
            # the kernel's index number is the cache's rank under every CPU it covers
            d = "%s/cpu%d/cache/index%d" % (base, cpu, cache_index(node, c))
            tree.write(d + "/level", "%d\n" % c.level)
            tree.write(d + "/type", c.kind + "\n")
            tree.write(d + "/size", "%dK\n" % c.size_kb)
            tree.write(d + "/coherency_line_size", "%d\n" % c.line)
            tree.write(d + "/ways_of_associativity", "%d\n" % c.ways)
            sets = (c.size_kb * 1024) // (c.line * c.ways) if c.ways > 0 and c.line else 0
            tree.write(d + "/number_of_sets", "%d\n" % sets)
            tree.write(d + "/physical_line_partition", "1\n")
            tree.write(d + "/shared_cpu_map", kernel_mask(c.cpus, nbits) + "\n")
            tree.write(d + "/shared_cpu_list", cpu_list(c.cpus) + "\n")
            index += 1


def cache_index(node, cache):
    cpu = min(cache.cpus)
    order = {("Data", 1): 0, ("Instruction", 1): 1}
    covering = sorted((c for c in node.caches if cpu in c.cpus),
                      key=lambda c: (c.level, order.get((c.kind, c.level), 2)))
    return next(i for i, c in enumerate(covering) if c is cache)


def write_numa(tree, node):
    base = "/sys/devices/system/node"
    nbits = max(node.pus) + 1
    ids = [n.os_index for n in node.numas]
    if not ids:
        tree.write("/proc/meminfo", "MemTotal:       %d kB\n" % (64 << 20))
        return
    tree.write(base + "/online", cpu_list(ids) + "\n")
    tree.write(base + "/possible", cpu_list(ids) + "\n")
    tree.write(base + "/has_cpu", cpu_list([n.os_index for n in node.numas if n.cpus]) + "\n")
    tree.write(base + "/has_memory", cpu_list([n.os_index for n in node.numas if n.memory]) + "\n")
    total = 0
    for k, n in enumerate(node.numas):
        d = "%s/node%d" % (base, n.os_index)
        tree.write(d + "/cpumap", kernel_mask(n.cpus, nbits) + "\n")
        tree.write(d + "/cpulist", cpu_list(n.cpus) + "\n")
        kb = n.memory // 1024
        total += kb
        tree.write(d + "/meminfo", "Node %d MemTotal:       %8d kB\nNode %d MemFree:        %8d kB\n"
                   % (n.os_index, kb, n.os_index, kb))
        for size_kb, count in sorted(n.hugepages.items()):
            tree.write("%s/hugepages/hugepages-%dkB/nr_hugepages" % (d, size_kb), "%d\n" % count)
        if node.distances:
            tree.write(d + "/distance", " ".join(str(v) for v in node.distances[k]) + "\n")
    tree.write("/proc/meminfo", "MemTotal:       %8d kB\nMemFree:        %8d kB\n" % (total, total))


def write_proc_cpuinfo(tree, node):
    lines = []
    for pu in node.pus:
        pkg, core_id, _ = node.core_of[pu]
        lines.append("processor\t: %d\nmodel name\t: %s\nphysical id\t: %d\ncore id\t\t: %d\n"
                     % (pu, node.cpu_model, pkg, core_id))
    tree.write("/proc/cpuinfo", "\n".join(lines) + "\n")


def config_space(pci, primary_bus):
    """The first 64 bytes of the configuration space: what an unprivileged reader of the sysfs
    config file gets (pci_read_config: the rest needs CAP_SYS_ADMIN)."""
    b = bytearray(64)
    b[0:2] = pci.vendor.to_bytes(2, "little")
    b[2:4] = pci.device.to_bytes(2, "little")
    b[8] = pci.revision
    b[9:12] = pci.class_id.to_bytes(3, "little")
    if pci.bridge_buses is not None:
        b[0x0E] = 0x01  # header type 1: PCI-to-PCI bridge
        b[0x18], b[0x19], b[0x1A] = primary_bus, pci.bridge_buses[0], pci.bridge_buses[1]
    else:
        b[0x2C:0x2E] = pci.subvendor.to_bytes(2, "little")
        b[0x2E:0x30] = pci.subdevice.to_bytes(2, "little")
    return bytes(b)


class PciWriter:
    def __init__(self, tree, node, intel_driver):
        self.tree = tree
        self.node = node
        self.intel_driver = intel_driver
        self.nbits = max(node.pus) + 1
        self.card = 0
        self.render = 128
        self.nvidia_minor = 0
        self.amd_gpus = []  # (Pci, HostBridge, sysfs dir)
        self.nvidia_gpus = []

    def write(self):
        for hb in self.node.host_bridges:
            for pci in hb.devices:
                root = "/sys/devices/pci%s:%s" % (pci.bdf[:4], pci.bdf[5:7])
                self.device(pci, hb, root)
        self.write_kfd()
        self.write_mig_minors()

    def device(self, pci, hb, parent_dir):
        d = parent_dir + "/" + pci.bdf
        t = self.tree
        t.write(d + "/vendor", "0x%04x\n" % pci.vendor)
        t.write(d + "/device", "0x%04x\n" % pci.device)
        t.write(d + "/class", "0x%06x\n" % pci.class_id)
        t.write(d + "/subsystem_vendor", "0x%04x\n" % pci.subvendor)
        t.write(d + "/subsystem_device", "0x%04x\n" % pci.subdevice)
        t.write(d + "/revision", "0x%02x\n" % pci.revision)
        t.write(d + "/local_cpus", kernel_mask(hb.cpus, self.nbits) + "\n")
        t.write(d + "/local_cpulist", cpu_list(hb.cpus) + "\n")
        t.write(d + "/numa_node", "%d\n" % hb.numa)
        t.write(d + "/config", config_space(pci, int(pci.bdf[5:7], 16)), mode="wb")
        if pci.link_gen:
            t.write(d + "/current_link_speed", "%s GT/s PCIe\n" % GT_PER_S[pci.link_gen])
            t.write(d + "/current_link_width", "%d\n" % pci.link_width)
        t.link("/sys/bus/pci/devices/" + pci.bdf, d)
        for net in pci.nets:
            nd = d + "/net/" + net.name
            t.write(nd + "/address", net.address + "\n")
            if net.port:
                t.write(nd + "/dev_port", "%d\n" % (net.port - 1))
            t.link(nd + "/device", d)
            t.link("/sys/class/net/" + net.name, nd)
        for rdma in pci.rdmas:
            rd = d + "/infiniband/" + rdma.name
            t.write(rd + "/node_guid", rdma.node_guid + "\n")
            t.write(rd + "/sys_image_guid", rdma.node_guid + "\n")
            for port, state in enumerate(rdma.port_states, 1):
                t.write("%s/ports/%d/state" % (rd, port), "%d: %s\n" % (state, PORT_STATES[state]))
                t.write("%s/ports/%d/lid" % (rd, port), "0x%x\n" % port)
                t.write("%s/ports/%d/lid_mask_count" % (rd, port), "0\n")
            t.link(rd + "/device", d)
            t.link("/sys/class/infiniband/" + rdma.name, rd)
        for name in pci.drm:
            self.drm_node(d, name)
        if pci.gpu:
            self.gpu(pci, hb, d)
        for child in pci.children:
            self.device(child, hb, d)

    def drm_node(self, devdir, name, minor=None):
        dd = devdir + "/drm/" + name
        major_minor = "226:%d" % (minor if minor is not None else
                                  int("".join(ch for ch in name if ch.isdigit()) or 0))
        self.tree.write(dd + "/dev", major_minor + "\n")
        self.tree.link(dd + "/device", devdir)
        self.tree.link("/sys/class/drm/" + name, dd)
        return dd

    def gpu(self, pci, hb, d):
        g = pci.gpu
        if g.vendor == "amd":
            if g.model:  # amdgpu's FRU product name (server boards)
                self.tree.write(d + "/product_name", g.model + "\n")
            if g.compute_mode:
                self.tree.write(d + "/current_compute_partition", g.compute_mode + "\n")
                self.tree.write(d + "/available_compute_partition", g.available_modes + "\n")
            if g.memory_mode:
                self.tree.write(d + "/current_memory_partition", g.memory_mode + "\n")
            self.amd_gpus.append((pci, hb))
        elif g.vendor == "intel":
            card = self.card
            self.card += 1
            if self.intel_driver == "xe":
                # xe: tile<K>/gt<M> below the PCI device (xe_tile_sysfs.c, xe_gt_sysfs.c);
                # PVC has no media GT, so GT ids run one per tile.
                for k in range(g.tiles):
                    self.tree.write("%s/tile%d/physical_vram_size_bytes" % (d, k),
                                    "0x%x\n" % (64 << 30))
                    self.tree.mkdir("%s/tile%d/gt%d" % (d, k, k))
            else:
                # i915: drm/card<N>/gt/gt<K>/ (intel_gt_sysfs.c), one per tile, with its id.
                for k in range(g.tiles):
                    self.tree.write("%s/drm/card%d/gt/gt%d/id" % (d, card, k), "%d\n" % k)
            self.drm_node(d, "card%d" % card, card)
            self.drm_node(d, "renderD%d" % self.render, self.render)
            self.render += 1
        elif g.vendor == "nvidia":
            self.nvidia_gpus.append(pci)
            self.write_nvidia(pci)

    def write_nvidia(self, pci):
        g = pci.gpu
        uuid = g.uuid or nvidia_uuid(pci.bdf)
        model = g.model or "NVIDIA GPU %04x" % pci.device
        minor = self.nvidia_minor
        self.nvidia_minor += 1
        dom, bus, devfn = pci.bdf[:4], pci.bdf[5:7], pci.bdf[8:]
        text = ("Model: \t\t %s\n" % model +
                "IRQ:   \t\t %d\n" % (200 + minor) +
                "GPU UUID: \t %s\n" % uuid +
                "Video BIOS: \t 96.00.74.00.01\n" +
                "Bus Type: \t PCIe\n" +
                "DMA Size: \t 52 bits\n" +
                "DMA Mask: \t 0xfffffffffffff\n" +
                "Bus Location: \t %s:%s:%s\n" % (dom, bus, devfn) +
                "Device Minor: \t %d\n" % minor +
                "GPU Firmware: \t N/A\n" +
                "GPU Excluded:\t No\n")
        self.tree.write("/proc/driver/nvidia/gpus/%s/information" % pci.bdf, text)
        if g.numa_status_node >= 0:
            self.tree.write("/proc/driver/nvidia/gpus/%s/numa_status" % pci.bdf,
                            "Node:      %d\nStatus:    online\n" % g.numa_status_node)
        self.write_mig(minor, g.mig)

    def write_mig(self, gpu_minor, instances):
        """The GPU's MIG capability folders (os.c osRmCapRegisterGpu, ...SmcPartition,
        ...SmcExecutionPartition): gpu<minor>/mig always, gi<G>/access for each GPU instance,
        gi<G>/ci<C>/access for each compute instance, as nv-caps.c prints an access file."""
        mig = "/proc/driver/nvidia/capabilities/gpu%d/mig" % gpu_minor
        self.tree.mkdir(mig)
        if instances:
            self.tree.write("/proc/driver/nvidia/capabilities/mig/config", access_text(1, 0o400))
            self.tree.write("/proc/driver/nvidia/capabilities/mig/monitor", access_text(2, 0o444))
        for gi, ci in instances:
            self.tree.write("%s/gi%d/access" % (mig, gi), access_text(mig_minor(gpu_minor, gi)))
            self.tree.write("%s/gi%d/ci%d/access" % (mig, gi, ci),
                            access_text(mig_minor(gpu_minor, gi, ci)))

    def write_mig_minors(self):
        """/proc/driver/nvidia-caps/mig-minors: every MIG capability that could exist, whether
        it does or not (nv-caps.c), for the node's GPUs; written when one of them has MIG."""
        if not any(pci.gpu.mig for pci in self.nvidia_gpus):
            return
        lines = ["config 1", "monitor 2"]
        for gpu in range(self.nvidia_minor):
            for gi in range(MIG_GPU_INSTANCES):
                lines.append("gpu%d/gi%d/access %d" % (gpu, gi, mig_minor(gpu, gi)))
                lines += ["gpu%d/gi%d/ci%d/access %d" % (gpu, gi, ci, mig_minor(gpu, gi, ci))
                          for ci in range(MIG_COMPUTE_INSTANCES)]
        self.tree.write("/proc/driver/nvidia-caps/mig-minors", "\n".join(lines) + "\n")

    def write_kfd(self):
        if not self.amd_gpus:
            return
        base = "/sys/class/kfd/kfd/topology"
        self.tree.write(base + "/generation_id", "1\n")
        self.tree.write(base + "/system_properties", "platform_oem 0\nplatform_id 0\nplatform_rev 0\n")
        index = 0
        for n in self.node.numas:
            if not n.cpus:
                continue
            cores = len({self.node.core_of[pu][2] for pu in n.cpus})
            self.kfd_node(index, cpu_cores=cores, gpu_id=0, name="")
            index += 1
        minor = 128
        for pci, hb in sorted(self.amd_gpus, key=lambda x: x[0].bdf):
            g = pci.gpu
            for part in range(g.partitions):
                location = (int(pci.bdf[5:7], 16) << 8) | (int(pci.bdf[8:10], 16) << 3) | \
                    int(pci.bdf[11], 16)
                if g.partitions > 1:
                    location |= part  # kfd_topology_add_device: node id ORed in when num_nodes > 1
                gpu_id = int(hashlib.sha256(("%s/%d" % (pci.bdf, part)).encode()).hexdigest()[:4], 16) | 1
                self.kfd_node(index, cpu_cores=0, gpu_id=gpu_id,
                              name="ip discovery" if g.compute_mode else "aldebaran",
                              simd=g.simd_per_partition or (440 if not g.compute_mode else 4 * 228 // g.partitions),
                              vendor=pci.vendor, device=pci.device, location=location,
                              domain=int(pci.bdf[:4], 16), render=minor)
                minor += 1
                index += 1

    def kfd_node(self, index, cpu_cores, gpu_id, name, simd=0, vendor=0, device=0, location=0,
                 domain=0, render=0):
        d = "/sys/class/kfd/kfd/topology/nodes/%d" % index
        props = [("cpu_cores_count", cpu_cores), ("simd_count", simd), ("mem_banks_count", 1),
                 ("caches_count", 0), ("io_links_count", 1), ("p2p_links_count", 0),
                 ("cpu_core_id_base", 0), ("simd_id_base", 0), ("max_waves_per_simd", 8 if simd else 0),
                 ("lds_size_in_kb", 64 if simd else 0), ("gds_size_in_kb", 0), ("num_gws", 64 if simd else 0),
                 ("wave_front_size", 64 if simd else 0), ("array_count", 0),
                 ("simd_arrays_per_engine", 0), ("cu_per_simd_array", 0),
                 ("simd_per_cu", 4 if simd else 0), ("max_slots_scratch_cu", 32 if simd else 0),
                 ("gfx_target_version", 90402 if simd else 0), ("vendor_id", vendor),
                 ("device_id", device), ("location_id", location), ("domain", domain),
                 ("drm_render_minor", render), ("hive_id", 0), ("num_sdma_engines", 2 if simd else 0),
                 ("num_sdma_xgmi_engines", 0), ("num_sdma_queues_per_engine", 8 if simd else 0),
                 ("num_cp_queues", 24 if simd else 0)]
        if simd:
            props += [("max_engine_clk_fcompute", 2100), ("local_mem_size", 0),
                      ("fw_version", 150), ("capability", 0), ("capability2", 0),
                      ("debug_prop", 0), ("sdma_fw_version", 20), ("unique_id", gpu_id),
                      ("num_xcc", 1)]
        props.append(("max_engine_clk_ccompute", 3700))
        self.tree.write(d + "/properties", "".join("%s %d\n" % kv for kv in props))
        self.tree.write(d + "/gpu_id", "%d\n" % gpu_id)
        self.tree.write(d + "/name", name + "\n")


# nv-caps.c numbers the MIG capabilities' device minors after config (1) and monitor (2): per GPU,
# per GPU instance, its own access, then its compute instances'.
MIG_GPU_INSTANCES = 15
MIG_COMPUTE_INSTANCES = 8


def mig_minor(gpu, gi, ci=None):
    first = 3 + (gpu * MIG_GPU_INSTANCES + gi) * (1 + MIG_COMPUTE_INSTANCES)
    return first if ci is None else first + 1 + ci


def access_text(device_minor, mode=0o444):
    return "DeviceFileMinor: %d\nDeviceFileMode: %d\nDeviceFileModify: 1\n" % (device_minor, mode)


def nvidia_uuid(bdf):
    h = hashlib.sha256(("nvidia:" + bdf).encode()).hexdigest()
    return "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def write_tree(node, out, intel_driver):
    tree = Tree(out)
    os.makedirs(out, exist_ok=True)
    write_cpus(tree, node)
    write_numa(tree, node)
    write_proc_cpuinfo(tree, node)
    tree.write("/proc/sys/kernel/hostname", node.hostname + "\n")
    for name, value in node.dmi.items():
        tree.write("/sys/devices/virtual/dmi/id/" + name, value + "\n")
        tree.link("/sys/class/dmi/id", "/sys/devices/virtual/dmi/id")
    PciWriter(tree, node, intel_driver).write()
    return tree.files


# ---------------------------------------------------------------------------------------------
# The canonical view used to compare lstopo's reading of a tree with the dump.


def canonical(path):
    root = ET.parse(path).getroot() if path != "-" else ET.fromstring(sys.stdin.read())
    lines = []

    def walk(obj, depth):
        t = obj.get("type")
        line = None
        if t in ("Package", "NUMANode", "Die", "L3Cache", "L2Cache", "Core", "PU"):
            line = "%s#%s cpus=%s" % (t, obj.get("os_index", "?") if t not in ("L3Cache", "L2Cache")
                                      else "", cpu_list(parse_hwloc_set(obj.get("cpuset"))))
            if t == "NUMANode":
                line += " mem=%s" % obj.get("local_memory", "0")
            if t in ("L3Cache", "L2Cache"):
                line += " size=%s" % obj.get("cache_size")
        elif t == "Bridge":
            # A host bridge's last bus counts the bridges the dump's filter dropped: left out.
            span = obj.get("bridge_pci", "")
            if obj.get("bridge_type", "").startswith("0-"):
                span = span.split("-")[0] + "-]"
            line = "Bridge %s %s %s" % (obj.get("bridge_type"), span, obj.get("pci_busid", ""))
        elif t == "PCIDev":
            line = "PCI %s %s" % (obj.get("pci_busid"), " ".join(obj.get("pci_type").split()[:2]))
        elif t == "OSDev" and obj.get("osdev_type") in ("2", "3"):
            line = "OSDev %s" % obj.get("name")
            states = port_states_of(infos(obj))
            if states:  # UCX uses an RDMA device's active ports only
                line += " ports=%s" % ",".join(map(str, states))
        if line:
            lines.append("  " * depth + line)
        for child in obj.findall("object"):
            walk(child, depth + (1 if line else 0))

    for top in root.findall("object"):
        walk(top, 0)
    for d in root.iter("distances2"):
        if d.get("type") == "NUMANode" and d.get("name", "NUMALatency") == "NUMALatency":
            lines.append("distances %s" % " ".join(v.text.strip() for v in d.findall("u64values")))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-xml", metavar="DUMP")
    src.add_argument("--spec", metavar="SPEC")
    src.add_argument("--canonical", metavar="XML")
    ap.add_argument("--intel-driver", choices=("i915", "xe"), default="i915")
    ap.add_argument("--io-locality", choices=("cpus", "numa-node", "none"), default="cpus",
                    help="what the kernel reports for each PCI device: its local CPUs and NUMA node "
                    "(cpus), every CPU as local_cpus but its numa_node (numa-node), or every CPU "
                    "and numa_node -1 (none: firmware without PCI proximity)")
    ap.add_argument("out", nargs="?")
    args = ap.parse_args()
    if args.canonical:
        sys.stdout.write(canonical(args.canonical))
        return 0
    if not args.out:
        ap.error("OUT_DIR is required")
    if os.path.exists(args.out) and os.listdir(args.out):
        ap.error("%s exists and is not empty" % args.out)
    node = node_from_xml(args.from_xml) if args.from_xml else node_from_spec(args.spec)
    if args.io_locality != "cpus":
        for hb in node.host_bridges:
            hb.cpus = frozenset(node.pus)
            if args.io_locality == "none":
                hb.numa = -1
    write_tree(node, args.out, args.intel_driver)
    return 0


if __name__ == "__main__":
    sys.exit(main())
