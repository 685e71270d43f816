"""The warm server: crucible's modules imported once, a fork per command (engine/cli/warm.py).

    python -m engine.cli.warm_server SOCKET READY_FD IDLE_SECONDS CHECKOUT

It takes its lock (its pid written in it), imports every module of crucible's packages and
the ones their runs import lazily, then listens on SOCKET (in a directory of the user's alone;
a peer of another uid refused) and writes "ready PID" to READY_FD. For each command it forks;
the fork takes the client's standard streams, working directory, environment, ``sys.path``,
umask, ignored signals, resource limits and argv, and runs ``main`` as the client would have
(engine/cli/warm_fork.py). A fork stopped (Ctrl-Z) whose client dies is continued, to see its
client gone and end its run. A client this process cannot be (another checkout or virtualenv,
other ids, a limit above its own, another hash seed) is sent back to run its command itself.
This process only reaps its forks and tells each client its fork's status: it opens no
connection, starts no thread and fills no cache but two of code alone, so a fork starts clean.
``query``, ``show`` and ``report`` go to its reader instead (engine/cli/warm_reader.py): one
long-lived fork, started at the first read, that answers them one after another in its own
process and keeps DuckDB's instance between them; a read that finds it busy gets a fork.

Its code goes stale when a file it imported changes, or any file of crucible's packages or
Dockerfile.hud: it then turns commands away (their clients run them themselves), waits for its
running forks and for the tree to be quiet, and starts itself again. A file changed while it
warmed up (a checkout half written) is caught the same way: it starts again at once.
SIGTERM, ``crucible warm stop`` or IDLE_SECONDS without a command: it stops listening, waits
for its running forks, exits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import gc
import importlib
import os
import pkgutil
import resource
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.cli.warm import CHECKOUT, recv_message, same_process, send_message
from engine.cli.warm_fork import become
from engine.cli.warm_reader import ReaderSlot
from engine.cli.warm_tree import PACKAGES, code_snapshot, drifted, tree_snapshot, until_quiet, what_changed

LAZY = (
    # what a run imports when it first serves or calls its tools, beyond crucible's packages
    "anyio._backends._asyncio",
    "anyio.streams.stapled",
    "anyio.streams.tls",
    "asyncssh",
    "concurrent.futures.thread",
    "h11",
    "httpcore",
    "netrc",
    "uvicorn.lifespan.off",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.http.h11_impl",
)
REQUEST_WITHIN = 5.0
"""Seconds a connected client has to send its whole request (it has it in memory): one that
does not must not hold the server, nor every other command waiting behind it."""


def warm_up() -> None:
    """Import what commands import, and make the two caches of code alone; nothing here
    connects, or reads what a command may change (config files, the store)."""
    import warnings

    from engine.config.schema import structured
    from engine.util.codehash import engine_version

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a dependency's import-time deprecation is each command's to show
        for package in PACKAGES:
            root = importlib.import_module(package)
            for info in pkgutil.walk_packages(root.__path__, f"{package}."):
                if info.name.endswith("__main__"):
                    continue
                with contextlib.suppress(Exception):  # the command that needs it meets the same error
                    importlib.import_module(info.name)
        for name in LAZY:
            with contextlib.suppress(Exception):
                importlib.import_module(name)
    engine_version()  # the code's hash (~0.05 s a command): every file it reads is in the snapshot
    for schema in _schemas():  # each made once per process (engine.config.schema.structured): ~0.02 s
        with contextlib.suppress(Exception):
            structured(schema)
    for thread in threading.enumerate():  # a module that loads in a thread (engine.capabilities.preload)
        if thread is not threading.main_thread():
            thread.join()
    # What is imported now lives as long as the server: out of the collector's sight, a fork's
    # collections neither walk it (CPU) nor write to its every page (copy-on-write).
    gc.collect()
    gc.freeze()


def _schemas() -> set[type]:
    """The dataclasses configs are typed through: the root's, and each plug-in class's."""
    from engine.config.schema import CrucibleConfig

    found: set[type] = {CrucibleConfig}
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] not in PACKAGES:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type):
                for attribute in ("config_schema", "task_schema", "integrity_schema"):
                    schema = getattr(value, attribute, None)
                    if isinstance(schema, type) and dataclasses.is_dataclass(schema):
                        found.add(schema)
    return found


class Server:
    def __init__(self, listener: socket.socket, lock: int, path: Path, snapshot: dict[str, int], idle: float) -> None:
        self.listener, self.lock, self.path, self.snapshot, self.idle = listener, lock, path, snapshot, idle
        self.forks: dict[int, socket.socket] = {}
        self.watching: dict[int, int] = {}
        """A fork's pid -> a pidfd of its client's process: a client that dies while its fork is
        stopped (Ctrl-Z, then kill -9) gets its fork continued, to see it gone and end its run."""
        self.accepting, self.restart = True, False
        self.reader = ReaderSlot()
        self.served, self.since, self.active = 0, time.time(), time.monotonic()
        self.stale: str | None = None
        self.same = same_process()
        self.selector = selectors.DefaultSelector()
        self.wakeup_r, self.wakeup_w = os.pipe()
        os.set_blocking(self.wakeup_w, False)
        os.set_blocking(self.wakeup_r, False)

    def serve(self) -> None:
        signal.set_wakeup_fd(self.wakeup_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears it
        signal.signal(signal.SIGTERM, lambda *_: self.stop_listening(restart=False))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wakeup_r, selectors.EVENT_READ, "signal")
        while self.accepting or self.forks:
            idle_left = None if self.forks else max(0.0, self.idle - (time.monotonic() - self.active))
            events = self.selector.select(idle_left)
            for key, _ in events:
                if key.data == "signal":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wakeup_r, 4096)
                elif key.data == "reader":
                    if self.reader.said():
                        self.active = time.monotonic()
                        self.unwatch(self.reader.pid or 0)
                    else:
                        self.reader_gone()
                elif isinstance(key.data, int):  # a fork's client has died
                    self.unwatch(key.data)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(key.data, signal.SIGCONT)
                elif self.accepting:
                    with contextlib.suppress(OSError):
                        conn, _ = self.listener.accept()
                        self.take(conn)
            self.reap()
            if not events and not self.forks and time.monotonic() - self.active >= self.idle:
                print(f"crucible warm: idle for {self.idle:g} s: stopping", flush=True)
                self.stop_listening(restart=False)

    def stop_listening(self, *, restart: bool) -> None:
        self.restart = restart
        if self.accepting:
            self.accepting = False
            self.selector.unregister(self.listener)
            self.listener.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            self.reader_gone()  # it ends its command, if any, then sees its socket closed

    def reap(self) -> None:
        while self.forks or self.reader.pid is not None:  # the reader is a child too
            try:
                pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if os.WIFSTOPPED(status):
                if pid in self.forks and pid not in self.watching:  # its client is gone: none will continue it
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
                continue
            if pid == self.reader.pid:
                how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
                print(f"crucible warm: reader {pid} ended ({how})", flush=True)
                self.reader_gone()
                continue
            conn = self.forks.pop(pid, None)
            if conn is None:
                continue
            self.unwatch(pid)
            self.active = time.monotonic()
            if os.WIFSIGNALED(status):
                print(f"crucible warm: fork {pid} ended by signal {os.WTERMSIG(status)}", flush=True)
            ended = (
                {"op": "killed", "signal": os.WTERMSIG(status)}
                if os.WIFSIGNALED(status)
                else {"op": "exit", "code": os.waitstatus_to_exitcode(status)}
            )
            with contextlib.suppress(OSError):
                send_message(conn, ended)
            conn.close()

    def watch(self, fork: int, client: int) -> None:
        try:
            pidfd = os.pidfd_open(client)
        except OSError:
            return  # gone already (its fork sees the socket closed), or a kernel without pidfds
        self.watching[fork] = pidfd
        self.selector.register(pidfd, selectors.EVENT_READ, fork)

    def unwatch(self, fork: int) -> None:
        pidfd = self.watching.pop(fork, None)
        if pidfd is not None:
            self.selector.unregister(pidfd)
            os.close(pidfd)

    def take(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            client, uid, _ = struct.unpack("3i", creds)
            if uid != os.getuid():
                return  # another user's process: the directory's mode should have kept it out
            request, fds = recv_message(conn, max_fds=3, within=REQUEST_WITHIN)
            conn.settimeout(None)
            if request is None:
                return
            answer = self.answer(request, conn, fds)
            if answer is not None and answer["op"] in ("started", "reading"):
                # stopped with its client (Ctrl-Z) that then dies: continued
                self.watch(answer["pid"], client)
            if answer is not None and answer["op"] != "reading":  # the reader answers its client itself
                send_message(conn, answer)
        except Exception as exc:  # noqa: BLE001 (one client's garbage, never the server's end)
            print(f"crucible warm: a request refused: {type(exc).__name__}: {exc}", flush=True)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if conn not in self.forks.values():
                conn.close()

    def answer(self, request: dict[str, Any], conn: socket.socket, fds: list[int]) -> dict[str, Any] | None:
        op = request.get("op")
        if op in ("ping", "run"):
            self.stale = self.stale or what_changed(self.snapshot)
            if self.stale:
                self.stop_listening(restart=True)
        if op == "ping":
            return {
                "op": "pong",
                "pid": os.getpid(),
                "since": self.since,
                "served": self.served,
                "running": len(self.forks),
                "stale": self.stale,
                "reader": self.reader.pid,
                "reads": self.reader.reads,
                "reading": self.reader.reading,
            }
        if op == "stop":
            self.stop_listening(restart=False)
            return {"op": "stopping", "pid": os.getpid(), "running": len(self.forks)}
        if op != "run" or len(fds) != 3:
            return {"op": "refused", "why": f"not a request: {op!r}"}
        why = self.stale or self.cannot_be(request)
        if why:
            return {"op": "refused", "why": why}
        if self.to_reader(request, conn, fds):
            return {"op": "reading", "pid": self.reader.pid}
        for stream in (sys.stdout, sys.stderr):  # nothing of the server's log may reach the client's
            stream.flush()
        pid = os.fork()
        if pid == 0:
            try:
                self.become_command(request, conn, fds)
            finally:
                os._exit(1)  # become_command leaves by os._exit: this is for what it could not catch
        self.forks[pid] = conn
        self.served += 1
        self.active = time.monotonic()
        return {"op": "started", "pid": pid}

    def cannot_be(self, request: dict[str, Any]) -> str | None:
        """Why a fork of this process cannot be the client's process, if it cannot."""
        if threading.active_count() > 1:
            return "a thread is running in the server"
        same = request.get("same") or {}
        for key, mine in self.same.items():
            if same.get(key) != mine:
                return f"the client's {key} is not the server's"
        for name, (soft, hard) in (request.get("limits") or {}).items():
            if name in ("RLIMIT_AS", "RLIMIT_DATA") and soft != resource.RLIM_INFINITY:
                return "the client's address space is limited: a fork of the server is bigger than it"
            _, my_hard = resource.getrlimit(getattr(resource, name))
            if my_hard != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > my_hard):
                return f"the client's {name} is above the server's"
        return None

    def become_command(self, request: dict[str, Any], conn: socket.socket, fds: list[int]) -> None:
        """In the fork: everything of the server's closed, then the client's command (never returns)."""
        self.close_in_fork()
        become(request, conn, fds, closing=self.raw_fds())

    def close_in_fork(self, conn: socket.socket | None = None, fds: Sequence[int] = ()) -> None:
        """In a fork: the server's sockets closed (and, in the reader's, the request it was
        started for: a client's pipe held open there would never reach its end). Its raw
        descriptors (``raw_fds``) the fork closes itself, once its signals are its own."""
        self.selector.close()
        if self.accepting:
            self.listener.close()
        for other in self.forks.values():
            other.close()
        if self.reader.sock is not None:
            self.reader.sock.close()
        if conn is not None:
            conn.close()
        for fd in fds:
            os.close(fd)

    def raw_fds(self) -> list[int]:
        """The signal wake-up pipe, the lock and the clients' pidfds."""
        return [self.wakeup_r, self.wakeup_w, self.lock, *self.watching.values()]

    # -- the reader: query, show and report in one long-lived fork (engine/cli/warm_reader.py) --

    def to_reader(self, request: dict[str, Any], conn: socket.socket, fds: list[int]) -> bool:
        """Hand a read to the reader (started for it, if need be), or say it cannot take it."""
        if not self.accepting or not self.reader.takes(request):
            return False
        if self.reader.pid is None:  # its fork must keep none of this request's descriptors
            started = self.reader.start(lambda: self.close_in_fork(conn, fds), closing=self.raw_fds())
            self.selector.register(started, selectors.EVENT_READ, "reader")
        try:
            self.reader.hand(request, conn, fds)
        except OSError:
            self.reader_gone()
            raise
        self.served += 1
        self.active = time.monotonic()
        return True

    def reader_gone(self) -> None:
        """Its socket closed (it ends once its command, if any, has): the next read starts another."""
        pid, sock = self.reader.pid, self.reader.gone()
        if pid is not None:
            self.unwatch(pid)
        if sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(sock)
            sock.close()


