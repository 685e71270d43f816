"""``crucible warm start|stop|status``, and the client side of the warm server.

A command's own start-up costs more than a golden run's containers do: importing the MCP SDK,
Hydra, the Docker SDK and DuckDB, and the flavors' modules (~1 s of CPU). ``crucible warm
start`` leaves a server behind (engine/cli/warm_server.py) holding all of it imported, the
shape of Bazel's client and server. Then ``run``, ``check``, ``build``, ``rerun`` and ``lock``
hand their command line to it: it forks, and the fork runs the command as this process would,
with this process's standard streams (passed over the socket), working directory, environment,
``sys.path`` and umask. Nothing of one command reaches the next: each is a fresh fork of a
server that has only imported modules (no connection, no thread, no cache filled).

This side forwards the signals it gets (Ctrl-C, SIGTERM, SIGHUP, SIGUSR1/2) to the fork, and
ends with its exit status, or by the signal that ended it. When this side dies the fork is
told (its end of the socket closes) and ends its run as a SIGTERM would: canceled, recorded.

No server, ``CRUCIBLE_WARM=off``, or a server whose code is older than the files on disk
(it starts itself again once its forks are done): the command runs in this process, as
always. One server per (virtualenv, checkout, ``$CRUCIBLE_HOME``), behind a socket only this
user can reach. This module imports nothing beyond the standard library's cheapest: it runs
before every command.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import struct
import sys
from pathlib import Path
from types import FrameType
from typing import Any

WARM_COMMANDS = frozenset({"run", "check", "build", "rerun", "lock"})
"""The commands that compose and plan (the ones whose start-up the server saves); the read
commands start in ~0.08 s of their own and never touch it."""

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
CHECKOUT = Path(__file__).resolve().parents[2]
_HEADER = struct.Struct("!I")


def socket_path() -> Path:
    """This checkout's, this virtualenv's and this ``$CRUCIBLE_HOME``'s server socket, in a
    directory of this user's alone (a short path: sockets' are limited to 107 bytes)."""
    home = Path(os.environ.get("CRUCIBLE_HOME", "~/.crucible")).expanduser().resolve()
    key = hashlib.sha256("\0".join((sys.prefix, str(CHECKOUT), str(home))).encode()).hexdigest()[:20]
    runtime = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    return Path(runtime) / f"crucible-warm-{os.getuid()}" / f"{key}.sock"


def send_message(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """One message: its length, then its JSON; ``fds`` travel with the first byte."""
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [_HEADER.pack(len(data))], fds)
        sock.sendall(data)
    else:
        sock.sendall(_HEADER.pack(len(data)) + data)


def recv_message(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """The next message and the descriptors that came with it; (None, []) at end of stream."""
    head, fds = b"", list[int]()
    if max_fds:
        head, fds, _, _ = socket.recv_fds(sock, _HEADER.size, max_fds)
        if not head:
            return None, fds
    head += _exactly(sock, _HEADER.size - len(head))
    if len(head) < _HEADER.size:
        return None, fds
    (length,) = _HEADER.unpack(head)
    data = _exactly(sock, length)
    if len(data) < length:
        return None, fds
    return json.loads(data), fds


def _exactly(sock: socket.socket, count: int) -> bytes:
    chunks, got = [], 0
    while got < count:
        chunk = sock.recv(count - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def connect(path: Path | None = None) -> socket.socket | None:
    """A connection to the server, or None where none listens."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path or socket_path()))
    except OSError:
        sock.close()
        return None
    return sock


def forwarded(argv: list[str]) -> int | None:
    """``argv`` run by the warm server, and its exit status; None where this process is to run
    it itself (no server, not a command it takes, a standard stream closed, a stale server)."""
    if len(argv) < 2 or argv[1] not in WARM_COMMANDS or os.environ.get("CRUCIBLE_WARM", "") == "off":
        return None
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return None  # a closed standard stream cannot be passed on
    sock = connect()
    if sock is None:
        return None
    umask = os.umask(0o022)
    os.umask(umask)
    request = {
        "op": "run",
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "path": sys.path,
        "umask": umask,
        "stdio": [_encoding(stream) for stream in (sys.stdin, sys.stdout, sys.stderr)],
    }
    try:
        send_message(sock, request, fds=[0, 1, 2])
        answer, _ = recv_message(sock)
    except OSError:
        answer = None  # it went away before taking the command: nothing ran
    if answer is None or answer.get("op") != "started":
        sock.close()
        return None
    return _follow(sock)


