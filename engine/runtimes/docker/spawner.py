"""The workspace's commands without ``docker exec``: the container's own process starts them.

A ``docker exec`` costs the machine ~50 ms of CPU (dockerd, containerd, the shim, ``runc exec``
and runc's init compiling the container's seccomp filter again) and as much wall time; a
golden run made four, each more than the command it ran. So the container's entrypoint under
docker-init is the spawner (``spawner.c``, a static binary bind-mounted read-only from this
machine), and the engine holds the container's stdin and stdout (``docker attach``, made before
the start): a command is a request there and a fork in the container. What a command gets is
what ``docker exec`` gives it, the same namespaces, cgroup, capabilities and seccomp filter (the
container's, which the spawner has), a session of its own, the uid and gid asked for and no
other group, the image's environment under the one asked for; ``tests/runtimes`` holds both to the same
conformance suite. This module is the channel (the build, the attached streams, one
``Spawned`` per command); engine/runtimes/docker/spawned.py is what ``exec`` and
``open_process`` make of it.

The spawner is used where it can be: a container on this machine's engine, no terminal (a
``tty`` process is still a ``docker exec``: the terminal is Docker's), and a C compiler here
to build it once (``built``; ``make setup`` installs one). Elsewhere, and when the runtime's
``spawner`` is off, every command is a ``docker exec`` as before.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import logging
import os
import queue
import shutil
import struct
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from engine.errors import WorkspaceError
from engine.runtimes.docker.exec import DEFAULT_PATH
from engine.runtimes.docker.stream import STDOUT, Demuxer, HijackedStream

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("spawner.c")
MOUNT = "/.crucible-spawner"
"""Where the spawner's directory is bound, read-only, in the container."""
ENTRYPOINT = (f"{MOUNT}/spawner",)
FRAME = struct.Struct(">cII")
"""type, command id, payload length (spawner.c)."""
STDIN_WINDOW = 1 << 20
"""Stdin bytes sent to a command and not yet in its pipe (spawner.c's W frames): past it a write
waits, as it would on a full pipe, and the spawner never holds more of it."""
STDIN_CHUNK = 1 << 16

_build_lock = threading.Lock()
S = TypeVar("S", bound="Spawned")


@functools.cache
def built() -> Path | None:
    """The directory holding the spawner built from ``SOURCE``, or None where it cannot be built
    here (no C compiler): then every command is a ``docker exec``. Looked up once a process."""
    with _build_lock:
        return _build(hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16])


