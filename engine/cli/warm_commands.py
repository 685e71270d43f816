"""``crucible warm start [--idle SECONDS] | stop | status``: the warm server's life (engine/cli/warm.py).

A server still finishing its commands after a ``stop`` (or after its code went stale, before it
starts itself again) listens no more; the pid in its lock file, held for its whole life, still
names it: ``status`` reports it, ``stop`` sends it SIGTERM (it exits once its forks end).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from engine.cli.args import one_line_parser
from engine.cli.main import WARM_COMMANDS, WARM_READS
from engine.cli.warm import CHECKOUT, connect, private, recv_message, send_message, socket_path
from engine.errors import UserError

IDLE_DEFAULT = 3 * 3600
"""Seconds a server waits with nothing to do before it exits (Bazel's default too)."""


def run_warm(args: list[str]) -> int:
    parser = one_line_parser("warm", "a server that starts run, check, build, rerun and lock with crucible imported")
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument(
        "--idle",
        type=float,
        default=IDLE_DEFAULT,
        metavar="SECONDS",
        help=f"start: exit after this long with no command (default {IDLE_DEFAULT})",
    )
    ns = parser.parse_args(args)
    if ns.idle <= 0:
        raise UserError(f"--idle must be a positive number of seconds, not {ns.idle:g}")
    if ns.action == "start":
        return _start(ns.idle)
    return _stop() if ns.action == "stop" else _status()


def log_path() -> Path:
    return socket_path().with_suffix(".log")


def lock_path() -> Path:
    return socket_path().with_suffix(".lock")


def draining() -> int | None:
    """The pid of this socket's server where it listens no more but still runs, else None."""
    try:
        pid = int(lock_path().read_text().strip() or 0)
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if b"engine.cli.warm_server" in command and str(socket_path()).encode() in command else None


def _ask(op: str) -> dict[str, Any] | None:
    sock = connect()
    if sock is None:
        return None
    with sock:
        try:
            send_message(sock, {"op": op})
            return recv_message(sock, within=5.0)[0]  # a server stopped (SIGSTOP) or wedged: not running
        except (OSError, ValueError):
            return None


def _status() -> int:
    answer = _ask("ping")
    if answer is None:
        pid = draining()
        if pid is not None:
            print(f"crucible warm: pid {pid} listens no more and exits once its commands end; log {log_path()}")
            return 0
        print("crucible warm: not running (crucible warm start)")
        return 1
    stale = f"; stale, starting again: {answer['stale']}" if answer.get("stale") else ""
    reader = (
        f"; reader pid {answer['reader']}, {answer['reads']} read(s), {'busy' if answer.get('reading') else 'idle'}"
        if answer.get("reader")
        else ""
    )
    print(
        f"crucible warm: running, pid {answer['pid']}, {answer['served']} command(s) served, "
        f"{answer['running']} running now{reader}{stale}; log {log_path()}"
    )
    return 0


def _stop() -> int:
    answer = _ask("stop")
    if answer is None:
        pid = draining()
        if pid is None:
            print("crucible warm: not running")
            return 0
        os.kill(pid, signal.SIGTERM)  # not to start again once its commands end
        print(f"crucible warm: stopped (pid {pid}); it exits once its commands end")
        return 0
    if answer["running"]:
        print(f"crucible warm: stopped (pid {answer['pid']}); it exits once its {answer['running']} command(s) end")
        return 0
    _until_exited(int(answer["pid"]))
    print(f"crucible warm: stopped (pid {answer['pid']})")
    return 0


def _until_exited(pid: int, within: float = 30.0) -> None:
    """Wait for a server with nothing to finish to be gone (its exit, not a while)."""
    import select

    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # gone already
    try:
        select.select([pidfd], [], [], within)
    finally:
        os.close(pidfd)


def _start(idle: float) -> int:
    answer = _ask("ping")
    if answer is not None:
        print(f"crucible warm: already running, pid {answer['pid']}")
        return 0
    path = socket_path()
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot make {path.parent} for the warm socket: {exc.strerror or exc}") from exc
    if not private(path.parent):
        raise UserError(f"{path.parent} must be a directory of this user's alone (mode 0700) to hold the warm socket")
    read_end, write_end = os.pipe()
    with open(log_path(), "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "engine.cli.warm_server", str(path), str(write_end), str(idle), str(CHECKOUT)],
            cwd=CHECKOUT,  # this checkout's engine, whatever a shared virtualenv points at
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")])),
            },
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(write_end,),
            start_new_session=True,  # no terminal's Ctrl-C or hangup reaches it
        )
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        said = ready.read().strip()  # "ready PID" once it listens, "running PID" if another was first
    word, _, pid = said.partition(" ")
    if word == "running":
        print(f"crucible warm: already running, pid {pid}")
        return 0
    if word != "ready":
        tail = log_path().read_text(errors="replace").strip().splitlines()[-1:] if log_path().exists() else []
        raise UserError(f"the warm server did not start: {tail[0] if tail else 'no output'} (log: {log_path()})")
    print(
        f"crucible warm: started, pid {pid}: {', '.join(sorted(WARM_COMMANDS))} start from it now, "
        f"and {', '.join(sorted(WARM_READS))} are answered by it"
    )
    return 0
