"""The warm server: crucible's modules imported once, a fork per command (engine/cli/warm.py).

    python -m engine.cli.warm_server SOCKET READY_FD

It imports every module of crucible's packages and the ones their runs import lazily, then
listens on SOCKET (its directory the user's alone, and a peer of another uid refused) and
writes its pid to READY_FD. For each command it forks; the fork takes the client's standard
streams, working directory, environment, ``sys.path``, umask and argv and runs ``main`` as
the client would have (engine.cli.main.leave). This process only reaps its forks and tells
each client its fork's exit status: it opens no connection, starts no thread and fills no
cache, so a fork starts clean (fork with threads about would be unsafe; it refuses to).

Its code goes stale when a file it imported changes, or a file appears in crucible's packages:
it then turns commands away (their clients run them themselves), waits for its running forks
and starts itself again. SIGTERM or ``crucible warm stop``: it stops listening, waits for its
running forks, exits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import importlib
import io
import os
import pkgutil
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from engine.cli.warm import CHECKOUT, recv_message, send_message

PACKAGES = ("engine", "envs", "swe_tasks")
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
REQUEST_TIMEOUT = 10.0
"""Seconds a connected client has to send its request (a stuck one must not hold the server)."""


def warm_up() -> None:
    """Import what commands import, and no more: nothing here connects or caches."""
    import warnings

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
    from engine.config.schema import structured
    from engine.util.codehash import engine_version

    engine_version()  # the code's hash (~0.05 s): its every file is in the snapshot, so it stays true
    for schema in _schemas():  # each made once per process (engine.config.schema.structured): ~0.02 s a command
        with contextlib.suppress(Exception):
            structured(schema)
    for thread in threading.enumerate():  # a module that loads in a thread (engine.capabilities.preload)
        if thread is not threading.main_thread():
            thread.join()


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


def code_snapshot() -> dict[str, int]:
    """By mtime: each imported module's file, and every file and directory of crucible's
    packages with the image definition (what ``engine_version`` hashes, and a new module)."""
    from engine.util.codehash import DOCKERFILE

    seen: dict[str, int] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path:
            with contextlib.suppress(OSError):
                seen[path] = os.stat(path).st_mtime_ns
    seen[str(DOCKERFILE)] = os.stat(DOCKERFILE).st_mtime_ns
    for package in PACKAGES:
        for folder, _, files in os.walk(CHECKOUT / package):
            if folder.endswith("__pycache__"):
                continue
            seen[folder] = os.stat(folder).st_mtime_ns
            for name in files:
                with contextlib.suppress(OSError):
                    seen[os.path.join(folder, name)] = os.stat(os.path.join(folder, name)).st_mtime_ns
    return seen


def what_changed(snapshot: dict[str, int]) -> str | None:
    for path, mtime in snapshot.items():
        try:
            now = os.stat(path).st_mtime_ns
        except OSError:
            return f"{path} is gone"
        if now != mtime:
            return f"{path} changed"
    return None


class Server:
    def __init__(self, listener: socket.socket, lock: int, path: Path, snapshot: dict[str, int]) -> None:
        self.listener, self.lock, self.path, self.snapshot = listener, lock, path, snapshot
        self.forks: dict[int, socket.socket] = {}
        self.accepting, self.restart = True, False
        self.served, self.since = 0, time.time()
        self.stale: str | None = None
        self.selector = selectors.DefaultSelector()
        self.wakeup_r, self.wakeup_w = os.pipe()
        os.set_blocking(self.wakeup_w, False)
        os.set_blocking(self.wakeup_r, False)

    def serve(self) -> None:
        signal.set_wakeup_fd(self.wakeup_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears it
        signal.signal(signal.SIGTERM, lambda *_: self.stop_listening())
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wakeup_r, selectors.EVENT_READ, "signal")
        while self.accepting or self.forks:
            for key, _ in self.selector.select():
                if key.data == "signal":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wakeup_r, 4096)
                elif self.accepting:
                    with contextlib.suppress(OSError):
                        conn, _ = self.listener.accept()
                        self.take(conn)
            self.reap()

    def stop_listening(self) -> None:
        if self.accepting:
            self.accepting = False
            self.selector.unregister(self.listener)
            self.listener.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def reap(self) -> None:
        while self.forks:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.forks.pop(pid, None)
            if conn is None:
                continue
            ended = (
                {"op": "killed", "signal": os.WTERMSIG(status)}
                if os.WIFSIGNALED(status)
                else {"op": "exit", "code": os.waitstatus_to_exitcode(status)}
            )
            with contextlib.suppress(OSError):
                send_message(conn, ended)
            conn.close()

    def take(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            if int.from_bytes(creds[4:8], sys.byteorder) != os.getuid():
                return  # another user's process: the directory's mode should have kept it out
            conn.settimeout(REQUEST_TIMEOUT)
            request, fds = recv_message(conn, max_fds=3)
            conn.settimeout(None)
            if request is None:
                return
            answer = self.answer(request, conn, fds)
            if answer is not None:
                send_message(conn, answer)
        except (OSError, ValueError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
            if conn not in self.forks.values():
                conn.close()

    def answer(self, request: dict[str, Any], conn: socket.socket, fds: list[int]) -> dict[str, Any] | None:
        op = request.get("op")
        if op == "ping":
            self.stale = self.stale or what_changed(self.snapshot)
            if self.stale:
                self.restart = True
                self.stop_listening()
            return {
                "op": "pong",
                "pid": os.getpid(),
                "since": self.since,
                "served": self.served,
                "running": len(self.forks),
                "stale": self.stale,
            }
        if op == "stop":
            self.stop_listening()
            return {"op": "stopping", "pid": os.getpid(), "running": len(self.forks)}
        if op != "run" or len(fds) != 3:
            return {"op": "refused", "why": f"not a request: {op!r}"}
        self.stale = self.stale or what_changed(self.snapshot)
        if self.stale:
            self.restart = True
            self.stop_listening()
            return {"op": "stale", "why": self.stale}
        if threading.active_count() > 1:
            return {"op": "refused", "why": "a thread is running in the server"}
        for stream in (sys.stdout, sys.stderr):  # nothing of the server's log may reach the client's
            stream.flush()
        pid = os.fork()
        if pid == 0:
            self.become_command(request, conn, fds)  # never returns
        self.forks[pid] = conn
        self.served += 1
        return {"op": "started", "pid": pid}

    def become_command(self, request: dict[str, Any], conn: socket.socket, fds: list[int]) -> None:
        """In the fork: the client's process, as far as the command can tell, then its main."""
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.selector.close()
            for fd in (self.wakeup_r, self.wakeup_w, self.lock):  # the lock is the server's alone
                os.close(fd)
            if self.accepting:
                self.listener.close()
            for other in self.forks.values():
                other.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            fds.clear()
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            os.umask(int(request["umask"]))
            sys.path[:] = request["path"]
            sys.argv = list(request["argv"])
            _standard_streams(request["stdio"])
            threading.Thread(target=_watch_client, args=(conn,), name="crucible-warm-client", daemon=True).start()
            from engine.cli.main import leave, main

            code = main(sys.argv[1:])
        except BaseException:  # noqa: BLE001 (as an interpreter would: the traceback, exit 1)
            traceback.print_exc()
        finally:
            from engine.cli.main import leave

            leave(code)