def _encoding(stream: Any) -> list[str | None]:
    return [getattr(stream, "encoding", None), getattr(stream, "errors", None)]


def _follow(sock: socket.socket) -> int:
    """Wait for the fork's end, passing it the signals this process gets."""

    def forward(signum: int, frame: FrameType | None) -> None:
        try:
            sock.send(bytes([signum]))
        except OSError:
            pass  # it has ended: its status is on its way

    for each in FORWARDED_SIGNALS:
        signal.signal(each, forward)
    try:
        message, _ = recv_message(sock)
    except OSError:
        message = None
    finally:
        for each in FORWARDED_SIGNALS:
            signal.signal(each, signal.SIG_DFL if each != signal.SIGINT else signal.default_int_handler)
        sock.close()
    if message is None:
        print(
            "crucible: the warm server went away before the command's end (its log: crucible warm status)",
            file=sys.stderr,
        )
        return 1
    if message.get("op") == "killed":
        signum = int(message["signal"])
        sys.stdout.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # ended as the command itself was
        return 128 + signum
    return int(message.get("code", 1))


# ---------------------------------------------------------------- crucible warm start|stop|status
def cmd_warm(args: list[str]) -> int:
    from engine.cli.args import one_line_parser

    parser = one_line_parser("warm", "a server that starts run, check, build, rerun and lock with everything imported")
    parser.add_argument("action", choices=["start", "stop", "status"])
    action = parser.parse_args(args).action
    return {"start": _start, "stop": _stop, "status": _status}[action]()


def log_path() -> Path:
    return socket_path().with_suffix(".log")


def _ask(op: str) -> dict[str, Any] | None:
    sock = connect()
    if sock is None:
        return None
    with sock:
        try:
            send_message(sock, {"op": op})
            return recv_message(sock)[0]
        except OSError:
            return None


def _status() -> int:
    answer = _ask("ping")
    if answer is None:
        print("crucible warm: not running (crucible warm start)")
        return 1
    stale = f"; stale, starting again: {answer['stale']}" if answer.get("stale") else ""
    print(
        f"crucible warm: running, pid {answer['pid']}, {answer['served']} command(s) served, "
        f"{answer['running']} running now{stale}; log {log_path()}"
    )
    return 0


def _stop() -> int:
    answer = _ask("stop")
    if answer is None:
        print("crucible warm: not running")
        return 0
    running = f" once its {answer['running']} running command(s) end" if answer["running"] else ""
    print(f"crucible warm: stopped (pid {answer['pid']}); it exits{running}")
    return 0


def _start() -> int:
    import subprocess

    from engine.errors import UserError

    answer = _ask("ping")
    if answer is not None:
        print(f"crucible warm: already running, pid {answer['pid']}")
        return 0
    path = socket_path()
    path.parent.mkdir(mode=0o700, exist_ok=True)
    owner = path.parent.lstat()
    if owner.st_uid != os.getuid() or owner.st_mode & 0o077 or path.parent.is_symlink():
        raise UserError(f"{path.parent} must be a directory of this user's alone (mode 0700) to hold the warm socket")
    read_end, write_end = os.pipe()
    with open(log_path(), "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "engine.cli.warm_server", str(path), str(write_end)],
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(write_end,),
            start_new_session=True,  # no terminal's Ctrl-C or hangup reaches it
        )
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        said = ready.read().strip()  # its pid once it listens; nothing if it failed
    if not said.isdigit():
        tail = log_path().read_text(errors="replace").strip().splitlines()[-1:] if log_path().exists() else []
        raise UserError(f"the warm server did not start: {tail[0] if tail else 'no output'} (log: {log_path()})")
    print(f"crucible warm: started, pid {said}: {', '.join(sorted(WARM_COMMANDS))} start from it now")
    return 0