def _build(digest: str) -> Path | None:
    # The machine's cache by the source's digest, not $CRUCIBLE_HOME's: one build serves every
    # home (each test has its own).
    directory = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "crucible" / "spawner" / digest
    if (directory / "spawner").is_file():
        return directory
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        log.warning("no C compiler here: commands run as docker exec (make setup installs one)")
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("no room for the spawner (%s): commands run as docker exec", exc)
        return None
    partial = directory / f"spawner.{os.getpid()}.{threading.get_ident()}"
    done = subprocess.run(
        [compiler, "-static", "-O2", "-o", str(partial), str(SOURCE)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        log.warning("could not build the spawner (%s): commands run as docker exec", done.stderr.strip()[-300:])
        partial.unlink(missing_ok=True)
        return None
    partial.chmod(0o755)
    os.replace(partial, directory / "spawner")  # whole or not at all: others may be building it too
    return directory


def exit_code(status: int) -> int:
    """A wait status as Docker reports an exec's: the exit code, or 128 + the signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Spawned:
    """One command's side of the spawner's stream. Its events arrive on the reader thread."""

    def __init__(self, spawner: Spawner, command_id: int, loop: asyncio.AbstractEventLoop) -> None:
        self.spawner, self.id, self.loop = spawner, command_id, loop
        self.pid: asyncio.Future[int] = loop.create_future()
        self.exit: asyncio.Future[int] = loop.create_future()
        self.ended: asyncio.Future[None] = loop.create_future()
        """Both output streams ended (or the stream to the spawner was lost)."""
        self.open_streams = {b"O", b"R"}
        self._exited = False
        self.stdin_unwritten = 0
        """Stdin bytes sent and not yet in the command's pipe (``STDIN_WINDOW``)."""
        self.stdin_broken = False
        """Its stdin takes nothing more: closed by the command, or the command ended."""
        self._stdin_room = asyncio.Event()

    def output(self, kind: bytes, data: bytes) -> None:
        """``kind`` O (stdout) or R (stderr); ``data`` empty at its end. On the reader thread."""

    def event(self, kind: bytes, payload: bytes) -> None:
        if kind in (b"O", b"R"):
            self.output(kind, payload)
            if not payload:
                self.open_streams.discard(kind)
                if not self.open_streams:
                    self._settle(self.ended, None)
        elif kind == b"P" and len(payload) == 4:
            self._settle(self.pid, struct.unpack(">I", payload)[0])
        elif kind == b"E":
            why = payload.decode("utf-8", "replace")
            self._fail(self.pid, WorkspaceError(why))
            self.lost(why)
            self.spawner.forget(self.id)  # the spawner says nothing more of a command that never started
        elif kind == b"W" and len(payload) == 4:
            count = struct.unpack(">I", payload)[0]
            self._call(lambda: self._stdin_taken(count))
        elif kind == b"C":
            self._call(self._stdin_gone)
        elif kind == b"X" and len(payload) == 4:
            self._exited = True
            self._settle(self.exit, exit_code(struct.unpack(">I", payload)[0]))
            self._call(self._stdin_gone)
        if self._exited and not self.open_streams:
            self.spawner.forget(self.id)  # the spawner has let it go too: nothing more comes

    def lost(self, why: str) -> None:
        """The stream to the spawner ended (the container stopped, or the workspace closed)."""
        for kind in tuple(self.open_streams):
            self.output(kind, b"")
        self.open_streams.clear()
        error = WorkspaceError(f"the workspace's spawner is gone: {why}")
        self._fail(self.pid, error)
        self._fail(self.exit, error)
        self._settle(self.ended, None)
        self._call(self._stdin_gone)

    def _stdin_taken(self, count: int) -> None:
        self.stdin_unwritten -= count
        self._stdin_room.set()

    def _stdin_gone(self) -> None:
        self.stdin_broken = True
        self._stdin_room.set()

    def _settle(self, fut: asyncio.Future[Any], value: object) -> None:
        def settle() -> None:
            if not fut.done():
                fut.set_result(value)

        self._call(settle)

    def _fail(self, fut: asyncio.Future[Any], exc: BaseException) -> None:
        def fail() -> None:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # retrieved: an exec that never waits on it is no error to log

        self._call(fail)

    def _call(self, fn: Callable[[], object]) -> None:
        try:
            self.loop.call_soon_threadsafe(fn)
        except RuntimeError:
            pass  # the loop is closed; nobody waits any more

    # -- requests, from the event loop -----------------------------------------------------

    async def give_stdin(self, data: bytes) -> None:
        """Send ``data`` to the command's stdin, never more than ``STDIN_WINDOW`` ahead of what
        its pipe took. Raises BrokenPipeError once it takes nothing more."""
        for at in range(0, len(data), STDIN_CHUNK):
            chunk = data[at : at + STDIN_CHUNK]
            while not self.stdin_broken and self.stdin_unwritten + len(chunk) > STDIN_WINDOW:
                self._stdin_room.clear()
                await self._stdin_room.wait()
            if self.stdin_broken:
                raise BrokenPipeError(32, "the command's stdin is closed")
            self.stdin_unwritten += len(chunk)
            self.spawner.send(b"I", self.id, chunk)

    def close_stdin_now(self) -> None:
        self.spawner.send(b"I", self.id, b"")

    def signal(self, signum: int) -> None:
        self.spawner.send(b"K", self.id, struct.pack(">I", signum))

    def taken(self, count: int) -> None:
        self.spawner.send(b"A", self.id, struct.pack(">I", count))

    def forget(self) -> None:
        self.spawner.send(b"F", self.id, b"")
        self.spawner.forget(self.id)


class Spawner:
    """The engine's end of one container's spawner: its attached stdin and stdout."""

    def __init__(self, stream: HijackedStream, config: Mapping[str, Any]) -> None:
        self._stream = stream
        # What Docker puts under an exec's own env (its daemon's CreateDaemonEnvironment): a PATH,
        # the container's hostname, then the image's environment (the container's Config.Env).
        self.image_env = {"PATH": DEFAULT_PATH, "HOSTNAME": str(config.get("Hostname") or "")}
        self.image_env.update(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
        self._ids = itertools.count(1)
        self._commands: dict[int, Spawned] = {}
        self._lock = threading.Lock()
        self._lost: str | None = None
        self._sends: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read_loop, name="crucible-spawner-reader", daemon=True).start()
        threading.Thread(target=self._write_loop, name="crucible-spawner-writer", daemon=True).start()

    @classmethod
    def attach(cls, api: Any, container_id: str, config: Mapping[str, Any]) -> Spawner:
        """Attached to a created container's streams, before its start (blocking); ``config``
        its ``Config`` (its hostname and the image's environment)."""
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        return cls(HijackedStream(api.attach_socket(container_id, params=params)), config)

    def spawn(
        self,
        make: Callable[[Spawner, int, asyncio.AbstractEventLoop], S],
        argv: Sequence[str],
        *,
        user: int,
        cwd: str | None,
        env: Mapping[str, str],
        no_stdin: bool = False,
    ) -> S:
        """Ask for ``argv`` to start; ``make`` makes its ``Spawned`` (whose ``pid`` says how the
        start went). ``no_stdin``: its stdin is /dev/null, as an exec's that attaches none."""
        merged = {**self.image_env, **env}
        strings = [cwd or "", *argv, *(f"{k}={v}" for k, v in merged.items())]
        encoded = [s.encode("utf-8", "surrogateescape") for s in strings]
        if any(b"\0" in s for s in encoded):
            raise ValueError("a command's argv, cwd and env cannot hold a NUL byte")
        header = struct.pack(">IIIII", user, user, len(argv), len(merged), 1 if no_stdin else 0)
        payload = header + b"".join(s + b"\0" for s in encoded)
        with self._lock:
            command_id = next(self._ids)
            spawned = make(self, command_id, asyncio.get_running_loop())
            self._commands[command_id] = spawned
            lost = self._lost
        if lost is not None:
            spawned.lost(lost)
        else:
            self.send(b"S", command_id, payload)
        return spawned

    def send(self, kind: bytes, command_id: int, payload: bytes) -> None:
        self._sends.put(FRAME.pack(kind, command_id, len(payload)) + payload)

    def forget(self, command_id: int) -> None:
        with self._lock:
            self._commands.pop(command_id, None)

    def quit(self) -> bool:
        """Ask the spawner to exit now, the container then stopping by itself (what was left in
        it killed as it stops), so its removal does not kill it; False where its stream is gone."""
        with self._lock:
            if self._lost is not None:
                return False
        self.send(b"Q", 0, b"")
        return True

    def close(self) -> None:
        """Let go of the container's streams: every command still here ends as lost."""
        self._stream.abort()
        self._sends.put(None)

    # -- threads ---------------------------------------------------------------------------

    def _write_loop(self) -> None:
        while (frame := self._sends.get()) is not None:
            try:
                self._stream.send_all(frame)
            except OSError:
                return  # the reader sees the end too, and says so to every command

    def _read_loop(self) -> None:
        docker_frames, pending = Demuxer(), b""
        why = "the container's stream ended"
        try:
            while chunk := self._stream.recv():
                for stream_id, data in docker_frames.feed(chunk):
                    if stream_id != STDOUT:
                        continue  # the spawner writes nothing else; a stray stderr line is not a frame
                    pending = self._dispatch(pending + data)
        except (OSError, ValueError) as exc:
            why = f"the container's stream broke: {exc}"
        finally:
            self._stream.abort()  # a writer blocked in a send is released too
            with self._lock:
                self._lost = why
                commands, self._commands = list(self._commands.values()), {}
            for spawned in commands:
                spawned.lost(why)
            self._sends.put(None)
            self._stream.close()

    def _dispatch(self, data: bytes) -> bytes:
        at = 0
        while len(data) - at >= FRAME.size:
            kind, command_id, length = FRAME.unpack_from(data, at)
            end = at + FRAME.size + length
            if end > len(data):
                break
            with self._lock:
                spawned = self._commands.get(command_id)
            if spawned is not None:
                spawned.event(kind, data[at + FRAME.size : end])
            at = end
        return data[at:]
