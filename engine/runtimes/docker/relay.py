"""The run's bridge over the exec channel, for a workspace whose Docker engine cannot see this host.

Locally the bridge (a host directory of unix sockets and small files: the run's MCP server,
the model proxy, a flavor's relays) is bind-mounted read-only at ``BRIDGE_PATH``. A remote
engine cannot mount a directory of this host, so there the workspace gets instead:

- a Docker volume, labelled with the run's owner, mounted read-only at ``BRIDGE_PATH`` in the
  workspace and read-write in a small sidecar container on the same engine (crucible's base
  image: its perl-base is all the relay needs; nothing of the task image is relied on, and
  the workspace still has no network);
- ``relay.pl`` in the sidecar: it listens on each socket name the host's bridge holds and
  carries every accepted connection over ONE ``docker exec`` stdio stream (``DockerProcess``),
  framed as type (1 byte), connection id (4), length (4), payload;
- here, ``BridgeRelay``: each connection the sidecar opens is connected to the socket of the
  same name in the host's bridge; plain files are copied over the same stream.

What appears in the host's bridge later (the MCP server starts after the workspace) is
mirrored on two signals: inotify on the directory (a poll where there is none), and a sync
before every command the workspace starts, so whatever the host made before a command is
there for it (``sync``: one round trip, only when the directory changed).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import re
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, InfrastructureError, WorkspaceError
from engine.interfaces import BRIDGE_PATH, ROOT_UID
from engine.runtimes.docker.exec import sdk_call
from engine.runtimes.docker.process import DockerProcess
from engine.runtimes.docker.reaper import being_removed
from engine.util.aio import finish_even_if_cancelled, within

log = logging.getLogger(__name__)

RELAY_SCRIPT = Path(__file__).with_name("relay.pl")
FRAME = struct.Struct(">cII")
"""type, connection id, payload length (relay.pl's ``pack('a1 N N')``)."""
CHUNK = 65536
WINDOW = 1 << 20
"""Bytes of one connection in flight, each way, before its sender waits for the receiver's ``A``
(acknowledged: written to the far socket), so one client that stops reading neither stalls the
others nor fills memory (relay.pl's ``$WINDOW`` is the same)."""
SYNC_TIMEOUT = 120.0
"""Seconds a sync waits for the relay's answer before the relay counts as lost (a remote host
cut off without the stream ever ending)."""
POLL_EVERY = 1.0
"""Seconds between scans of the bridge where inotify is missing (not Linux)."""
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
"""Names relay.pl mirrors (it checks them too); a leading dot is its own temporary files."""
_IN_EVENTS = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200
"""IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE."""


@dataclass
class _Conn:
    """One client of a socket in the workspace, connected here to the host's socket."""

    to_host: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    """What the client sent, for the host's socket: data, b"" for its EOF, None to abort."""
    task: asyncio.Task[None] | None = None
    unacked: int = 0
    """Bytes sent to the relay for the client that it has not yet written to it."""
    room: asyncio.Event = field(default_factory=asyncio.Event)


class BridgeRelay:
    """The sidecar, its volume and the exec stream between them and the host's bridge."""

    def __init__(
        self,
        client: Any,
        bridge_dir: str,
        *,
        name: str,
        labels: dict[str, str],
        image: str = "",
        host: str | None = None,
        phase: str = "agent",
    ) -> None:
        self.client = client  # docker.DockerClient of the workspace's engine
        self.bridge_dir = bridge_dir
        self.volume = f"{name}-bridge"
        self.sidecar = f"{name}-bridge"
        self.labels = labels
        self.image = image or relay_image()
        self.host, self.phase = host, phase  # for the InfrastructureError of a relay lost mid-run
        self.process: DockerProcess | None = None
        self._volume_made = self._sidecar_made = False
        self._mirrored: dict[str, tuple[int, ...]] = {}
        self._sync_lock = asyncio.Lock()
        self._acks: dict[int, asyncio.Future[None]] = {}
        self._next_ack = 0
        self._conns: dict[int, _Conn] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._changed = asyncio.Event()
        self._ended: WorkspaceError | InfrastructureError | None = None
        self._stderr = b""
        self._watch_fd: int | None = None

    def mount(self) -> dict[str, dict[str, str]]:
        """The workspace's view: the volume, read-only (``nocopy``: an image's own directory
        at ``BRIDGE_PATH`` is not copied into it)."""
        return {self.volume: {"bind": BRIDGE_PATH, "mode": "ro,nocopy"}}

    def prepare(self, bring_image: Callable[[str], None] | None) -> None:
        """Blocking, before the workspace's container is created (Docker would make an
        unlabelled volume of the name otherwise): the sidecar's image brought to the engine
        (``bring_image``: a listed host's, from this machine's engine), the volume made."""
        if bring_image is not None:
            bring_image(self.image)
        self._volume_made = True
        self.client.volumes.create(name=self.volume, labels=self.labels)

    # -- start -----------------------------------------------------------------------------

    async def start(self) -> None:
        """The sidecar, the relay in it, the watch on the host's bridge, and a first sync."""
        await finish_even_if_cancelled(sdk_call("create (bridge sidecar)", self._create_sidecar))
        script = RELAY_SCRIPT.read_text()
        self.process = await DockerProcess.start(
            self.client.api,
            self.sidecar,
            ["perl", "-e", script, BRIDGE_PATH],
            user=ROOT_UID,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            separate_stderr=True,
        )
        self._tasks = [
            asyncio.create_task(self._read_frames(), name=f"{self.sidecar}-frames"),
            asyncio.create_task(self._read_stderr(), name=f"{self.sidecar}-stderr"),
            asyncio.create_task(self._sync_on_change(), name=f"{self.sidecar}-watch"),
        ]
        self._watch()
        await self.sync()

    def _create_sidecar(self) -> None:
        import docker.errors

        self._sidecar_made = True
        try:
            container = self.client.containers.create(
                self.image,
                entrypoint=["sleep", "infinity"],
                command=[],
                healthcheck={"test": ["NONE"]},
                name=self.sidecar,
                init=True,
                detach=True,
                network_mode="none",
                network_disabled=True,
                labels=self.labels,
                volumes={self.volume: {"bind": BRIDGE_PATH, "mode": "rw,nocopy"}},
                mem_limit="128m",
                pids_limit=64,
            )
            container.start()
        except docker.errors.ImageNotFound as exc:
            raise WorkspaceError(
                f"the bridge relay's image {self.image} is not on the workspace's engine "
                "(`crucible doctor --fix` makes it on this machine's)"
            ) from exc

    def _watch(self) -> None:
        """inotify on the host's bridge (its events set ``_changed``), else a poll."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "inotify_init1")
            if libc.inotify_add_watch(fd, os.fsencode(self.bridge_dir), _IN_EVENTS) < 0:
                os.close(fd)
                raise OSError(ctypes.get_errno(), "inotify_add_watch")
        except (OSError, AttributeError):
            self._tasks.append(asyncio.create_task(self._poll(), name=f"{self.sidecar}-poll"))
            return
        self._watch_fd = fd
        asyncio.get_running_loop().add_reader(fd, self._drain_watch)

    def _drain_watch(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._watch_fd or -1, 4096):
                pass
        self._changed.set()

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(POLL_EVERY)
            self._changed.set()

    async def _sync_on_change(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self.sync()
            except (WorkspaceError, InfrastructureError):
                return  # the relay ended; the next command's sync says so

    # -- mirroring the host's bridge -------------------------------------------------------

    async def sync(self) -> None:
        """Make the workspace's bridge what the host's is now: sockets listened on, files
        copied, what went removed; returns once the relay has applied it."""
        async with self._sync_lock:
            self._alive()
            frames = self._changes()
            if not frames:
                return
            ack = self._next_ack = self._next_ack + 1
            done = self._acks[ack] = asyncio.get_running_loop().create_future()
            try:
                await self._send(b"".join([*frames, _frame(b"S", ack)]))
                await within(done, SYNC_TIMEOUT)
            except TimeoutError:
                self._end(f"the bridge relay in {self.sidecar} did not answer within {SYNC_TIMEOUT:.0f} s")
                self._alive()
            finally:
                self._acks.pop(ack, None)
                if done.done() and not done.cancelled():
                    done.exception()  # raised here already, one way or the other: retrieved

    def _changes(self) -> list[bytes]:
        """Frames that turn what was mirrored into what the host's bridge holds now."""
        now: dict[str, tuple[int, ...]] = {}
        with contextlib.suppress(FileNotFoundError), os.scandir(self.bridge_dir) as entries:
            for entry in entries:
                if not _NAME.fullmatch(entry.name):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISSOCK(st.st_mode):
                        now[entry.name] = (0,)
                    elif stat.S_ISREG(st.st_mode):
                        now[entry.name] = (1, st.st_mtime_ns, st.st_size, stat.S_IMODE(st.st_mode))
        frames = []
        for name, was in self._mirrored.items():
            if name not in now or now[name][0] != was[0]:  # gone, or a socket now a file
                frames.append(_frame(b"U" if was == (0,) else b"R", 0, name.encode()))
        for name, sig in now.items():
            if self._mirrored.get(name) == sig:
                continue
            if sig == (0,):
                frames.append(_frame(b"L", 0, name.encode()))
            else:
                try:
                    data = Path(self.bridge_dir, name).read_bytes()
                except OSError:
                    now.pop(name)
                    continue
                head = struct.pack(">IH", sig[3], len(name.encode())) + name.encode()
                frames.append(_frame(b"F", 0, head + data))
        self._mirrored = now
        return frames

    # -- connections -----------------------------------------------------------------------

    async def _read_frames(self) -> None:
        assert self.process is not None
        buf = bytearray()
        try:
            while chunk := await self.process.read(1 << 20):
                buf += chunk
                while len(buf) >= FRAME.size:
                    kind, cid, length = FRAME.unpack_from(buf)
                    if len(buf) < FRAME.size + length:
                        break
                    payload = bytes(buf[FRAME.size : FRAME.size + length])
                    del buf[: FRAME.size + length]
                    self._from_relay(kind, cid, payload)
        finally:
            self._end(f"the bridge relay in {self.sidecar} ended: {self._stderr.decode(errors='replace').strip()}")

    def _from_relay(self, kind: bytes, cid: int, payload: bytes) -> None:
        if kind == b"Y":
            if (done := self._acks.get(cid)) is not None and not done.done():
                done.set_result(None)
        elif kind == b"O":
            conn = self._conns[cid] = _Conn()
            conn.task = asyncio.create_task(self._serve(cid, payload.decode(), conn), name=f"bridge-conn-{cid}")
        elif (conn_ := self._conns.get(cid)) is None:
            return  # ended here already
        elif kind == b"A":
            conn_.unacked -= struct.unpack(">I", payload)[0]
            conn_.room.set()
        else:
            conn_.to_host.put_nowait(payload if kind == b"D" else b"" if kind == b"E" else None)

    async def _serve(self, cid: int, name: str, conn: _Conn) -> None:
        """One connection: the client's bytes to the host's socket, and its answers back."""
        try:
            reader, writer = await asyncio.open_unix_connection(os.path.join(self.bridge_dir, name))
        except OSError as exc:
            log.debug("bridge connection %d to %s refused: %s", cid, name, exc)
            self._conns.pop(cid, None)
            await self._send_quietly(_frame(b"C", cid))
            return
        back = asyncio.create_task(self._answers(cid, reader, conn))
        try:
            while (data := await conn.to_host.get()) is not None:  # None: aborted
                if not data:  # the client's EOF: the host's answers still come back
                    if writer.can_write_eof():
                        writer.write_eof()
                    await back
                    return
                writer.write(data)
                await writer.drain()
                await self._send(_frame(b"A", cid, struct.pack(">I", len(data))))
        except (OSError, WorkspaceError, InfrastructureError):
            await self._send_quietly(_frame(b"C", cid))
        finally:
            back.cancel()
            self._conns.pop(cid, None)
            writer.close()

    async def _answers(self, cid: int, reader: asyncio.StreamReader, conn: _Conn) -> None:
        try:
            while data := await reader.read(CHUNK):
                while conn.unacked >= WINDOW:  # the client is behind: wait for its relay's A
                    conn.room.clear()
                    await conn.room.wait()
                conn.unacked += len(data)
                await self._send(_frame(b"D", cid, data))
            await self._send(_frame(b"E", cid))
        except (OSError, WorkspaceError, InfrastructureError):
            await self._send_quietly(_frame(b"C", cid))

    # -- the stream ------------------------------------------------------------------------

    async def _send(self, data: bytes) -> None:
        self._alive()
        assert self.process is not None
        try:
            await self.process.write(data)
        except BrokenPipeError as exc:
            self._end(f"the bridge relay in {self.sidecar} took no more input: {exc}")
            self._alive()

    async def _send_quietly(self, data: bytes) -> None:
        with contextlib.suppress(WorkspaceError, InfrastructureError, BrokenPipeError):
            await self._send(data)

    async def _read_stderr(self) -> None:
        assert self.process is not None
        while chunk := await self.process.read_stderr():
            self._stderr = (self._stderr + chunk)[-2000:]
            log.warning("bridge relay %s: %s", self.sidecar, chunk.decode(errors="replace").strip())

    def _alive(self) -> None:
        if self._ended is not None:
            raise self._ended

    def _end(self, why: str, *, closed: bool = False) -> None:
        """No more relaying: closed by us, or lost (machinery failing: ``InfrastructureError``)."""
        if self._ended is None:
            lost = InfrastructureError(why, phase=self.phase, host=self.host)
            self._ended = WorkspaceError(why) if closed else lost
        for done in self._acks.values():
            if not done.done():
                done.set_exception(self._ended)
        for conn in self._conns.values():
            conn.to_host.put_nowait(None)

    # -- close -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop relaying and remove the sidecar and the volume (after the workspace's
        container, which holds the volume too, is gone). Safe on any partial start; what
        cannot be removed (its host gone) is logged and left to the reaper."""
        self._end("the bridge relay was closed", closed=True)
        if self._watch_fd is not None:
            asyncio.get_running_loop().remove_reader(self._watch_fd)
            os.close(self._watch_fd)
            self._watch_fd = None
        if self.process is not None:
            self.process.abort()
        tasks = self._tasks + [c.task for c in self._conns.values() if c.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await finish_even_if_cancelled(asyncio.to_thread(self._remove))

    def _remove(self) -> None:
        import docker.errors
        import requests.exceptions

        problems = []
        if self._sidecar_made:
            try:
                self.client.api.remove_container(self.sidecar, force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if not being_removed(exc):
                    problems.append(f"container {self.sidecar}: {exc}")
            except requests.exceptions.RequestException as exc:  # its host is gone
                problems.append(f"container {self.sidecar}: {exc}")
        if self._volume_made:
            try:
                self.client.api.remove_volume(self.volume, force=True)
            except docker.errors.NotFound:
                pass
            except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
                problems.append(f"volume {self.volume}: {exc}")
        if problems:  # the reaper removes them once this process is gone
            log.warning("could not remove the bridge relay's %s", "; ".join(problems))


def _frame(kind: bytes, cid: int, payload: bytes = b"") -> bytes:
    return FRAME.pack(kind, cid, len(payload)) + payload


def relay_image() -> str:
    """The sidecar's image: crucible's base (its perl-base runs relay.pl), by its tag; it must
    be on the workspace's engine (the sidecar's start says so in one line where it is not)."""
    from engine.build.baseimage import BaseRecipe

    return BaseRecipe().tag


BRIDGE_MODES = ("mount", "relay")


def check_bridge(mode: str) -> str:
    """``runtime.bridge``, checked: one line naming the setting where it is neither mode."""
    if mode not in BRIDGE_MODES:
        raise ConfigError(f"runtime.bridge must be one of {', '.join(BRIDGE_MODES)}, got {mode!r}")
    return mode