def _standard_streams(encodings: list[list[str | None]]) -> None:
    """sys.stdin/stdout/stderr over the client's descriptors, buffered as Python would have
    buffered them in the client (a terminal line by line, stderr always)."""
    streams = []
    for fd, (encoding, errors) in enumerate(encodings):
        buffer: Any
        if fd == 0:
            buffer = io.BufferedReader(io.FileIO(0, "r", closefd=False))
        else:
            buffer = io.BufferedWriter(io.FileIO(fd, "w", closefd=False))
        streams.append(
            io.TextIOWrapper(
                buffer,
                encoding=encoding or "utf-8",
                errors=errors or "strict",
                line_buffering=fd == 2 or (fd == 1 and os.isatty(1)),
            )
        )
    for name, stream in zip(("stdin", "stdout", "stderr"), streams):
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _watch_client(conn: socket.socket) -> None:
    """A byte from the client is a signal it got; its end closing (it died) is SIGTERM: the
    run ends canceled and recorded, as it would have in the client's own process."""
    while True:
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if not data:
            os.kill(os.getpid(), signal.SIGTERM)
            return
        for signum in data:
            os.kill(os.getpid(), signum)


def listen(path: Path) -> tuple[socket.socket, int] | None:
    """The socket, bound, and the lock that says this server owns it (None: another does)."""
    lock = os.open(path.with_suffix(".lock"), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        return None
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead server's: the lock was free
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(64)
    return listener, lock


def main() -> int:
    path, ready = Path(sys.argv[1]), int(sys.argv[2])
    began = time.monotonic()
    warm_up()
    snapshot = code_snapshot()
    bound = listen(path)
    if bound is None:
        print(f"crucible warm: already running for {path}", flush=True)
        return 1
    listener, lock = bound
    print(f"crucible warm: pid {os.getpid()} ready in {time.monotonic() - began:.2f} s on {path}", flush=True)
    if ready >= 0:
        os.write(ready, f"{os.getpid()}\n".encode())
        os.close(ready)
    server = Server(listener, lock, path, snapshot)
    server.serve()
    os.close(lock)
    if server.restart:
        print(f"crucible warm: {server.stale}: starting again", flush=True)
        os.execv(sys.executable, [sys.executable, "-m", "engine.cli.warm_server", str(path), "-1"])
    print("crucible warm: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
