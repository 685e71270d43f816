"""The two ways the workspace uses its spawner (engine/runtimes/docker/spawner.py): a command
run to its end (``run_spawned``, ``Workspace.exec``) and a process it talks to
(``open_spawned``, ``Workspace.open_process`` without a terminal), each as ``docker exec``'s
counterpart in engine/runtimes/docker/exec.py and process.py behaves."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Mapping, Sequence

from engine.errors import WorkspaceError
from engine.models import ExecResult, TtySize
from engine.runtimes.docker.exec import DRAIN_GRACE, exec_result
from engine.runtimes.docker.spawner import Spawned, Spawner
from engine.runtimes.docker.stream import BoundedBuffer
from engine.util.aio import finish_even_if_cancelled, within

TAKEN_EVERY = 1 << 16
"""Output bytes taken before the spawner is told (it reads a command's output while under 1 MB is untaken)."""
START_WAIT = 60.0
"""Seconds a process (``open_process``) has to start (its exec to succeed); an exec's own
deadline bounds its start. The tested uid can stop a child between its setuid and its exec."""
KILL_WAIT = 5.0


class SpawnedExec(Spawned):
    """A command run to its end (``Workspace.exec``): its output into bounded buffers as it comes."""

    def __init__(self, spawner: Spawner, command_id: int, loop: asyncio.AbstractEventLoop, max_output: int) -> None:
        super().__init__(spawner, command_id, loop)
        self.stdout = BoundedBuffer(max_output)
        self.stderr = BoundedBuffer(max_output)
        self._untold = 0

    def output(self, kind: bytes, data: bytes) -> None:
        (self.stdout if kind == b"O" else self.stderr).add(data)
        self._untold += len(data)
        if self._untold >= TAKEN_EVERY:  # kept or dropped, it is taken: the spawner reads on
            self.taken(self._untold)
            self._untold = 0


async def run_spawned(
    spawner: Spawner,
    argv: Sequence[str],
    *,
    user: int,
    cwd: str | None,
    env: Mapping[str, str],
    timeout: float,
    stdin: bytes | None,
    max_output: int,
    backstop_grace: float,
) -> ExecResult:
    """``Workspace.exec`` through the spawner, as ``engine.runtimes.docker.exec.run_exec`` does
    it through ``docker exec``: GNU ``timeout`` holds the deadline in the container, a backstop
    here ``backstop_grace`` past it, the group killed on a cancel."""
    if not argv:
        raise ValueError("exec needs a non-empty argv")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    started = time.monotonic()
    deadline = started + timeout + backstop_grace
    # Never "0.000": to GNU timeout a zero duration means no deadline at all.
    wrapped = ["timeout", "-s", "KILL", f"{max(timeout, 0.001):.3f}", *argv]
    command = spawner.spawn(
        lambda s, i, loop: SpawnedExec(s, i, loop, max_output),
        wrapped,
        user=user,
        cwd=cwd,
        env=env,
        no_stdin=stdin is None,
    )
    feeding: asyncio.Future[None] | None = None
    try:
        try:  # its start counts against its deadline: a child stopped before its exec must not hang it
            await within(asyncio.shield(command.pid), max(deadline - time.monotonic(), 0))
        except WorkspaceError as exc:
            raise WorkspaceError(f"could not start {argv[0]!r}: {exc}") from exc
        except TimeoutError:
            await finish_even_if_cancelled(_killed(command))
            return exec_result(command, 124, True, started)
        if stdin is not None:
            feeding = asyncio.ensure_future(_feed(command, stdin))
        try:
            code = await within(asyncio.shield(command.exit), max(deadline - time.monotonic(), 0))
        except TimeoutError:  # the backstop: timeout in there did not end it
            await finish_even_if_cancelled(_killed(command))
            return exec_result(command, 124, True, started)
        try:  # what it wrote last; a background child holding the output open gets a moment
            await within(asyncio.shield(command.ended), DRAIN_GRACE)
        except TimeoutError:
            pass
    except BaseException:
        if not command.exit.done():
            await finish_even_if_cancelled(_killed(command))
        raise
    finally:
        if feeding is not None:
            feeding.cancel()
        command.forget()  # what a background child still writes is read and dropped in there
    timed_out = code in (124, 137) and time.monotonic() - started >= timeout
    return exec_result(command, 124 if timed_out else code, timed_out, started)


async def _feed(command: Spawned, data: bytes) -> None:
    """All of ``data``, then EOF, as a command reading it takes it."""
    try:
        await command.give_stdin(data)
        command.close_stdin_now()
    except BrokenPipeError:
        pass  # the command exited without reading all its input; that is its business


async def _killed(command: Spawned) -> None:
    command.signal(signal.SIGKILL)
    with contextlib.suppress(TimeoutError, WorkspaceError):
        await within(asyncio.shield(command.exit), KILL_WAIT)


class SpawnedProcess(Spawned):
    """``Workspace.open_process`` through the spawner (``engine.interfaces.Process``), no terminal."""

    def __init__(self, spawner: Spawner, command_id: int, loop: asyncio.AbstractEventLoop, separate: bool) -> None:
        super().__init__(spawner, command_id, loop)
        self._separate = separate
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._err_chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._pending, self._err_pending = b"", b""
        self._merged_open = 2 if not separate else 1
        self._read_eof, self._err_eof = False, not separate
        self._stdin_closed = False

    def output(self, kind: bytes, data: bytes) -> None:
        target = self._err_chunks if kind == b"R" and self._separate else self._chunks
        self._call(lambda: target.put_nowait(data))

    async def write(self, data: bytes) -> None:
        if self._stdin_closed or self.exit.done():
            raise BrokenPipeError(32, "the process's stdin is closed")
        await self.give_stdin(data)  # waits while its pipe is full, as a write to it would

    async def close_stdin(self) -> None:
        if not self._stdin_closed:
            self._stdin_closed = True
            self.close_stdin_now()

    async def read(self, n: int = 65536) -> bytes:
        while not self._pending and not self._read_eof:
            chunk = await self._chunks.get()
            if chunk:
                self.taken(len(chunk))
                self._pending = chunk
                break
            self._merged_open -= 1  # one stream's end; merged, both must end
            self._read_eof = self._merged_open <= 0
        data, self._pending = self._pending[:n], self._pending[n:]
        return data

    async def read_stderr(self, n: int = 65536) -> bytes:
        while not self._err_pending and not self._err_eof:
            chunk = await self._err_chunks.get()
            if not chunk:
                self._err_eof = True
                break
            self.taken(len(chunk))
            self._err_pending = chunk
        data, self._err_pending = self._err_pending[:n], self._err_pending[n:]
        return data

    async def wait(self, timeout: float | None = None) -> int:
        # Shielded: a waiter cancelled (a relay giving up on the process) must not cancel the
        # exit itself, or the process would look ended and ``kill`` would leave it running.
        try:
            return await within(asyncio.shield(self.exit), timeout)
        except TimeoutError:
            raise TimeoutError(f"process did not exit within {timeout} s") from None

    async def kill(self) -> None:
        if not self.exit.done():
            self.signal(signal.SIGKILL)

    async def resize(self, size: TtySize) -> None:
        return None  # no terminal: a tty process is a docker exec

    def abort(self) -> None:
        """The workspace closes: every reader sees the end."""
        self.lost("the workspace closed")


async def open_spawned(
    spawner: Spawner,
    argv: Sequence[str],
    *,
    user: int,
    cwd: str | None,
    env: Mapping[str, str],
    separate_stderr: bool,
) -> SpawnedProcess:
    if not argv:
        raise ValueError("open_process needs a non-empty argv")
    process = spawner.spawn(
        lambda s, i, loop: SpawnedProcess(s, i, loop, separate_stderr), argv, user=user, cwd=cwd, env=env
    )
    try:
        await within(asyncio.shield(process.pid), START_WAIT)
    except WorkspaceError as exc:
        process.forget()
        raise WorkspaceError(f"could not start {argv[0]!r}: {exc}") from exc
    except TimeoutError:
        process.signal(signal.SIGKILL)
        process.forget()
        raise WorkspaceError(f"could not start {argv[0]!r}: it did not start within {START_WAIT:g} s") from None
    except BaseException:
        process.signal(signal.SIGKILL)  # cancelled before it was handed over: it must not run on unseen
        raise
    return process
