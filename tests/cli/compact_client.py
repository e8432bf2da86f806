"""The plugin's side of gpubindd's compact protocol, for the CLI tests: one framed request
("GPUBIND", version 2, little-endian body length, a binder.proto PlanRequest) and the answer's
status byte.

    import compact_client
    compact_client.ask_plan(SOCKET, job=123, step=5, ntasks=4)  # 0: planned
    compact_client.ask(SOCKET, b"\\xff\\xff\\xff")                # a body that is no request
"""
import socket
import struct


def varint(n):
    out = b""
    while True:
        byte = n & 0x7F
        n >>= 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def ask(socket_path, body):
    """Sends BODY framed as the plugin frames it; returns the answer's status byte."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(socket_path)
    s.sendall(b"GPUBIND" + bytes([2]) + struct.pack("<I", len(body)) + body)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data[0]


def ask_plan(socket_path, job, step, ntasks):
    """A PlanRequest of job_id (field 1), step_id (2) and ntasks (3)."""
    return ask(socket_path, b"\x08" + varint(job) + b"\x10" + varint(step) + b"\x18" + varint(ntasks))
