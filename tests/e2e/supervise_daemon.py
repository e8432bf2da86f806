#!/usr/bin/env python3
"""Restarts gpubindd whenever it ends, as the unit's Restart=always and RestartSec do, for tests on
machines without systemd as PID 1.

usage: supervise_daemon.py [--hold-socket PATH] [--restart-sec S] PID_FILE LOG -- GPUBINDD ARGS...

Each daemon's pid goes to PID_FILE (the tests kill that one), its output to LOG. With
--hold-socket the supervisor listens on PATH itself and hands the socket to every daemon it starts
(LISTEN_FDS, LISTEN_PID), as gpubindd.socket does: connections wait in its queue between two
daemons. Without it each daemon binds its own socket, which is refused between two lives. SIGTERM
stops the daemon, then the supervisor, which says how many daemons it started; so does the
supervisor's parent going away.
"""
import argparse
import os
import signal
import socket
import sys
import time

SD_LISTEN_FDS_START = 3


def start(command, log, listener):
    pid = os.fork()
    if pid:
        return pid
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    env = dict(os.environ)
    if listener is not None:
        os.dup2(listener.fileno(), SD_LISTEN_FDS_START)
        os.set_inheritable(SD_LISTEN_FDS_START, True)  # dup2 onto itself would leave it close-on-exec
        env.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
    try:
        os.execve(command[0], command, env)
    except OSError as error:
        print("supervisor: cannot run %s: %s" % (command[0], error), file=sys.stderr)
    os._exit(127)  # never back into the supervisor's loop


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hold-socket")
    parser.add_argument("--restart-sec", type=float, default=0.1)
    parser.add_argument("pid_file")
    parser.add_argument("log")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    listener = None
    if args.hold_socket:
        if os.path.exists(args.hold_socket):
            os.unlink(args.hold_socket)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(args.hold_socket)
        os.chmod(args.hold_socket, 0o666)
        listener.listen(128)

    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    parent = os.getppid()

    # Only the handler sets `stopping`: an assignment here could undo one that lands mid-statement.
    def should_stop():
        return stopping or os.getppid() != parent

    starts = 0
    while not should_stop():
        pid = start(command, args.log, listener)
        starts += 1
        with open(args.pid_file + ".new", "w") as f:
            f.write("%d\n" % pid)
        os.rename(args.pid_file + ".new", args.pid_file)
        alive = True
        while alive and not should_stop():
            time.sleep(0.01)
            alive = os.waitpid(pid, os.WNOHANG) == (0, 0)
        if alive:
            os.kill(pid, signal.SIGCONT)  # a daemon a test stopped must be able to stop
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        elif not should_stop():
            time.sleep(args.restart_sec)
    if listener is not None:
        os.unlink(args.hold_socket)
    print("supervisor: %d daemons started" % starts, file=sys.stderr)


if __name__ == "__main__":
    main()
