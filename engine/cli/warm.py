"""``crucible warm start|stop|status``, and the client side of the warm server.

A command's own start-up costs more than a golden run's containers do: importing the MCP SDK,
Hydra, the Docker SDK and DuckDB, and the flavors' modules (~1 s of CPU). ``crucible warm
start`` leaves a server behind (engine/cli/warm_server.py) holding all of it imported, the
shape of Bazel's client and server. Then ``run``, ``check``, ``build``, ``rerun`` and ``lock``
hand their command line to it (and ``query``, ``show`` and ``report``, which its reader answers:
engine/cli/warm_reader.py): it forks, and the fork runs the command as this process would,
with this process's standard streams (passed over the socket), working directory, environment,
``sys.path`` and umask. Nothing of one command reaches the next: each is a fresh fork of a
server that has only imported modules (no connection, no thread, no cache filled).

This side forwards the signals it gets (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2, SIGWINCH;
Ctrl-Z stops the fork, then this process, and ``fg`` continues both) to the fork, and ends with
its exit status, or by the signal that ended it. A signal this process ignores (``nohup``) is
ignored in the fork too. When this side dies the fork is told (its end of the socket closes)
and ends its run as a SIGTERM would: canceled, recorded.

No server, ``CRUCIBLE_WARM=off``, a server whose code is older than the files on disk (it
starts itself again once its forks are done), or one that cannot be this process (another
checkout or virtualenv, other ids, limits or hash seed): the command runs in this process, as
always. One server per (virtualenv, checkout, ``$CRUCIBLE_HOME``), behind a socket in a
directory of this user's alone, and answered only by a peer of this uid (both checked here,
before anything is sent). This module imports nothing beyond the standard library's cheapest:
it runs before every command; ``crucible warm start|stop|status`` is engine/cli/warm_commands.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import socket
import stat
import struct
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from engine.cli.main import WARM_COMMANDS, WARM_READS  # entry asks before it imports this module

FORWARDED_SIGNALS = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)
LIMITS = (
    "RLIMIT_NOFILE",
    "RLIMIT_NPROC",
    "RLIMIT_CORE",
    "RLIMIT_AS",
    "RLIMIT_DATA",
    "RLIMIT_MEMLOCK",
    "RLIMIT_FSIZE",
    "RLIMIT_CPU",
    "RLIMIT_STACK",
)
"""The resource limits a fork takes from its command's process (a server that cannot give one: cold)."""
CHECKOUT = Path(__file__).resolve().parents[2]
STARTED_WITHIN = 30.0
"""Seconds the server has to fork the command; past them it runs here (the fork, should it come,
finds this end closed and ends before it plans anything)."""
MAX_MESSAGE = 16 << 20
_HEADER = struct.Struct("!I")


def socket_path() -> Path:
    """This checkout's, this virtualenv's and this ``$CRUCIBLE_HOME``'s server socket, in a
    directory of this user's alone (a short path: sockets' are limited to 107 bytes)."""
    from engine.util.paths import home  # the standard library's os and pathlib only

    key = hashlib.sha256("\0".join((sys.prefix, str(CHECKOUT), str(home()))).encode()).hexdigest()[:20]
    runtime = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    return Path(runtime) / f"crucible-warm-{os.getuid()}" / f"{key}.sock"


def private(folder: Path) -> bool:
    """Whether ``folder`` is a real directory of this user's that no one else may enter or write
    (else another user could have put a server of theirs there, for our environment and terminal)."""
    try:
        found = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and not found.st_mode & 0o077


def send_message(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """One message: its length, then its JSON; ``fds`` travel with the first byte."""
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [_HEADER.pack(len(data))], fds)
        sock.sendall(data)
    else:
        sock.sendall(_HEADER.pack(len(data)) + data)


def recv_message(
    sock: socket.socket, max_fds: int = 0, *, within: float | None = None
) -> tuple[dict[str, Any] | None, list[int]]:
    """The next message (a JSON object of at most MAX_MESSAGE bytes) and the descriptors that
    came with it; (None, ...) at end of stream. ValueError for anything else; TimeoutError past
    ``within`` seconds for the whole message (not each read: a trickle must not last)."""
    deadline = None if within is None else time.monotonic() + within
    head, fds = b"", list[int]()
    if max_fds:
        _until(sock, deadline)
        head, fds, _, _ = socket.recv_fds(sock, _HEADER.size, max_fds)
    try:
        return _rest_of(sock, head, fds, deadline, first=not max_fds or bool(head))
    except BaseException:
        for fd in fds:  # a client's streams, never to be held past its failed request
            os.close(fd)
        raise


def _rest_of(
    sock: socket.socket, head: bytes, fds: list[int], deadline: float | None, *, first: bool
) -> tuple[dict[str, Any] | None, list[int]]:
    if not first:
        return None, fds
    head += _exactly(sock, _HEADER.size - len(head), deadline)
    if len(head) < _HEADER.size:
        return None, fds
    (length,) = _HEADER.unpack(head)
    if length > MAX_MESSAGE:
        raise ValueError(f"a message of {length} bytes")
    data = _exactly(sock, length, deadline)
    if len(data) < length:
        return None, fds
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a message that is not an object")
    return message, fds


