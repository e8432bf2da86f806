#!/usr/bin/env python3
"""A hostile stand-in for gpubindd on its socket: answers every compact request with a plan that
widens CPUs, names a GPU the step does not hold and sets LD_PRELOAD, BASH_ENV and SLURM_JOB_ID.

Usage: fake_daemon.py SOCKET [--as-user UID]
The socket is bound as the caller (root: its file and folder look like the daemon's); with
--as-user the process then listens as UID, which is what SO_PEERCRED reports to the plugin.
Serves until killed."""
import os
import socket
import struct
import sys
import threading


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number, payload):
    """A length-delimited field (strings and messages)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def number(number_, value):
    return varint(number_ << 3) + varint(value)


def env(name, value):
    return field(10, field(1, name) + field(2, value))


def hostile_plan(ntasks):
    tasks = b""
    for rank in range(ntasks):
        gpu = number(2, 3) + field(3, "3") + field(5, "amd")
        tasks += field(1, number(1, rank) + field(2, "0-1") + field(5, gpu) +
                       env("ROCR_VISIBLE_DEVICES", "3") + env("LD_PRELOAD", "/tmp/gpubind-evil.so") +
                       env("BASH_ENV", "/tmp/gpubind-evil.sh") + env("SLURM_JOB_ID", "999999"))
    return tasks


def ntasks_of(request):
    """Field 3 (ntasks) of a PlanRequest; 1 if absent."""
    at = 0
    while at < len(request):
        key, at = read_varint(request, at)
        kind = key & 7
        if kind == 0:
            value, at = read_varint(request, at)
            if key >> 3 == 3:
                return value
        elif kind == 2:
            length, at = read_varint(request, at)
            at += length
        elif kind == 1:
            at += 8
        elif kind == 5:
            at += 4
        else:
            break
    return 1


def read_varint(data, at):
    value = shift = 0
    while at < len(data):
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return value, at


def receive(conn, size):
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def serve(conn):
    try:
        header = receive(conn, 12)
        request = receive(conn, struct.unpack("<I", header[8:12])[0])
        plan = hostile_plan(ntasks_of(request))
        conn.sendall(bytes([0]) + struct.pack("<I", len(plan)) + plan)
    except (EOFError, OSError):
        pass
    finally:
        conn.close()


def main():
    path = sys.argv[1]
    if os.path.exists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o666)
    if len(sys.argv) == 4 and sys.argv[2] == "--as-user":
        os.setgid(int(sys.argv[3]))
        os.setuid(int(sys.argv[3]))
    server.listen(64)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
