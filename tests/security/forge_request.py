"""Plan requests of a hostile local user, for the security tests: every string of a request that
names hardware (a GPU's bus id, its token, an unplaced token, oneCCL's launcher, an inherited
HIP_VISIBLE_DEVICES) holds FORGED, a newline, a journald priority prefix and a line made to look like
gpubindd's own text log. Encoded by hand (binder.proto's field numbers), framed as the plugin
frames a compact request; prints each answer's status byte.

    forge_request.py SOCKET [FIELD...]   FIELD: pci token unplaced ccl hip mismatch (default: all)

`mismatch` is a well-formed request naming a bus id this node lacks (a node_mismatch refusal any
user can cause at will).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from compact_client import ask, varint  # noqa: E402  (the plugin's framing, the CLI tests')

FORGED = ("x\n<0>gpubindd: FORGED-JOURNAL emergency\n"
          "2026-11-28T00:00:00 gpubindd error: FORGED-TEXT line")


def field(number, value):
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def step_gpu(index, token, pci=""):
    body = field(1, index) + field(2, token)
    return field(6, body + (field(3, pci) if pci else b""))


def request(kind):
    base = field(1, 4242) + field(3, 1) + field(4, "0-127")  # job, ntasks, allowed_cpus
    if kind == "pci":
        return base + field(5, 1) + step_gpu(0, "0", FORGED)
    if kind == "token":
        return base + field(5, 1) + step_gpu(0, FORGED)
    if kind == "unplaced":
        return base + field(18, FORGED)
    if kind == "ccl":
        return base + field(21, FORGED)
    if kind == "hip":
        return base + field(5, 1) + step_gpu(0, "0") + field(24, FORGED)
    if kind == "mismatch":
        return base + field(5, 1) + step_gpu(0, "0", "0000:ee:00.0")
    raise SystemExit("unknown field " + kind)


kinds = sys.argv[2:] or ["pci", "token", "unplaced", "ccl", "hip", "mismatch"]
for kind in kinds:
    print(kind, ask(sys.argv[1], request(kind)))