def _until(sock: socket.socket, deadline: float | None) -> None:
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the message took too long")
        sock.settimeout(left)


def _exactly(sock: socket.socket, count: int, deadline: float | None = None) -> bytes:
    chunks, got = [], 0
    while got < count:
        _until(sock, deadline)
        chunk = sock.recv(min(count - got, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def connect(path: Path | None = None) -> socket.socket | None:
    """A connection to this user's server, or None where none listens (or where what listens
    is not in a directory of this user's alone, or not a process of this uid)."""
    path = path or socket_path()
    if not private(path.parent):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            raise OSError("a server of another uid")
    except OSError:
        sock.close()
        return None
    return sock


def forwarded(argv: list[str]) -> int | None:
    """``argv`` run by the warm server, and its exit status; None where this process is to run
    it itself (no server, not a command it takes, a standard stream closed, a server that cannot
    be this process or is stale)."""
    if len(argv) < 2 or argv[1] not in WARM_COMMANDS | WARM_READS or os.environ.get("CRUCIBLE_WARM", "") == "off":
        return None
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return None  # a closed standard stream cannot be passed on
    sock = connect()
    if sock is None:
        return None
    try:
        send_message(sock, request(argv), fds=[0, 1, 2])
        answer, _ = recv_message(sock, within=STARTED_WITHIN)
        sock.settimeout(None)
    except (OSError, ValueError):
        answer = None  # it went away, or never took the command: nothing ran
    if answer is None or answer.get("op") != "started":
        sock.close()
        return None
    return _follow(sock, int(answer["pid"]))


def request(argv: list[str]) -> dict[str, Any]:
    """Everything of this process the fork takes on, or that must match the server's."""
    umask = os.umask(0o022)
    os.umask(umask)
    return {
        "op": "run",
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "path": sys.path,
        "umask": umask,
        "stdio": [
            [getattr(s, "encoding", None), getattr(s, "errors", None)] for s in (sys.stdin, sys.stdout, sys.stderr)
        ],
        "unbuffered": bool(getattr(sys.stdout, "write_through", False)),  # python -u, PYTHONUNBUFFERED
        "ignored": [
            int(each) for each in (*FORWARDED_SIGNALS, signal.SIGTSTP) if signal.getsignal(each) == signal.SIG_IGN
        ],
        "limits": {name: resource.getrlimit(getattr(resource, name)) for name in LIMITS if hasattr(resource, name)},
        "same": same_process(),
    }


def same_process() -> dict[str, Any]:
    """What a fork cannot change to be this process: its code, interpreter and its flags, ids,
    hash seed, priority, CPUs and cgroup."""
    try:
        cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        cgroup = ""
    flags = sys.flags
    return {
        "checkout": str(CHECKOUT),
        "prefix": sys.prefix,
        "ids": [os.getuid(), os.getgid(), sorted(os.getgroups())],
        "hashseed": os.environ.get("PYTHONHASHSEED"),
        "flags": [flags.optimize, flags.dev_mode, flags.utf8_mode, flags.dont_write_bytecode, sys.warnoptions],
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "cpus": sorted(os.sched_getaffinity(0)),
        "cgroup": cgroup,
    }


def _follow(sock: socket.socket, fork: int) -> int:
    """Wait for the fork's end, passing it the signals this process gets."""

    def forward(signum: int, frame: FrameType | None) -> None:
        try:
            sock.send(bytes([signum]))
        except OSError:
            pass  # it has ended: its status is on its way

    def suspend(signum: int, frame: FrameType | None) -> None:  # Ctrl-Z: the fork stops, then this process
        forward(signal.SIGSTOP, frame)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)
        signal.signal(signal.SIGTSTP, suspend)  # continued (fg): the fork too
        try:
            os.kill(fork, signal.SIGCONT)
        except OSError:
            pass

    handled = {each: suspend if each == signal.SIGTSTP else forward for each in (*FORWARDED_SIGNALS, signal.SIGTSTP)}
    before = {each: signal.getsignal(each) for each in handled}
    for each, handler in handled.items():
        if before[each] != signal.SIG_IGN:
            signal.signal(each, handler)
    try:
        message, _ = recv_message(sock)
    except (OSError, ValueError):
        message = None
    finally:
        for each, was in before.items():
            signal.signal(each, was if was is not None else signal.SIG_DFL)
        sock.close()
    if message is None:
        print("crucible: the warm server went away before the command's end (crucible warm status)", file=sys.stderr)
        return 1
    if message.get("op") == "killed":
        signum = int(message["signal"])
        sys.stdout.flush()
        try:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)  # ended as the command itself was
        except (OSError, ValueError):
            pass  # SIGKILL's handler cannot be set, nor need be
        if signum == signal.SIGKILL:
            os.kill(os.getpid(), signal.SIGKILL)
        return 128 + signum
    return int(message.get("code", 1))


def cmd_warm(args: list[str]) -> int:
    from engine.cli.warm_commands import run_warm

    return run_warm(args)