def take_lock(path: Path) -> int | None:
    """The lock that says this process is SOCKET's server, its pid written in it; None where
    another holds it (its pid is in the file)."""
    lock = os.open(path.with_suffix(".lock"), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        return None
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())
    return lock


def listen(path: Path) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead server's: the lock was free
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(64)
    return listener


RESTARTS = "CRUCIBLE_WARM_RESTARTS"
"""How many times in a row this server found its code drifting while it warmed up: past
MAX_RESTARTS it serves anyway (a tree someone keeps writing must not keep it warming up)."""
MAX_RESTARTS = 5


def main() -> int:
    path, ready, idle, checkout = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4])

    def say(line: str) -> None:
        print(f"crucible warm: {line}", flush=True)
        if ready >= 0:
            os.write(ready, f"{line}\n".encode())

    if checkout != CHECKOUT:
        say(f"failed: this server's code is {CHECKOUT}, not {checkout}")
        return 1
    lock = take_lock(path)
    if lock is None:
        say(f"running {path.with_suffix('.lock').read_text().strip()}")
        return 0
    began, wall = time.monotonic(), time.time()
    before = tree_snapshot(folders=False)
    warm_up()
    snapshot = code_snapshot()
    changed = drifted(before, snapshot, wall)
    restarts = int(os.environ.get(RESTARTS, "0"))
    if changed is not None and restarts >= MAX_RESTARTS:
        print(f"crucible warm: {changed}, but serving after {restarts} restarts", flush=True)
        changed = None
    restart = changed is not None
    os.environ[RESTARTS] = str(restarts + 1 if restart else 0)
    if not restart:
        server = Server(listen(path), lock, path, snapshot, idle)
        say(f"ready {os.getpid()}")
        print(f"crucible warm: warmed up in {time.monotonic() - began:.2f} s on {path}", flush=True)
        if ready >= 0:
            os.close(ready)
            ready = -1  # its number may be another file's by the time this process starts again
        server.serve()
        restart, changed = server.restart, server.stale
    if restart:
        stopped = []  # `crucible warm stop` (SIGTERM) while it waits: it stops instead
        signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
        print(f"crucible warm: {changed}: starting again once the tree is quiet", flush=True)
        until_quiet()
        if not stopped:  # the lock is held until the exec (it is closed on exec), pid and all
            os.execv(
                sys.executable,
                [sys.executable, "-m", "engine.cli.warm_server", str(path), str(ready), str(idle), str(checkout)],
            )
    os.close(lock)
    if ready >= 0:
        say("failed: stopped while starting again")
    else:
        print("crucible warm: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
